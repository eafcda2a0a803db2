"""Dropping root to the RAPI user, checked in real child processes."""

from __future__ import annotations

import grp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import errors
from corral.process.privileges import DEFAULT_RAPI_USER, drop_privileges, lookup_user

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

# Drops privileges, then reports its ids and which of the given files it can read.
_CHILD = """
import json, os, sys
from corral.process.privileges import drop_privileges
drop_privileges(sys.argv[1])
readable = []
for path in sys.argv[2:]:
    try:
        with open(path) as f:
            f.read()
        readable.append(True)
    except PermissionError:
        readable.append(False)
try:
    os.setuid(0)
    regained = True
except PermissionError:
    regained = False
no_new_privs = [line.split()[1] for line in open("/proc/self/status")
                if line.startswith("NoNewPrivs:")]
print(json.dumps({"resuid": os.getresuid(), "resgid": os.getresgid(),
                  "groups": sorted(os.getgroups()), "readable": readable,
                  "regained": regained, "no_new_privs": no_new_privs}))
"""


def _run_child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_lookup_user_known() -> None:
    assert lookup_user("root") == (0, 0)
    uid, gid = lookup_user(DEFAULT_RAPI_USER)
    assert uid != 0 and gid != 0


def test_lookup_user_missing_says_how_to_create_it() -> None:
    with pytest.raises(errors.CommandError) as caught:
        lookup_user("corral-no-such-user-x7q")
    message = caught.value.message
    assert "'corral-no-such-user-x7q' does not exist" in message
    assert "useradd --system" in message and "scripts/setup.sh" in message
    assert "\n" not in message


def test_drop_to_root_refused() -> None:
    with pytest.raises(errors.CommandError, match="uid or gid 0"):
        drop_privileges("root")


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory everyone may search (pytest's tmp_path has 0700 parents)."""
    path = Path(tempfile.mkdtemp(prefix="corral-priv-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


@needs_root
def test_drop_privileges_in_child(open_dir: Path) -> None:
    secret = open_dir / "secret.pem"
    secret.write_text("private key\n")
    secret.chmod(0o600)
    public = open_dir / "public.txt"  # control: the directory itself is reachable
    public.write_text("hello\n")
    public.chmod(0o644)
    uid, gid = lookup_user(DEFAULT_RAPI_USER)
    done = _run_child(DEFAULT_RAPI_USER, str(secret), str(public))
    assert done.returncode == 0, done.stderr
    state = json.loads(done.stdout)
    assert state == {
        "resuid": [uid, uid, uid],
        "resgid": [gid, gid, gid],
        "groups": [gid],
        "readable": [False, True],
        "regained": False,
        "no_new_privs": ["1"],
    }


@needs_root
def test_drop_privileges_keeps_listed_supplementary_groups() -> None:
    # A second user with an extra group from /etc/group (the way the luxi
    # socket's group would be granted); unique names, removed afterwards.
    suffix = os.urandom(3).hex()
    user, extra = f"crl-t{suffix}", f"crl-g{suffix}"
    subprocess.run(["groupadd", "--system", extra], check=True)
    try:
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "-G", extra, user],
            check=True,
        )
        try:
            done = _run_child(user, "/etc/shadow")
            assert done.returncode == 0, done.stderr
            state = json.loads(done.stdout)
            _, gid = lookup_user(user)
            assert state["groups"] == sorted([gid, grp.getgrnam(extra).gr_gid])
            assert 0 not in state["groups"]
            assert state["readable"] == [False]
        finally:
            subprocess.run(["userdel", user], check=True)
    finally:
        subprocess.run(["groupdel", extra], check=False)


def test_not_root_already_the_user_is_fine() -> None:
    # As whichever user runs the tests: dropping "to" a different user fails
    # unless root, and a non-root caller that already is the user passes.
    if os.geteuid() == 0:
        child = """
import sys
from corral.process.privileges import drop_privileges
from corral import errors
drop_privileges(sys.argv[1])
drop_privileges(sys.argv[1])  # again, now unprivileged: nothing to do
try:
    drop_privileges("nobody")
except errors.CommandError as err:
    print(err.message)
"""
        done = subprocess.run(
            [sys.executable, "-c", child, DEFAULT_RAPI_USER],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "Cannot become user 'nobody'" in done.stdout
        assert "start the daemon as root or as 'nobody'" in done.stdout
    else:
        with pytest.raises(errors.CommandError, match="Cannot become user"):
            drop_privileges(DEFAULT_RAPI_USER)
