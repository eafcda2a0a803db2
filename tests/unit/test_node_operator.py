"""gnt-cluster command and copyfile on a node: noded's handlers, run through
its door in-process (``run_call`` on a node root, the arguments encoded as on
the wire).  The gate that keeps them for the cluster's client certificate,
and the commands themselves, are tested with real daemons in
tests/integration/test_cluster_remote.py."""

from __future__ import annotations

import base64
import json
import os
import pwd
from pathlib import Path
from typing import Any

import pytest

from corral.node.context import NodeContext
from corral.node.dispatch import run_call
from corral.node.handlers.operator import command_environment, execute
from corral.paths import ROOT_ENV, Paths
from tests.helpers.waiting import wait_until


@pytest.fixture
def ctx(tmp_path: Path) -> NodeContext:
    root = tmp_path / "node"
    root.mkdir()
    return NodeContext(Paths(root), "127.0.0.1", 0)


async def call(ctx: NodeContext, name: str, *args: Any) -> tuple[bool, Any]:
    reply = await run_call(ctx, name, json.dumps(list(args)).encode())
    success, payload = json.loads(reply.body)
    return success, payload


async def command(ctx: NodeContext, text: str) -> dict[str, Any]:
    success, payload = await call(ctx, "run_command", text)
    assert success, payload
    return dict(payload)


async def test_command_output_and_exit_code(ctx: NodeContext) -> None:
    result = await command(ctx, "echo out; echo err >&2; exit 3")
    assert result == {"stdout": "out\n", "stderr": "err\n", "exit_code": 3}


async def test_command_gets_a_login_environment_and_nothing_of_nodeds(
    ctx: NodeContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NODED_SECRET_LEAK", "x")
    result = await command(ctx, "env")
    env = dict(line.split("=", 1) for line in result["stdout"].splitlines())
    user = pwd.getpwuid(os.geteuid())
    # The shell adds its own PWD (and some shells SHLVL and _).
    assert set(env) - {"PWD", "SHLVL", "_"} == {
        "HOME", "USER", "LOGNAME", "SHELL", "PATH", ROOT_ENV,
    }  # fmt: skip
    assert env["HOME"] == user.pw_dir and env["USER"] == env["LOGNAME"] == user.pw_name
    assert env[ROOT_ENV] == str(ctx.paths.root)  # gnt-* commands act on this node
    assert env["PATH"].split(":")[-2:] == ["/sbin", "/bin"]


def test_production_root_sets_no_root_variable() -> None:
    assert ROOT_ENV not in command_environment(Paths(Path("/")))


async def test_command_runs_in_the_home_directory_with_empty_input(ctx: NodeContext) -> None:
    # cat ends at once: its standard input is empty, not noded's.
    result = await command(ctx, "cat; pwd")
    home = pwd.getpwuid(os.geteuid()).pw_dir
    assert result["stdout"] == (home if os.path.isdir(home) else "/") + "\n"


async def test_command_killed_by_a_signal_returns_255_as_ssh(ctx: NodeContext) -> None:
    result = await command(ctx, "echo before; kill -KILL $$")
    assert result["stdout"] == "before\n" and result["exit_code"] == 255


async def test_output_that_is_not_utf8_comes_back_byte_for_byte(ctx: NodeContext) -> None:
    result = await command(ctx, r"printf 'caf\351\n'")
    assert result["stdout"].encode("utf-8", "surrogateescape") == b"caf\xe9\n"


async def test_output_beyond_the_bound_is_counted_not_kept(ctx: NodeContext) -> None:
    env = command_environment(ctx.paths)
    result = await execute("head -c 100000 /dev/zero | tr '\\0' a; echo e >&2", env, 60, 10)
    assert result["stdout"] == "a" * 10 + "\n[99990 more bytes of standard output not kept]\n"
    assert result["stderr"] == "e\n" and result["exit_code"] == 0


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


async def test_a_command_past_its_time_is_killed_with_all_it_started(
    ctx: NodeContext, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    env = command_environment(ctx.paths)
    # The shell and a child in the background: both go at the timeout.
    text = f"echo $$ > {pids}; sleep 600 & echo $! >> {pids}; echo started; wait"
    result = await execute(text, env, timeout=2.0)
    assert result["exit_code"] == 255
    assert result["stdout"] == "started\n"
    assert result["stderr"] == "Killed after 2 s, noded's limit for gnt-cluster command\n"
    shell, child = (int(line) for line in pids.read_text().split())
    wait_until(lambda: not _alive(shell) and not _alive(child), 10, "the command's processes")


def _copy_args(name: str, data: bytes, mode: int = 0o640, in_root: bool = True) -> list[Any]:
    return [name, in_root, base64.b64encode(data).decode(), mode, 1_000_000, 1_500_000_000]


async def test_copy_writes_content_mode_and_times_below_the_nodes_root(
    ctx: NodeContext,
) -> None:
    (ctx.paths.root / "etc").mkdir()
    assert await call(ctx, "copy_file", *_copy_args("/etc/x.conf", b"hi", 0o4750)) == (
        True,
        None,
    )
    target = ctx.paths.root / "etc" / "x.conf"
    st = target.stat()
    assert target.read_bytes() == b"hi"
    assert st.st_mode & 0o7777 == 0o4750  # set-id bits too, as scp -p
    assert (int(st.st_atime), int(st.st_mtime)) == (1_000_000, 1_500_000_000)
    assert (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid())


async def test_copy_keeps_the_owner_of_an_existing_file(ctx: NodeContext) -> None:
    target = ctx.paths.root / "owned"
    target.write_bytes(b"old")
    os.chown(target, 4321, 4322)
    assert (await call(ctx, "copy_file", *_copy_args("/owned", b"new")))[0]
    st = target.stat()
    assert target.read_bytes() == b"new" and (st.st_uid, st.st_gid) == (4321, 4322)


async def test_copy_writes_through_a_symbolic_link(ctx: NodeContext) -> None:
    real = ctx.paths.root / "real"
    real.write_bytes(b"old")
    (ctx.paths.root / "link").symlink_to(real)
    assert (await call(ctx, "copy_file", *_copy_args("/link", b"new")))[0]
    assert (ctx.paths.root / "link").is_symlink() and real.read_bytes() == b"new"


async def test_copy_stays_below_the_root(ctx: NodeContext) -> None:
    assert (await call(ctx, "copy_file", *_copy_args("/../../escaped", b"x")))[0]
    assert (ctx.paths.root / "escaped").read_bytes() == b"x"


@pytest.mark.parametrize(
    ("name", "in_root", "mode", "data", "message"),
    [
        ("etc/x", True, 0o644, "aGk=", "'etc/x' is not an absolute path"),
        ("/", True, 0o644, "aGk=", "is a directory"),
        ("/no/such/dir/x", True, 0o644, "aGk=", "/no/such/dir does not exist"),
        ("/dev/null", False, 0o644, "aGk=", "/dev/null is not a regular file"),
        ("/x", True, 0o10000, "aGk=", "Invalid mode 10000 for /x"),
        ("/x", True, 0o644, "not base64!", "Invalid base64 data for /x"),
        ("/x", True, -1, "aGk=", "Invalid mode -1 for /x"),
    ],
)
async def test_copy_refuses(
    ctx: NodeContext, name: str, in_root: bool, mode: int, data: str, message: str
) -> None:
    success, payload = await call(ctx, "copy_file", name, in_root, data, mode, 0, 0)
    assert not success and message in payload
    assert sorted(p.name for p in ctx.paths.root.iterdir()) == []  # nothing written
