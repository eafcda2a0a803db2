"""Environment parity with Ganeti 3.0.2: an OS definition and hooks that dump
their environment, driven through an instance's life (add, shutdown, export,
rename, reinstall, startup, shutdown, remove; then an import of the export
under the second name, and a rename) by the real commands, and compared with
what a real Ganeti 3.0.2 cluster gave the same scripts
(``tests/data/ganeti-3.0.2-env``, copied from the project's shared reference).

Variable names must match exactly; values must match too, except UUIDs, MACs
and timestamps (random) and paths, which live below the test's root.  The
differences Corral keeps on purpose are listed in the README ("OS and hook
environments: differences from Ganeti 3.0.2").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.cluster import Result, TestCluster, new_root
from tests.helpers.noded import REPO_ROOT
from tests.helpers.osdef import make_os

REFERENCE = REPO_ROOT / "tests" / "data" / "ganeti-3.0.2-env"

CLUSTER = "cluster1.ganeti.test"
NODE = "node1.ganeti.test"
OS = "envdump"
NAME1 = "envinst1.ganeti.test"
NAME2 = "envinst2.ganeti.test"
NAME3 = "envinst3.ganeti.test"
ADD = [
    "add",
    "-t",
    "file",
    "--disk",
    "0:size=64m",
    "--net",
    "0:ip=198.18.1.10",
    "-o",
    f"{OS}+default",
    "-O",
    "greeting=hello",
    "--os-parameters-private",
    "private_note=privvalue",
    "--os-parameters-secret",
    "secret_token=secretvalue",
    "--no-name-check",
    "--no-ip-check",
    NAME1,
]
IMPORT = [
    "import",
    "-n",
    NODE,
    "--src-node",
    NODE,
    "--src-dir",
    NAME1,
    "-t",
    "file",
    "--net",
    "0:ip=198.18.1.11",
    "--no-name-check",
    "--no-ip-check",
]
HOOKED = (
    "instance-add",
    "instance-rename",
    "instance-reinstall",
    "instance-remove",
    "instance-start",
    "instance-stop",
)
# What /bin/sh adds by itself (the reference was recorded with bash).
SHELL_VARS = {"PWD", "SHLVL", "_", "OLDPWD"}
# Random values: only their names are compared.
# EXP_SIZE_FD: whichever descriptor the size pipe got (Ganeti's 11 is incidental too).
VOLATILE = re.compile(r"(UUID|_CTIME|_MTIME|_MAC|^INSTANCE_PRIMARY_NODE|^EXP_SIZE_FD)$")
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Values that are paths: below the test root here, below / in the reference.
ROOTED = {
    "DISK_0_PATH",
    "PWD",
    "GANETI_DATA_DIR",
    "EXPORT_DEVICE",
    "EXPORT_DISK_PATH",
    "IMPORT_DEVICE",
    "IMPORT_DISK_PATH",
}


def dump_script(dumps: Path, kind: str, extra: str = "") -> str:
    """A script that writes its sorted environment (and ``extra``'s output) to
    ``<dumps>/<kind>-<n>.env`` (``.info``), n counting the runs."""
    return (
        "#!/bin/sh\n"
        f'n=0; while [ -e "{dumps}/{kind}-$n.env" ]; do n=$((n+1)); done\n'
        f'{{ echo "umask=$(umask)"; {extra or ":"}; }} > "{dumps}/{kind}-$n.info"\n'
        f'env | sort > "{dumps}/{kind}-$n.env"\n'
    )


@dataclass
class Run:
    cl: TestCluster
    dumps: Path
    results: dict[str, Result]
    node_uuid: str

    def env(self, kind: str, n: int = 0) -> dict[str, str]:
        return read_env(self.dumps / f"{kind}-{n}.env")

    def info(self, kind: str, n: int = 0) -> dict[str, str]:
        lines = (self.dumps / f"{kind}-{n}.info").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines)

    def runs(self, kind: str) -> int:
        return len(list(self.dumps.glob(f"{kind}-*.env")))


def read_env(path: Path) -> dict[str, str]:
    """``NAME=value`` lines; ``#`` lines are the reference's metadata."""
    env = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    return env


def reference(name: str) -> dict[str, str]:
    return read_env(REFERENCE / f"{name}.env.txt")


def reference_umask(name: str) -> str:
    text = (REFERENCE / f"{name}.env.txt").read_text()
    match = re.search(r"^# uid=\d+ gid=\d+ umask=(\d+)$", text, re.M)
    assert match, name
    return match.group(1)


def normalised(env: dict[str, str], root: Path) -> dict[str, str]:
    """Shell variables dropped, random values blanked, paths made root-relative."""
    out = {}
    for key, value in env.items():
        if key in SHELL_VARS and key != "PWD":
            continue
        if VOLATILE.search(key):
            value = "<random>"
        if key in ROOTED and value.startswith(f"{root}/"):
            value = value[len(str(root)) :]
        out[key] = UUID_RE.sub("<uuid>", value)
    return out


def assert_same(got: dict[str, str], want: dict[str, str], root: Path) -> None:
    got_n, want_n = normalised(got, root), normalised(want, root)
    assert sorted(got_n) == sorted(want_n), (
        f"missing: {sorted(set(want_n) - set(got_n))}, extra: {sorted(set(got_n) - set(want_n))}"
    )
    wrong = {k: (got_n[k], want_n[k]) for k in want_n if got_n[k] != want_n[k]}
    assert not wrong, f"(got, Ganeti) differ: {wrong}"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    base = tmp_path_factory.mktemp("envparity")
    dumps = base / "dumps"  # outside the root: the secret must never land there
    dumps.mkdir()
    cl = new_root(base)
    cl.cluster_name, cl.node_name = CLUSTER, NODE
    scripts = {s: dump_script(dumps, f"os-{s}") for s in ("export", "import", "rename", "verify")}
    # The data goes through export and import as an OS would send it.
    scripts["export"] += 'exec cat "$EXPORT_DEVICE"\n'
    scripts["import"] += 'exec cat > "$IMPORT_DEVICE"\n'
    scripts["create"] = dump_script(
        dumps,
        "os-create",
        'test -f "$DISK_0_PATH" && echo "disk_file=yes";'
        ' echo "disk_bytes=$(stat -c %s "$DISK_0_PATH")"',
    )
    make_os(
        cl.paths,
        OS,
        variants=("default",),
        parameters={"greeting": "a greeting", "private_note": "a note", "secret_token": "a token"},
        scripts=scripts,
    )
    for hpath in HOOKED:
        for phase in ("pre", "post"):
            cl.hook(hpath, phase, "50envdump", dump_script(dumps, f"hook-{hpath}-{phase}"))
    try:
        init = cl.init("--master-ip", cl.node_ip, "-N", "link=gnt-br0")
        assert init.rc == 0, init.stderr
        rename = ["rename", "-f", "--no-name-check", "--no-ip-check"]
        # As the reference: an export of the first instance, later imported
        # under the second name (a NIC of its own), then renamed.
        steps = {
            "add": ("instance", ADD),
            "shutdown1": ("instance", ["shutdown", NAME1]),
            "export": ("backup", ["export", "-n", NODE, NAME1]),
            "rename": ("instance", [*rename, NAME1, NAME2]),
            "reinstall": ("instance", ["reinstall", "-f", NAME2]),
            "startup": ("instance", ["startup", NAME2]),
            "shutdown2": ("instance", ["shutdown", NAME2]),
            "remove": ("instance", ["remove", "-f", NAME2]),
            "import": ("backup", [*IMPORT, NAME2]),
            "rename2": ("instance", [*rename, NAME2, NAME3]),
        }
        results = {}
        for step, (command, args) in steps.items():
            results[step] = result = cl.gnt(command, *args)
            assert result.rc == 0, (step, result.stdout, result.stderr)
        with cl.client() as client:
            answer = client.query("node", ["name", "uuid"])
        rows = {row[0][1]: row[1][1] for row in answer["data"]}
        yield Run(cl, dumps, results, rows[NODE])
    finally:
        cl.stop()


# OS scripts
def test_each_script_ran_as_often_as_in_ganeti(run: Run) -> None:
    # verify: at add, reinstall and import; create: at add and reinstall;
    # rename: at both renames and after the import; export, import: one disk.
    assert run.runs("os-verify") == 3
    assert run.runs("os-create") == 2
    assert run.runs("os-rename") == 3
    assert run.runs("os-export") == run.runs("os-import") == 1


def test_verify_at_add_gets_every_parameter_and_nothing_else(run: Run) -> None:
    env = run.env("os-verify", 0)
    assert_same(env, reference("os-verify.1"), run.cl.paths.root)
    assert env["OSP_SECRET_TOKEN"] == "secretvalue"
    assert env["PWD"] == str(run.cl.paths.os_search_path[0] / OS)


def test_verify_at_reinstall_has_no_secret(run: Run) -> None:
    # The secret was given to add only: it was never stored, so it is gone.
    assert_same(run.env("os-verify", 1), reference("os-verify.2"), run.cl.paths.root)


def test_create_environment(run: Run) -> None:
    env = run.env("os-create", 0)
    assert_same(env, reference("os-create.1"), run.cl.paths.root)
    assert env["INSTANCE_PRIMARY_NODE"] == run.node_uuid
    assert env["NIC_0_MAC"].startswith("aa:00:00:")
    file_storage = run.cl.paths.file_storage_dir
    assert re.fullmatch(
        rf"{file_storage}/{NAME1}/{UUID_RE.pattern}\.file\.disk0", env["DISK_0_PATH"]
    )


def test_create_finds_its_disk_as_a_real_file(run: Run) -> None:
    for n in (0, 1):
        info = run.info("os-create", n)
        assert info["disk_file"] == "yes"
        assert int(info["disk_bytes"]) == 64 * 1024 * 1024


def test_create_at_reinstall(run: Run) -> None:
    want = {
        **reference("os-create.1"),
        "INSTANCE_NAME": NAME2,
        "INSTANCE_REINSTALL": "1",
        "DISK_0_PATH": reference("os-create.1")["DISK_0_PATH"].replace(NAME1, NAME2),
    }
    del want["OSP_SECRET_TOKEN"]
    assert_same(run.env("os-create", 1), want, run.cl.paths.root)


def test_rename_environment(run: Run) -> None:
    # The reference's rename followed an import of a NIC with .11 (same names).
    want = {**reference("os-rename.1"), "NIC_0_IP": "198.18.1.10"}
    env = run.env("os-rename", 0)
    assert_same(env, want, run.cl.paths.root)
    assert (env["INSTANCE_NAME"], env["OLD_INSTANCE_NAME"]) == (NAME2, NAME1)


def test_one_instance_seen_by_every_script(run: Run) -> None:
    envs = [run.env("os-create", 0), run.env("os-create", 1), run.env("os-rename", 0)]
    for key in ("INSTANCE_UUID", "INSTANCE_CTIME", "DISK_0_UUID", "NIC_0_UUID", "NIC_0_MAC"):
        assert len({env[key] for env in envs}) == 1, key


def test_scripts_run_with_ganeti_umask(run: Run) -> None:
    assert run.info("os-verify", 0)["umask"] == reference_umask("os-verify.1")
    assert run.info("os-create", 0)["umask"] == reference_umask("os-create.1")
    assert run.info("hook-instance-add-pre", 0)["umask"] == reference_umask(
        "hook-instance-add-pre.1"
    )


# Hooks
@pytest.mark.parametrize("phase", ["pre", "post"])
def test_instance_add_hook_environment(run: Run, phase: str) -> None:
    env = run.env(f"hook-instance-add-{phase}")
    assert_same(env, reference(f"hook-instance-add-{phase}.1"), run.cl.paths.root)
    assert env["GANETI_DATA_DIR"] == str(run.cl.paths.data_dir)
    assert env["GANETI_INSTANCE_NIC0_MAC"] == run.env("os-create", 0)["NIC_0_MAC"]


def expected_hook_env(
    hpath: str, op_code: str, phase: str, name: str, extra: dict[str, str], post: dict[str, str]
) -> dict[str, str]:
    """What Ganeti gives ``hpath``'s hooks: the add hooks' instance variables with
    the disk's logical id (an existing instance), the unit's own variables."""
    add = reference(f"hook-instance-add-{phase}.1")
    unit = {
        k.removeprefix("GANETI_"): v
        for k, v in reference("hook-instance-add-pre.1").items()
        if k.startswith("GANETI_INSTANCE_") or k == "GANETI_OP_TARGET"
    }
    disk = f"/srv/ganeti/file-storage/{name}/<uuid>.file.disk0"
    unit.update(
        {
            "INSTANCE_NAME": name,
            "OP_TARGET": name,
            "INSTANCE_DISK0_DEV_TYPE": "file",
            "INSTANCE_DISK0_DRIVER": "loop",
            "INSTANCE_DISK0_ID": disk,
            **extra,
        }
    )
    env = {k: v for k, v in add.items() if not k.startswith(("GANETI_INSTANCE_", "GANETI_POST_"))}
    del env["GANETI_ADD_MODE"]
    env.update(GANETI_HOOKS_PATH=hpath, GANETI_OP_CODE=op_code, GANETI_HOOKS_PHASE=phase)
    env.update({f"GANETI_{k}": v for k, v in unit.items()})
    if phase == "post":
        env.update({f"GANETI_POST_{k}": v for k, v in {**unit, **post}.items()})
    return env


HOOK_CASES = [
    # hpath, opcode, dump index, name, extra variables (pre), changed by the unit (post)
    (
        "instance-stop",
        "OP_INSTANCE_SHUTDOWN",
        0,
        NAME1,
        {"TIMEOUT": "120", "INSTANCE_STATUS": "up"},
        {"INSTANCE_STATUS": "down"},
    ),
    (
        "instance-rename",
        "OP_INSTANCE_RENAME",
        0,
        NAME1,
        {"INSTANCE_NEW_NAME": NAME2, "INSTANCE_STATUS": "down"},
        {
            "INSTANCE_NAME": NAME2,
            "OP_TARGET": NAME2,
            "INSTANCE_DISK0_ID": f"/srv/ganeti/file-storage/{NAME2}/<uuid>.file.disk0",
        },
    ),
    ("instance-reinstall", "OP_INSTANCE_REINSTALL", 0, NAME2, {"INSTANCE_STATUS": "down"}, {}),
    (
        "instance-start",
        "OP_INSTANCE_STARTUP",
        0,
        NAME2,
        {"FORCE": "False", "INSTANCE_STATUS": "down"},
        {"INSTANCE_STATUS": "up"},
    ),
    (
        "instance-stop",
        "OP_INSTANCE_SHUTDOWN",
        1,
        NAME2,
        {"TIMEOUT": "120", "INSTANCE_STATUS": "up"},
        {"INSTANCE_STATUS": "down"},
    ),
    (
        "instance-remove",
        "OP_INSTANCE_REMOVE",
        0,
        NAME2,
        {"SHUTDOWN_TIMEOUT": "120", "INSTANCE_STATUS": "down"},
        {},
    ),
]


@pytest.mark.parametrize("phase", ["pre", "post"])
@pytest.mark.parametrize(
    ("hpath", "op_code", "index", "name", "extra", "post"),
    HOOK_CASES,
    ids=[f"{c[0]}-{c[2]}" for c in HOOK_CASES],
)
def test_instance_hook_environment(
    run: Run,
    hpath: str,
    op_code: str,
    index: int,
    name: str,
    extra: dict[str, str],
    post: dict[str, str],
    phase: str,
) -> None:
    env = run.env(f"hook-{hpath}-{phase}", index)
    want = expected_hook_env(hpath, op_code, phase, name, extra, post)
    assert_same(env, want, run.cl.paths.root)


def test_each_hook_ran_once_per_operation(run: Run) -> None:
    twice = ("instance-stop", "instance-add", "instance-rename")
    for hpath in HOOKED:
        for phase in ("pre", "post"):
            runs = 2 if hpath in twice else 1
            assert run.runs(f"hook-{hpath}-{phase}") == runs, (hpath, phase)


# Export and import (the reference: envinst1 exported, imported as envinst2
# with a NIC of its own, renamed to envinst3)
def test_export_environment(run: Run) -> None:
    env = run.env("os-export", 0)
    assert_same(env, reference("os-export.1"), run.cl.paths.root)
    assert env["EXPORT_DEVICE"] == env["DISK_0_PATH"] == env["EXPORT_DISK_PATH"]
    assert env["EXP_SIZE_FD"].isdigit()


def test_import_environment(run: Run) -> None:
    env = run.env("os-import", 0)
    assert_same(env, reference("os-import.1"), run.cl.paths.root)
    assert env["IMPORT_DEVICE"] == env["DISK_0_PATH"] == env["IMPORT_DISK_PATH"]
    assert env["EXP_SIZE_FD"].isdigit()
    # The export's private parameter came with it; the secret never did.
    assert env["OSP_PRIVATE_NOTE"] == "privvalue" and "OSP_SECRET_TOKEN" not in env


def test_rename_after_import_environment(run: Run) -> None:
    env = run.env("os-rename", 1)
    assert_same(env, reference("os-rename.1"), run.cl.paths.root)
    assert (env["INSTANCE_NAME"], env["OLD_INSTANCE_NAME"]) == (NAME2, NAME1)


def test_rename_of_the_imported_instance(run: Run) -> None:
    env = run.env("os-rename", 2)
    assert_same(env, reference("os-rename.2"), run.cl.paths.root)
    assert (env["INSTANCE_NAME"], env["OLD_INSTANCE_NAME"]) == (NAME3, NAME2)


def test_imported_instance_seen_by_its_scripts(run: Run) -> None:
    envs = [run.env("os-import", 0), run.env("os-rename", 1), run.env("os-rename", 2)]
    for key in ("INSTANCE_UUID", "INSTANCE_CTIME", "DISK_0_UUID", "NIC_0_UUID", "NIC_0_MAC"):
        assert len({env[key] for env in envs}) == 1, key
    # A new instance, with new disks: not the exported one's.
    assert envs[0]["INSTANCE_UUID"] != run.env("os-export", 0)["INSTANCE_UUID"]


def corral_export_paths(env: dict[str, str], root: Path) -> dict[str, str]:
    """SRC_* with Ganeti's export directory: Corral keeps exports in
    /srv/ganeti/export (below the root), Debian's Ganeti in /var/lib/ganeti/export."""
    ours = f"{root}/srv/ganeti/export/"
    return {
        k: v.replace(ours, "/var/lib/ganeti/export/") if "SRC_" in k else v for k, v in env.items()
    }


@pytest.mark.parametrize("phase", ["pre", "post"])
def test_import_hook_environment(run: Run, phase: str) -> None:
    env = run.env(f"hook-instance-add-{phase}", 1)
    want = reference(f"hook-instance-add-{phase}.2")
    assert_same(corral_export_paths(env, run.cl.paths.root), want, run.cl.paths.root)
    dump = run.env("os-export", 0)["DISK_0_UUID"]
    export = run.cl.paths.export_dir / NAME1
    assert env["GANETI_SRC_IMAGES"] == str([f"{export}/{dump}"])
    assert (env["GANETI_SRC_NODE"], env["GANETI_SRC_PATH"]) == (NODE, str(export))
