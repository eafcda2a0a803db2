"""Running a command with Ganeti 3.0.2's tool and with Corral's, and comparing.

Read-only commands run both tools on the same cluster: the outputs must be
equal byte for byte (standard output, standard error and exit code).  A
command that changes something runs on twins (two jobs, two instances in the
same state): Ganeti's tool on one, Corral's on the other, and the twins' names
are replaced by a placeholder before comparing; times of day, which move on
between the two runs, too.
"""

from __future__ import annotations

import difflib
import os
import pty
import re
import select
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conformance.ganeti import SYSTEM_PYTHON, ganeti_tree, namespace_command, run_ganeti
from tests.helpers.cluster import Result, TestCluster

# ctime() of job feedback lines and "%F %T.%f" timestamps of gnt-job info.
_CTIME = re.compile(r"\b[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\b")
_ISO = re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?")
_DELTA = re.compile(r"\d+\.\d{6}(s| seconds)")
# Reason trail entries' timestamps, in nanoseconds.
_NANOSECONDS = re.compile(r"\b1\d{18}\b")
# What differs between twins made alike: their job ids, UUIDs and MACs.
_JOB_IDS = re.compile(
    r"\b(jobs? |JobID: |^)(\d+)\b(?=( for |: <TWIN>| |,|$))", re.IGNORECASE | re.MULTILINE
)
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_MAC = re.compile(r"\b[0-9a-f]{2}(:[0-9a-f]{2}){5}\b")


@dataclass(frozen=True)
class Output:
    rc: int
    stdout: str
    stderr: str

    @classmethod
    def of(cls, result: Result, names: dict[str, str] | None = None) -> Output:
        return cls(result.rc, normalized(result.stdout, names), normalized(result.stderr, names))


def normalized(text: str, names: dict[str, str] | None = None) -> str:
    """``text`` with the times of day blanked and twins' names replaced."""
    text = _CTIME.sub("<ctime>", text)
    text = _ISO.sub("<time>", text)
    text = _NANOSECONDS.sub("<ns>", text)
    text = _DELTA.sub(r"<delta>\1", text)
    for name, placeholder in sorted((names or {}).items(), key=lambda kv: -len(kv[0])):
        text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", placeholder, text)
    if names:
        text = _JOB_IDS.sub(r"\1<job>", text)
        text = _UUID.sub("<uuid>", text)
        text = _MAC.sub("<mac>", text)
    return text


def corral(cl: TestCluster, argv: list[str], stdin: str | None = None) -> Result:
    """Corral's ``gnt-<argv[0]> argv[1:]``."""
    return cl.gnt(argv[0].removeprefix("gnt-"), *argv[1:], stdin=stdin)


def ganeti(cl: TestCluster, argv: list[str], stdin: str | None = None) -> Result:
    """Ganeti 3.0.2's ``gnt-<argv[0]> argv[1:]`` against the same cluster."""
    return run_ganeti(cl.paths.root, [argv[0], *argv[1:]], stdin=stdin)


def difference(theirs: Output, ours: Output) -> str:
    """A readable account of how two outputs differ."""
    lines = [f"exit code: Ganeti {theirs.rc}, Corral {ours.rc}"]
    for name in ("stdout", "stderr"):
        diff = difflib.unified_diff(
            getattr(theirs, name).splitlines(),
            getattr(ours, name).splitlines(),
            f"Ganeti {name}",
            f"Corral {name}",
            lineterm="",
        )
        lines += list(diff)
    return "\n".join(lines)


def assert_same(cl: TestCluster, argv: list[str], stdin: str | None = None) -> Output:
    """Run a read-only command with both tools; the outputs must be equal."""
    theirs = Output.of(ganeti(cl, argv, stdin))
    ours = Output.of(corral(cl, argv, stdin))
    assert ours == theirs, f"{argv}\n{difference(theirs, ours)}"
    return theirs


def assert_same_on_twins(
    cl: TestCluster, argv: list[str], twins: tuple[str, str], placeholder: str = "<TWIN>"
) -> Output:
    """Ganeti's tool on ``argv`` with ``twins[0]``, Corral's with ``twins[1]``
    (every ``{}`` in ``argv`` is the twin); outputs equal once the twins'
    names are the placeholder."""
    theirs = Output.of(
        ganeti(cl, [a.replace("{}", twins[0]) for a in argv]), {twins[0]: placeholder}
    )
    ours = Output.of(corral(cl, [a.replace("{}", twins[1]) for a in argv]), {twins[1]: placeholder})
    assert ours == theirs, f"{argv}\n{difference(theirs, ours)}"
    return theirs


def on_terminal(
    argv: list[str], answer: str, env: dict[str, str] | None = None, timeout: float = 60
) -> tuple[int, str]:
    """Run ``argv`` with a terminal as its controlling tty (Ganeti asks its
    questions on /dev/tty), answer the first question, return (rc, all output)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a new session whose controlling tty is the pty
        os.execvpe(argv[0], argv, {**os.environ, **(env or {})})
    chunks: list[bytes] = []
    answered = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], deadline - time.monotonic())
        if not ready:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
        # Answer once the prompt's choices have been written ("y/[n]/?: ").
        if not answered and b"".join(chunks).endswith(b"?: "):
            os.write(fd, answer.encode() + b"\n")
            answered = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode().replace("\r\n", "\n")


def ganeti_on_terminal(cl: TestCluster, argv: list[str], answer: str) -> tuple[int, str]:
    """Ganeti's tool on a terminal (see ``on_terminal``), in its mount namespace."""
    tree = ganeti_tree()
    command = [SYSTEM_PYTHON, str(tree / argv[0]), *argv[1:]]
    with tempfile.TemporaryDirectory(prefix="ganeti-ns-") as work:
        shell = namespace_command(cl.paths.root, command, Path(work))
        env = {"PYTHONPATH": str(tree), "LANG": "C.UTF-8"}
        return on_terminal(["/bin/sh", "-c", f"cd {tree} && {shell}"], answer, env)


def corral_on_terminal(cl: TestCluster, argv: list[str], answer: str) -> tuple[int, str]:
    """Corral's tool on a terminal (see ``on_terminal``)."""
    module = f"corral.cli.gnt_{argv[0].removeprefix('gnt-')}"
    return on_terminal([sys.executable, "-m", module, *argv[1:]], answer, cl.env)
