"""noded's hooks_runner: Ganeti's run-parts rules, environment and results."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corral import constants as C
from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.hooks import MAX_OUTPUT, hooks_runner
from corral.paths import Paths


@pytest.fixture
def ctx(tmp_path: Path) -> NodeContext:
    return NodeContext(paths=Paths(tmp_path), address="127.0.0.1", port=0)


def hook(
    ctx: NodeContext,
    name: str,
    body: str,
    *,
    subdir: str = "instance-add-pre.d",
    executable: bool = True,
) -> Path:
    directory = ctx.paths.hooks_dir / subdir
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755 if executable else 0o644)
    return path


async def run(ctx: NodeContext, env: dict[str, str] | None = None) -> list[list[object]]:
    return await hooks_runner(ctx, "instance-add", "pre", env or {})


async def test_missing_directory_gives_no_results(ctx: NodeContext) -> None:
    assert await run(ctx) == []


async def test_name_rules_and_order(ctx: NodeContext, tmp_path: Path) -> None:
    for name in ("b-20", "A_10", "a-30", "10"):
        hook(ctx, name, f"echo {name}")
    hook(ctx, "with.dot", "echo dot")  # names with a dot are skipped
    hook(ctx, "notexec", "echo no", executable=False)
    (ctx.paths.hooks_dir / "instance-add-pre.d" / "subdir").mkdir()
    target = hook(ctx, "real.sh", "echo linked", subdir="elsewhere")
    os.symlink(target, ctx.paths.hooks_dir / "instance-add-pre.d" / "zz-link")
    os.symlink(tmp_path / "missing", ctx.paths.hooks_dir / "instance-add-pre.d" / "zz-dangling")
    results = await run(ctx)
    names = [r[0] for r in results]
    assert names == [f"instance-add-pre.d/{n}" for n in ("10", "A_10", "a-30", "b-20", "zz-link")]
    assert [r[1] for r in results] == [C.HKR_SUCCESS] * 5
    assert results[-1][2] == "linked\n"


async def test_environment_is_reset(ctx: NodeContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODED_SECRET", "must-not-leak")
    hook(ctx, "dump", "env; pwd")
    env = {"GANETI_HOOKS_PHASE": "pre", "GANETI_OP_CODE": "OP_INSTANCE_CREATE", "PATH": "/evil"}
    [[_, hkr, output]] = await run(ctx, env)
    assert hkr == C.HKR_SUCCESS
    lines = str(output).splitlines()
    assert lines[-1] == "/"  # cwd
    dumped = dict(line.split("=", 1) for line in lines[:-1])
    dumped.pop("PWD", None)  # the shell sets it itself
    dumped.pop("SHLVL", None)
    dumped.pop("_", None)
    assert dumped == {
        "GANETI_HOOKS_PHASE": "pre",
        "GANETI_OP_CODE": "OP_INSTANCE_CREATE",
        "PATH": C.HOOKS_PATH,
    }


async def test_stdin_is_dev_null_and_own_session(ctx: NodeContext) -> None:
    # Field 6 of /proc/<pid>/stat is the session id.
    hook(ctx, "stdin", "readlink /proc/self/fd/0; cat; cut -d' ' -f6 /proc/$$/stat; echo $$")
    [[_, hkr, output]] = await run(ctx)
    assert hkr == C.HKR_SUCCESS
    stdin, sid, pid = str(output).split()
    assert stdin == "/dev/null"
    assert sid == pid  # the hook leads its own session


async def test_failure_keeps_output_and_next_hooks_run(ctx: NodeContext) -> None:
    hook(ctx, "10-fail", "echo to-stdout; echo to-stderr >&2; exit 3")
    hook(ctx, "20-ok", "true")
    hook(ctx, "30-bad-interpreter", "")
    (ctx.paths.hooks_dir / "instance-add-pre.d" / "30-bad-interpreter").write_text(
        "#!/nonexistent\n"
    )
    results = await run(ctx)
    assert results[0] == ["instance-add-pre.d/10-fail", C.HKR_FAIL, "to-stdout\nto-stderr\n"]
    assert results[1][1] == C.HKR_SUCCESS
    assert results[2][1] == C.HKR_FAIL
    assert "Cannot execute" in str(results[2][2])


async def test_output_is_capped(ctx: NodeContext) -> None:
    hook(ctx, "big", f"head -c {MAX_OUTPUT * 3} /dev/zero | tr '\\0' x")
    [[_, hkr, output]] = await run(ctx)
    assert hkr == C.HKR_SUCCESS
    assert str(output).startswith("x" * MAX_OUTPUT)
    assert str(output).endswith("[output truncated]")


async def test_post_phase_directory(ctx: NodeContext) -> None:
    hook(ctx, "post", "echo post", subdir="instance-add-post.d")
    assert await hooks_runner(ctx, "instance-add", "post", {}) == [
        ["instance-add-post.d/post", C.HKR_SUCCESS, "post\n"]
    ]


@pytest.mark.parametrize(("hpath", "phase"), [("../etc", "pre"), ("instance-add", "middle")])
async def test_bad_arguments(ctx: NodeContext, hpath: str, phase: str) -> None:
    with pytest.raises(errors.HooksFailure):
        await hooks_runner(ctx, hpath, phase, {})
