"""Ganeti 3.0.2's QA suite, fetched from Debian's source package.

``apt-get source --download-only --tar-only ganeti`` (with a private ``deb-src`` list for
bookworm, so the host's apt configuration is left alone) puts
``ganeti_3.0.2.orig.tar.gz`` into ``.cache/ganeti-src``; its ``qa/`` and
``tools/`` (the QA runs ``../tools/move-instance``) are unpacked next to it,
byte for byte.  Ganeti's build generates ``tools/burnin`` (the QA's burnin
test uploads it from there); the binary package's copy of that generated file
is put in its place.

Typical use::

    tree = qa_tree()          # .cache/ganeti-src/ganeti-3.0.2, with qa/ and tools/burnin
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.conformance.ganeti import VERSION, GanetiUnavailable, ganeti_tree
from tests.helpers.noded import REPO_ROOT

CACHE = REPO_ROOT / ".cache" / "ganeti-src"
TARBALL = f"ganeti_{VERSION}.orig.tar.gz"
# The upstream tarball Debian's bookworm ganeti_3.0.2-3.dsc names (apt checks it
# against the signed Sources index too).
TARBALL_SHA256 = "66864ffe105931b2344a562cedc7476a23e3dd2f3a20565388363e7f5aa95761"
SOURCES_LIST = (
    "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]"
    " http://deb.debian.org/debian bookworm main\n"
)


def _apt(*argv: str) -> list[str]:
    """``apt-get`` with a private source list and state (nothing of the host's)."""
    lists = CACHE / "apt-lists"
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    return [
        "apt-get",
        "-qq",
        f"-o=Dir::Etc::SourceList={CACHE / 'sources.list'}",
        "-o=Dir::Etc::SourceParts=/nonexistent",
        f"-o=Dir::State::Lists={lists}",
        "-o=Dir::Cache::pkgcache=",
        "-o=Dir::Cache::srcpkgcache=",
        "-o=APT::Sandbox::User=root",  # the cache is root's: no unprivileged download
        *argv,
    ]


def _fetch(check: Callable[[], bool], *argv: str, attempts: int = 8) -> None:
    """Run ``apt-get argv`` until ``check()`` holds: a mirror's or DNS's hiccup
    (``apt-get update`` even exits 0 when a fetch failed, with a warning) must
    not fail the run.  Waits 2, 4, 8... seconds between tries (a network
    outage of four minutes is survived); the last try's output says why."""
    said = ""
    for attempt in range(attempts):
        if attempt:
            time.sleep(2**attempt)
        proc = subprocess.run(_apt(*argv), cwd=CACHE, capture_output=True, text=True, check=False)
        said = (proc.stderr or proc.stdout).strip()
        if check():
            return
    raise GanetiUnavailable(f"apt-get {shlex.join(argv)} did not give what it should: {said}")


def _download() -> Path:
    """The orig tarball, downloaded once into the cache."""
    tarball = CACHE / TARBALL
    if not tarball.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        (CACHE / "sources.list").write_text(SOURCES_LIST)
        _fetch(lambda: any((CACHE / "apt-lists").glob("*_Sources*")), "update")
        # --tar-only: the upstream tarball alone (Debian's packaging is not wanted)
        _fetch(tarball.is_file, "source", "--download-only", "--tar-only", "ganeti")
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    if digest != TARBALL_SHA256:
        raise GanetiUnavailable(f"{tarball} has sha256 {digest}, not {TARBALL_SHA256}")
    return tarball


def qa_tree() -> Path:
    """Ganeti's source root with ``qa/`` and ``tools/`` (unchanged) and the built
    ``tools/burnin``."""
    top = CACHE / f"ganeti-{VERSION}"
    if (top / "qa" / "ganeti-qa.py").is_file() and (top / "tools" / "burnin").is_file():
        return top
    tarball = _download()
    staging = Path(tempfile.mkdtemp(dir=CACHE))
    wanted = (f"ganeti-{VERSION}/qa/", f"ganeti-{VERSION}/tools/")
    with tarfile.open(tarball) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(wanted)]
        archive.extractall(staging, members=members, filter="data")
    tools = staging / f"ganeti-{VERSION}" / "tools"
    shutil.copy2(ganeti_tree() / "burnin", tools / "burnin")
    shutil.rmtree(top, ignore_errors=True)
    (staging / f"ganeti-{VERSION}").rename(top)
    staging.rmdir()
    return top
