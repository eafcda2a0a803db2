"""An out-of-band program as Ganeti's QA suite writes one (qa/qa_node.py's
_CreateOobScriptStructure): it records its arguments, prints a data file and
exits with the code in another file; each test sets data and code."""

from __future__ import annotations

import shlex
from pathlib import Path

from corral.paths import Paths

# Where the program is, as the ``oob_program`` node parameter names it.
PROGRAM = "/usr/local/sbin/corral-test-oob"


class OobProgram:
    """The program below a node's root, and its files in ``work``."""

    def __init__(self, paths: Paths, work: Path, name: str = PROGRAM) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.calls = work / "calls"  # one line per run: its arguments
        self.data = work / "data"
        self.exit_code = work / "exit-code"
        self.calls.write_text("")
        self.answer("", 0)
        self.path = paths.from_wire(name)
        self.write(
            f'echo "$@" >> {shlex.quote(str(self.calls))}\n'
            f"cat {shlex.quote(str(self.data))}\n"
            f"exit $(cat {shlex.quote(str(self.exit_code))})\n"
        )

    def write(self, body: str) -> None:
        """Make the program run ``body`` (a /bin/sh script)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("#!/bin/sh\n" + body)
        self.path.chmod(0o700)

    def answer(self, data: str, exit_code: int = 0) -> None:
        """What the next runs print, and their exit code."""
        self.data.write_text(data)
        self.exit_code.write_text(f"{exit_code}\n")

    def runs(self) -> list[str]:
        """The arguments of each run so far."""
        return self.calls.read_text().splitlines()
