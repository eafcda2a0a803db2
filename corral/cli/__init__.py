"""The gnt-* commands.  They import only the standard library and corral's
stdlib-only modules, so they start fast."""
