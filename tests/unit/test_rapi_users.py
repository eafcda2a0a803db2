"""The RAPI users file: parsing, password schemes, re-reading on change, dir_fd."""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.process.privileges import DEFAULT_RAPI_USER, lookup_user
from corral.rapi.users import REALM, User, UsersFile, parse_users, password_matches


def _user(password: str, name: str = "alice") -> User:
    return User(name=name, password=password, options=frozenset())


# -- parsing -------------------------------------------------------------------


def test_parse_users_fields_options_comments_and_blank_lines() -> None:
    text = (
        "# a comment\n"
        "\n"
        "   \n"
        "alice secret read\n"
        "  bob {HA1}0123abcd write,read  \n"
        "carol pw\n"
        "dave pw2 read, write\n"
        "  # indented comment\n"
    )
    users = parse_users(text)
    assert users == {
        "alice": User("alice", "secret", frozenset({"read"})),
        "bob": User("bob", "{HA1}0123abcd", frozenset({"write", "read"})),
        "carol": User("carol", "pw", frozenset()),
        "dave": User("dave", "pw2", frozenset({"read", "write"})),
    }


def test_parse_users_ignores_short_lines_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="corral.rapi.users"):
        users = parse_users("lonely\nalice pw write\n")
    assert list(users) == ["alice"]
    assert "less than two fields" in caplog.text


def test_parse_users_later_line_wins_and_empty_options_dropped() -> None:
    users = parse_users("alice old read\nalice new write,,\n")
    assert users["alice"] == User("alice", "new", frozenset({"write"}))


# -- password schemes ----------------------------------------------------------


def test_plain_password() -> None:
    assert password_matches(_user("s3cret"), "s3cret")
    assert not password_matches(_user("s3cret"), "s3cre")
    assert not password_matches(_user("s3cret"), "s3cret ")
    assert not password_matches(_user("s3cret"), "")


@pytest.mark.parametrize("prefix", ["{cleartext}", "{CLEARTEXT}", "{ClearText}"])
def test_cleartext_scheme_any_case(prefix: str) -> None:
    user = _user(prefix + "pw")
    assert password_matches(user, "pw")
    assert not password_matches(user, prefix + "pw")
    assert not password_matches(user, "PW")


@pytest.mark.parametrize(
    "stored",
    [
        "{cleartext}",
        "{CLEARTEXT}",
        "{HA1}" + hashlib.md5(b"alice:Ganeti Remote API:").hexdigest(),
    ],
    ids=["cleartext", "CLEARTEXT", "ha1"],
)
def test_an_empty_password_never_logs_in(stored: str) -> None:
    """Issue 20: ``alice {cleartext} write`` (a line left unfinished) let anyone
    in as alice with an empty password."""
    assert not password_matches(_user(stored), "")


def test_an_unfinished_cleartext_line_opens_no_account() -> None:
    alice = parse_users("alice {cleartext} write\n")["alice"]
    assert alice.options == {"write"}
    assert not password_matches(alice, "")


def test_ha1_known_value() -> None:
    # RFC 2617's H(A1) computed independently of the module's realm constant
    ha1 = hashlib.md5(b"jack:Ganeti Remote API:abc123").hexdigest()
    assert REALM == "Ganeti Remote API"
    for stored in ("{HA1}" + ha1, "{ha1}" + ha1, "{Ha1}" + ha1.upper()):
        user = _user(stored, name="jack")
        assert password_matches(user, "abc123"), stored
        assert not password_matches(user, "abc1234"), stored
        assert not password_matches(user, ha1), stored
    # The user name is part of the hash: the same entry under another name fails.
    assert not password_matches(_user("{HA1}" + ha1, name="jill"), "abc123")


def test_ha1_non_ascii_password() -> None:
    ha1 = hashlib.md5("jack:Ganeti Remote API:pässwörd".encode()).hexdigest()
    assert password_matches(_user("{HA1}" + ha1, name="jack"), "pässwörd")


@pytest.mark.parametrize("stored", ["{SHA}abc", "{}pw", "{nobrace", "{x}"])
def test_unknown_or_invalid_scheme_never_matches(
    stored: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="corral.rapi.users"):
        assert not password_matches(_user(stored), "abc")
        assert not password_matches(_user(stored), stored)
        assert not password_matches(_user(stored), "")
    assert "scheme" in caplog.text


# -- UsersFile -----------------------------------------------------------------


def test_users_file_reads_and_sees_rewrites(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("alice pw read\n")
    users = UsersFile(str(path))
    alice = users.get("alice")
    assert alice is not None and alice.options == {"read"}
    assert users.get("bob") is None

    path.write_text("bob pw2 write\n")
    assert users.get("alice") is None
    bob = users.get("bob")
    assert bob is not None and bob.password == "pw2"


def test_users_file_same_size_rewrite_in_place_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("alice aaaa read\n")
    users = UsersFile(str(path))
    assert users.get("alice") == User("alice", "aaaa", frozenset({"read"}))
    ino = path.stat().st_ino
    mtime = path.stat().st_mtime_ns
    # Same inode, same size: only the times change (set explicitly, so a coarse
    # file system clock cannot hide the change).
    with path.open("r+") as handle:
        handle.write("alice bbbb read\n")
    os.utime(path, ns=(mtime + 1_000_000_000, mtime + 1_000_000_000))
    assert path.stat().st_ino == ino and path.stat().st_size == len("alice aaaa read\n")
    assert users.get("alice") == User("alice", "bbbb", frozenset({"read"}))


def test_users_file_parsed_once_while_unchanged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "users"
    path.write_text("alice pw read\n")
    users = UsersFile(str(path))
    with caplog.at_level(logging.INFO, logger="corral.rapi.users"):
        first = users.get("alice")
        for _ in range(5):
            assert users.get("alice") is first
    assert caplog.text.count("Reading users file") == 1


def test_users_file_missing_then_created_then_removed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "users"
    users = UsersFile(str(path))
    with caplog.at_level(logging.WARNING, logger="corral.rapi.users"):
        assert users.get("alice") is None
        assert users.get("alice") is None
    assert caplog.text.count("No users file") == 1  # logged once, not per request

    path.write_text("alice pw read\n")
    assert users.get("alice") is not None
    path.unlink()
    assert users.get("alice") is None


def test_users_file_not_utf8_means_no_users(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("alice pw read\n")
    users = UsersFile(str(path))
    assert users.get("alice") is not None
    path.write_bytes(b"alice \xff\xfe read\n")
    assert users.get("alice") is None


def test_users_file_fifo_in_its_place_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "users")
    assert UsersFile(str(tmp_path / "users")).get("alice") is None  # must not hang


def test_reload_rereads_even_when_unchanged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "users"
    path.write_text("alice pw read\n")
    users = UsersFile(str(path))
    with caplog.at_level(logging.INFO, logger="corral.rapi.users"):
        assert users.get("alice") is not None
        users.reload()
        assert users.get("alice") is not None
    assert caplog.text.count("Reading users file") == 2


def test_users_file_relative_to_dir_fd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "rapi").mkdir()
    (tmp_path / "rapi" / "users").write_text("alice pw write\n")
    fd = os.open(tmp_path / "rapi", os.O_RDONLY | os.O_DIRECTORY)
    try:
        monkeypatch.chdir("/")  # the name must not resolve against the working directory
        users = UsersFile("users", dir_fd=fd)
        assert users.get("alice") is not None
        (tmp_path / "rapi" / "users").write_text("bob pw write\n")
        assert users.get("alice") is None and users.get("bob") is not None
    finally:
        os.close(fd)


# The child opens the directory as root, drops to the RAPI user, then answers
# "<name> present|absent" for each name the test sends on stdin: once through
# the directory descriptor, once by full path (which the locked ancestor blocks).
_CHILD = """
import os, sys
from corral.process.privileges import drop_privileges
from corral.rapi.users import UsersFile
directory, user = sys.argv[1], sys.argv[2]
fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
drop_privileges(user)
by_fd = UsersFile("users", dir_fd=fd)
by_path = UsersFile(os.path.join(directory, "users"))
print("ready", os.geteuid(), flush=True)
for line in sys.stdin:
    name = line.strip()
    found = [by_fd.get(name) is not None, by_path.get(name) is not None]
    print(" ".join("present" if f else "absent" for f in found), flush=True)
"""


@pytest.fixture
def locked_tree(tmp_path: Path) -> Iterator[Path]:
    """``<tmp>/locked/rapi/users`` readable by the RAPI user, with ``locked`` mode 000."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    uid, gid = lookup_user(DEFAULT_RAPI_USER)
    rapi = tmp_path / "locked" / "rapi"
    rapi.mkdir(parents=True)
    os.chown(rapi, uid, gid)
    (rapi / "users").write_text("alice pw read\n")
    os.chown(rapi / "users", uid, gid)
    (rapi / "users").chmod(0o640)
    (tmp_path / "locked").chmod(0)
    try:
        yield rapi
    finally:
        (tmp_path / "locked").chmod(0o700)


def _ask(child: subprocess.Popen[str], name: str) -> str:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(name + "\n")
    child.stdin.flush()
    return child.stdout.readline().strip()


def test_dir_fd_works_after_dropping_root_with_a_locked_ancestor(locked_tree: Path) -> None:
    uid, _ = lookup_user(DEFAULT_RAPI_USER)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(locked_tree), DEFAULT_RAPI_USER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().split() == ["ready", str(uid)]
        assert _ask(child, "alice") == "present absent"
        # A rewrite while the daemon runs unprivileged is seen through the fd.
        (locked_tree / "users").write_text("bob pw write\n")
        assert _ask(child, "alice") == "absent absent"
        assert _ask(child, "bob") == "present absent"
    finally:
        assert child.stdin is not None
        child.stdin.close()
        assert child.wait(timeout=30) == 0
