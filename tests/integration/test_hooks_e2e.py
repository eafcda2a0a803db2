"""Hooks end to end: real jobs in masterd, scripts run by noded, per Ganeti's
hooks interface (environment, run-parts rules, pre aborts, post warns)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cluster import TestCluster, new_root, running_cluster
from tests.helpers.jobs import cluster_state, wait_final

HOOKS_PATH = "/sbin:/bin:/usr/sbin:/usr/bin"
# What /bin/sh itself may add to the environment it was given.
SHELL_VARS = {"PWD", "OLDPWD", "SHLVL", "_"}


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("hooks")) as cluster:
        yield cluster


@pytest.fixture
def out(cl: TestCluster, tmp_path: Path) -> Iterator[Path]:
    """A directory for what the hooks record; the hooks are removed afterwards."""
    yield tmp_path
    shutil.rmtree(cl.paths.hooks_dir, ignore_errors=True)


def env_dump(path: Path) -> str:
    return f'#!/bin/sh\nenv > "{path}"\n'


def read_env(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


def without_shell(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in SHELL_VARS}


def base_env(cl: TestCluster, op_code: str, hpath: str, phase: str) -> dict[str, str]:
    """The variables every hook of a cluster-level opcode gets."""
    return {
        "PATH": HOOKS_PATH,
        "GANETI_HOOKS_VERSION": "2",
        "GANETI_OP_CODE": op_code,
        "GANETI_HOOKS_PHASE": phase,
        "GANETI_HOOKS_PATH": hpath,
        "GANETI_OBJECT_TYPE": "CLUSTER",
        "GANETI_CLUSTER": cl.cluster_name,
        "GANETI_MASTER": cl.node_name,
        "GANETI_DATA_DIR": str(cl.paths.data_dir),
    }


def max_running_jobs(cl: TestCluster) -> int:
    with cl.client() as client:
        return int(client.call("QueryClusterInfo")["max_running_jobs"])


def test_cluster_init_post_hook_environment(tmp_path: Path) -> None:
    cl = new_root(tmp_path)
    record = tmp_path / "init.env"
    cl.hook(
        "cluster-init",
        "post",
        "50envdump",
        env_dump(record) + f'readlink /proc/$$/fd/0 > "{tmp_path}/stdin"\npwd > "{tmp_path}/cwd"\n',
    )
    # cluster-init has no pre-phase nodes: this script never runs.
    cl.hook("cluster-init", "pre", "10-refuse", f'#!/bin/sh\ntouch "{tmp_path}/pre-ran"\nexit 1\n')
    try:
        result = cl.init()
        assert result.rc == 0, result.stderr
        env = read_env(record)
        assert without_shell(env) == {
            **base_env(cl, "OP_CLUSTER_POST_INIT", "cluster-init", "post"),
            "GANETI_OP_TARGET": cl.cluster_name,
            "GANETI_POST_OP_TARGET": cl.cluster_name,
        }
        assert (tmp_path / "stdin").read_text() == "/dev/null\n"
        assert (tmp_path / "cwd").read_text() == "/\n"
        assert not (tmp_path / "pre-ran").exists()
        with cl.client() as client:
            assert client.query_jobs([1], ["status", "summary"]) == [
                ["success", ["CLUSTER_POST_INIT"]]
            ]
    finally:
        cl.stop()


def test_failing_pre_hook_aborts_and_changes_nothing(cl: TestCluster, out: Path) -> None:
    cl.hook("cluster-modify", "pre", "05-env", env_dump(out / "pre.env"))
    cl.hook(
        "cluster-modify", "pre", "10-refuse", "#!/bin/sh\necho 'change window is closed'\nexit 1\n"
    )
    cl.hook("cluster-modify", "post", "10-mark", f'#!/bin/sh\ntouch "{out}/post-ran"\n')
    before = cluster_state(cl)
    result = cl.gnt("cluster", "modify", "--max-running-jobs", "5")
    assert result.rc == 1, result
    assert result.stderr.splitlines() == [
        "Failure: hooks execution failed:",
        f"  node: {cl.node_name}, script: cluster-modify-pre.d/10-refuse,"
        " output: change window is closed",
    ]
    after = cluster_state(cl)
    assert (after["serial"], after["info"]) == (before["serial"], before["info"])
    assert not (out / "post-ran").exists()
    (job_id,) = [row[0] for row in after["jobs"] if row not in before["jobs"]]
    with cl.client() as client:
        ((status, result_value),) = wait_final(client, [job_id], ("status", "opresult"))
    assert status == "error"
    assert result_value[0] == [
        "HooksAbort",
        [[[cl.node_name, "cluster-modify-pre.d/10-refuse", "change window is closed\n"]]],
    ]
    # The pre phase: the unit's variables with GANETI_, none with GANETI_POST_.
    assert without_shell(read_env(out / "pre.env")) == {
        **base_env(cl, "OP_CLUSTER_SET_PARAMS", "cluster-modify", "pre"),
        "GANETI_OP_TARGET": cl.cluster_name,
        "GANETI_NEW_VG_NAME": "",
    }
    # Without the failing script the same change goes through.
    (cl.paths.hooks_dir / "cluster-modify-pre.d" / "10-refuse").unlink()
    assert cl.gnt("cluster", "modify", "--max-running-jobs", "5").rc == 0
    assert max_running_jobs(cl) == 5
    assert (out / "post-ran").exists()


def test_failing_post_hook_only_warns(cl: TestCluster, out: Path) -> None:
    cl.hook("cluster-modify", "post", "10-fail", "#!/bin/sh\necho 'post hook says no'\nexit 2\n")
    cl.hook("cluster-modify", "post", "20-env", env_dump(out / "post.env"))
    serial = cluster_state(cl)["serial"]
    result = cl.gnt("cluster", "modify", "--max-running-jobs", "7")
    assert result.rc == 0, result.stderr
    assert (
        f" - WARNING: On {cl.node_name} script cluster-modify-post.d/10-fail failed,"
        " output: post hook says no"
    ) in result.stdout
    assert max_running_jobs(cl) == 7
    assert cluster_state(cl)["serial"] > serial
    # The post phase keeps the pre variables and adds GANETI_POST_ ones.
    assert without_shell(read_env(out / "post.env")) == {
        **base_env(cl, "OP_CLUSTER_SET_PARAMS", "cluster-modify", "post"),
        "GANETI_OP_TARGET": cl.cluster_name,
        "GANETI_NEW_VG_NAME": "",
        "GANETI_POST_OP_TARGET": cl.cluster_name,
        "GANETI_POST_NEW_VG_NAME": "",
    }


def test_config_update_hook_runs_only_after_config_changes(cl: TestCluster, out: Path) -> None:
    log = out / "config-update.log"
    cl.hook(
        "config-update",
        "post",
        "10-log",
        f'#!/bin/sh\necho "$GANETI_OP_CODE $GANETI_HOOKS_PATH $GANETI_HOOKS_PHASE" >> "{log}"\n'
        "exit 1\n",  # a failing config-update hook is only reported
    )
    assert cl.gnt("debug", "delay", "0").rc == 0
    assert not log.exists()
    added = cl.gnt("cluster", "add-tags", "hooked")
    assert added.rc == 0, added.stderr
    assert "config-update-post.d/10-log failed" in added.stdout
    assert log.read_text() == "OP_TAGS_SET config-update post\n"
    # Read-only and failed jobs change no config: no further runs.
    assert cl.gnt("debug", "delay", "0").rc == 0
    assert cl.gnt("cluster", "search-tags", "hook").rc == 0
    assert cl.gnt("cluster", "modify", "--mac-prefix", "zz").rc == 1
    assert log.read_text() == "OP_TAGS_SET config-update post\n"
    assert cl.gnt("cluster", "remove-tags", "hooked").rc == 0
    assert log.read_text().splitlines()[-1] == "OP_TAGS_DEL config-update post"


def test_cluster_verify_post_hook_failure_fails_verify(cl: TestCluster, out: Path) -> None:
    healthy = cl.gnt("cluster", "verify")
    assert healthy.rc == 0, healthy.stdout + healthy.stderr
    cl.hook("cluster-verify", "post", "10-check", "#!/bin/sh\necho 'disk is on fire'\nexit 1\n")
    result = cl.gnt("cluster", "verify")
    assert result.rc == 1, result
    assert f"ERROR: node {cl.node_name}: Script cluster-verify-post.d/10-check failed" in (
        result.stdout
    )
    assert "disk is on fire" in result.stdout
    assert "* Hooks Results" in result.stdout


def test_run_parts_rules(cl: TestCluster, out: Path) -> None:
    order = out / "order"

    def script(name: str, extra: str = "") -> str:
        return f'#!/bin/sh\necho {name} >> "{order}"\ncat >> "{order}"\n{extra}'

    runnable = ["30-c", "10-a", "20-b", "2", "B", "a_b"]
    for name in runnable:
        cl.hook("cluster-modify", "post", name, script(name))
    cl.hook("cluster-modify", "post", "25-fails", script("25-fails", "exit 1\n"))
    # Names outside ^[a-zA-Z0-9_-]+$, non-executables and directories are skipped.
    for name in ("10-foo.sh", "bad.name", "with space", "20-noexec"):
        cl.hook("cluster-modify", "post", name, script(name))
    (cl.paths.hooks_dir / "cluster-modify-post.d" / "20-noexec").chmod(0o644)
    (cl.paths.hooks_dir / "cluster-modify-post.d" / "15-dir").mkdir()
    # A symlink to an executable script counts as that script.
    target = cl.hook("elsewhere", "post", "target", script("40-link"))
    (cl.paths.hooks_dir / "cluster-modify-post.d" / "40-link").symlink_to(target)

    result = cl.gnt("cluster", "modify", "--max-running-jobs", "9")
    assert result.rc == 0, result.stderr
    # Python string order, one after the other, stdin empty (/dev/null);
    # a failing script does not stop the ones after it.
    assert order.read_text().splitlines() == sorted([*runnable, "25-fails", "40-link"])
    assert order.read_text().splitlines() == [
        "10-a",
        "2",
        "20-b",
        "25-fails",
        "30-c",
        "40-link",
        "B",
        "a_b",
    ]
    assert "cluster-modify-post.d/25-fails failed" in result.stdout
