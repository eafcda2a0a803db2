"""The gnt-* commands.  They import only the standard library and corral's
stdlib-only modules, so they start fast.

Start-up is most of what a command costs (~35 ms), so the modules they import
also stay clear of the slower standard modules: ``typing`` (~3 ms) and
``pathlib`` (~4 ms).  Their type-only imports sit under a module-level
``TYPE_CHECKING = False`` (mypy takes it as true; PEP 781's pattern), paths are
strings (:func:`corral.paths.below`), and dataclasses/NamedTuple (~10 ms) give
way to plain classes.
"""
