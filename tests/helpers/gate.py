"""A gate that holds a script (an OS script, a hook) until the test opens it.

Typical use::

    gate = Gate.make(tmp_path, "rename")
    cl.hook("instance-rename", "pre", "00-gate", gate.script())
    ...                                    # submit the job
    wait_until(gate.started.exists, 30)    # the script runs, and waits
    gate.release()                         # let it go on
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Gate:
    started: Path  # written by the script when it runs
    fifo: Path  # the script reads it: blocks until the test writes

    @classmethod
    def make(cls, directory: Path, name: str = "gate") -> Gate:
        """A new gate with its files in ``directory``."""
        gate = cls(directory / f"{name}.started", directory / f"{name}.fifo")
        os.mkfifo(gate.fifo)
        return gate

    def script(self) -> str:
        """A shell script that says it started, then waits for :meth:`release`."""
        return f'#!/bin/sh\necho started > "{self.started}"\nread line < "{self.fifo}"\n'

    def release(self) -> None:
        """Let a waiting script go on (nothing to do if none waits)."""
        with contextlib.suppress(OSError):  # ENXIO: no script reads the FIFO
            fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"go\n")
            os.close(fd)
