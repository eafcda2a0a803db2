"""OS definitions against real daemons: discovery and validation per Ganeti's OS
interface, gnt-os list/diagnose/info/modify, hidden and blacklisted OSes,
cluster-level OS parameters and their precedence, and the os_version check
across two nodes."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.instances import add, env_os, failed, ok, query, read_env, rows
from tests.helpers.jobs import wait_final
from tests.helpers.multinode import add_node
from tests.helpers.osdef import make_os

MakeOS = Callable[..., Path]
# OS create scripts run only for instances with disks (as in Ganeti).
DISK = ("-t", "file", "-s", "8m")


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("oses")) as cluster:
        yield cluster


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """Where OS scripts write their environment (outside the cluster's root)."""
    path = tmp_path / "env"
    path.mkdir()
    return path


@pytest.fixture
def new_os(cl: TestCluster, out: Path) -> Iterator[MakeOS]:
    """Make OS definitions (recording ones: see env_os) for one test; removed afterwards,
    with any instance and OS setting the test left behind."""
    made: list[Path] = []

    def make(name: str, **kwargs: Any) -> Path:
        path = env_os(cl.paths, name, out, **kwargs)
        made.append(path)
        return path

    yield make
    with cl.client() as client:
        info = client.call("QueryClusterInfo")
    names = {p.name for p in made}
    for inst, os_name in rows(cl, ["name", "os"]):
        if os_name.split("+")[0] in names:
            ok(cl.gnt("instance", "remove", "-f", inst))
    for name in sorted(set(info["hidden_os"]) | set(info["blacklisted_os"])):
        ok(cl.gnt("os", "modify", "--hidden=no", "--blacklisted=no", name))
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def os_list(cl: TestCluster) -> list[str]:
    return ok(cl.gnt("os", "list", "--no-headers")).split()


def diagnose(cl: TestCluster) -> tuple[int, str]:
    result = cl.gnt("os", "diagnose")
    assert "Traceback" not in result.stderr
    return result.rc, result.stdout


def diagnose_block(text: str, name: str) -> str:
    """The lines ``gnt-os diagnose`` prints for one OS."""
    blocks = [b for b in text.split("\n\n") if b.startswith(f"OS: {name} ")]
    assert len(blocks) == 1, text
    return blocks[0]


# Discovery and validation
@pytest.mark.parametrize(
    ("versions", "used"),
    [((10,), 10), ((15,), 15), ((20,), 20), ((10, 15, 20), 20), ((10, 15), 15), ((15, 25), 15)],
)
def test_api_versions_highest_common_one_is_used(
    cl: TestCluster, new_os: MakeOS, out: Path, versions: tuple[int, ...], used: int
) -> None:
    new_os("apiv", api_versions=versions, variants=("first", "second"))
    assert diagnose(cl)[0] == 0
    block = diagnose_block(diagnose(cl)[1], "apiv")
    assert "[global status: valid]" in block
    assert f"[API versions: {', '.join(map(str, versions))}]" in block
    # variants only from API 15
    names = [n for n in os_list(cl) if n.startswith("apiv")]
    assert names == (["apiv+first", "apiv+second"] if used >= 15 else ["apiv"])
    os_name = "apiv+second" if used >= 15 else "apiv"
    ok(add(cl, "apiinst", *DISK, "--no-start", "-o", os_name))
    env = read_env(out / "create-apiinst")
    assert env["OS_API_VERSION"] == str(used)
    assert env["OS_VARIANT"] == ("second" if used >= 15 else "")
    assert env["OS_NAME"] == "apiv"


def test_api_version_without_a_common_one_is_invalid(cl: TestCluster, new_os: MakeOS) -> None:
    new_os("api5", api_versions=(5,), variants=None)
    rc, text = diagnose(cl)
    assert rc == 1
    block = diagnose_block(text, "api5")
    assert "[global status: invalid]" in block
    assert "API version" in block and "5" in block
    assert "api5" not in os_list(cl)


def _missing_script(path: Path) -> None:
    (path / "rename").unlink()


def _non_executable(path: Path) -> None:
    (path / "export").chmod(0o644)


def _bad_api(path: Path) -> None:
    (path / "ganeti_api_version").write_text("twenty\n")


def _no_api(path: Path) -> None:
    (path / "ganeti_api_version").unlink()


def _empty_parameter_line(path: Path) -> None:
    (path / "parameters.list").write_text("a the first\n\nb the second\n")


def _no_verify(path: Path) -> None:
    (path / "verify").unlink()


def _no_parameters_list(path: Path) -> None:
    (path / "parameters.list").unlink()


BROKEN = [
    pytest.param(_missing_script, ["rename", "missing"], id="missing-script"),
    pytest.param(_non_executable, ["export", "not executable"], id="non-executable-script"),
    pytest.param(_bad_api, ["ganeti_api_version", "twenty"], id="bad-api-version"),
    pytest.param(_no_api, ["ganeti_api_version", "missing"], id="missing-api-version"),
    pytest.param(_empty_parameter_line, ["parameters.list", "line 2", "empty"], id="empty-param"),
    pytest.param(_no_verify, ["verify", "missing"], id="api20-without-verify"),
    pytest.param(_no_parameters_list, ["parameters.list", "missing"], id="api20-no-params-list"),
]


@pytest.mark.parametrize(("breakage", "texts"), BROKEN)
def test_broken_os_is_invalid_with_its_reason(
    cl: TestCluster, new_os: MakeOS, breakage: Callable[[Path], None], texts: list[str]
) -> None:
    breakage(new_os("broken", variants=None))
    rc, text = diagnose(cl)
    assert rc == 1
    block = diagnose_block(text, "broken")
    assert "[global status: invalid]" in block
    assert f"Node: {cl.node_name}, status: invalid - " in block
    for piece in texts:
        assert piece in block, (piece, block)
    assert "broken" not in os_list(cl)
    info = ok(cl.gnt("os", "info", "broken"))
    assert "  - valid: False" in info


def test_api10_has_no_verify_or_parameters_and_ignores_variants(
    cl: TestCluster, new_os: MakeOS, out: Path
) -> None:
    path = new_os("old10", api_versions=(10,), variants=("v1",))
    (path / "verify").unlink()
    assert diagnose(cl)[0] == 0
    assert "old10" in os_list(cl)
    ok(add(cl, "old", *DISK, "--no-start", "-o", "old10"))
    assert read_env(out / "create-old")["OS_API_VERSION"] == "10"


def test_variants_list_ignores_blank_lines_and_comments(
    cl: TestCluster, new_os: MakeOS, out: Path
) -> None:
    path = new_os("commented")
    (path / "variants.list").write_text("# the variants\n\nsmall\n   \n# big is gone\nlarge\n")
    # As Ganeti: in the order of variants.list.
    assert [n for n in os_list(cl) if n.startswith("commented")] == [
        "commented+small",
        "commented+large",
    ]
    info = ok(cl.gnt("os", "info", "commented"))
    assert "  - variants:\n    - small\n    - large\n" in info
    ok(add(cl, "varinst", *DISK, "--no-start", "-o", "commented+large"))
    assert read_env(out / "create-varinst")["OS_VARIANT"] == "large"


def test_os_version_is_read(cl: TestCluster, new_os: MakeOS) -> None:
    new_os("versioned", variants=None, os_version="1.2.3")
    rc, _ = diagnose(cl)
    assert rc == 0
    # Ganeti's gnt-os shows no version: the query fields do.
    with cl.client() as client:
        result = client.query("os", ["name", "os_version", "os_version_consistent"])
    rows = {r[0][1]: (r[1][1], r[2][1]) for r in result["data"]}
    assert rows["versioned"] == ({cl.node_name: "1.2.3"}, True)


# gnt-os list / diagnose / info
def test_list_diagnose_and_info_output(cl: TestCluster, new_os: MakeOS) -> None:
    new_os("shown", parameters={"alpha": "The first letter", "beta": "The second"})
    assert "shown+default" in os_list(cl)
    lines = ok(cl.gnt("os", "list")).splitlines()
    # As Ganeti's table: the header is as wide as the column.
    assert lines[0] == "Name".ljust(max(map(len, lines)))
    rc, text = diagnose(cl)
    assert rc == 0
    block = diagnose_block(text, "shown")
    assert block.splitlines() == [
        "OS: shown [global status: valid]",
        "  Variants: [default]",
        f"  Node: {cl.node_name}, status: valid (path: {cl.paths.os_search_path[0] / 'shown'})"
        " [API versions: 20] [variants: default] [parameters: alpha, beta] [trusted]",
    ]
    info = ok(cl.gnt("os", "info", "shown"))
    assert info.startswith("shown:\n  - valid: True\n  - hidden: False\n  - blacklisted: False\n")
    for line in (
        "  - API versions:\n    - 20\n",
        "  - variants:\n    - default\n",
        "  - parameters:\n    - alpha: The first letter\n    - beta: The second\n",
    ):
        assert line in info


def test_hidden_and_blacklisted_oses(cl: TestCluster, new_os: MakeOS) -> None:
    new_os("hideme", variants=None)
    new_os("blockme", variants=None)
    ok(cl.gnt("os", "modify", "--hidden=yes", "hideme"))
    ok(cl.gnt("os", "modify", "--blacklisted=yes", "blockme"))
    names = os_list(cl)
    assert "hideme" not in names and "blockme" not in names
    rc, text = diagnose(cl)
    assert rc == 0
    assert diagnose_block(text, "hideme").startswith("OS: hideme [global status: valid] [hidden]")
    assert diagnose_block(text, "blockme").startswith(
        "OS: blockme [global status: valid] [blacklisted]"
    )
    assert "  - hidden: True" in ok(cl.gnt("os", "info", "hideme"))
    assert "  - blacklisted: True" in ok(cl.gnt("os", "info", "blockme"))
    # the opcode's legacy rule (used by RAPI's /2/os): hidden and blacklisted left out
    # unless asked for
    with cl.client() as client:
        job = client.submit_job([{"OP_ID": "OP_OS_DIAGNOSE", "output_fields": ["name"]}])
        ((status, result),) = wait_final(client, [job], ("status", "opresult"))
        assert status == "success"
        listed = {row[0] for row in result[0]}
        assert "hideme" not in listed and "blockme" not in listed
        job = client.submit_job(
            [{"OP_ID": "OP_OS_DIAGNOSE", "output_fields": ["name", "hidden", "blacklisted"]}]
        )
        ((status, result),) = wait_final(client, [job], ("status", "opresult"))
        assert {"hideme", "blockme"} <= {row[0] for row in result[0]}
    ok(cl.gnt("os", "modify", "--hidden=no", "hideme"))
    ok(cl.gnt("os", "modify", "--blacklisted=no", "blockme"))
    names = os_list(cl)
    assert "hideme" in names and "blockme" in names


def test_hidden_and_blacklisted_for_an_os_that_does_not_exist_yet(
    cl: TestCluster, new_os: MakeOS
) -> None:
    ok(cl.gnt("os", "modify", "--hidden=yes", "future"))
    ok(cl.gnt("os", "modify", "--blacklisted=yes", "future2"))
    with cl.client() as client:
        info = client.call("QueryClusterInfo")
    assert "future" in info["hidden_os"] and "future2" in info["blacklisted_os"]
    new_os("future", variants=None)
    new_os("future2", variants=None)
    names = os_list(cl)
    assert "future" not in names and "future2" not in names
    failed(add(cl, "fut", *DISK, "--no-start", "-o", "future2"), "future2", "blacklisted")
    ok(cl.gnt("os", "modify", "--hidden=no", "future"))
    assert "future" in os_list(cl)


def test_blacklisted_os_still_reinstalls_and_renames(
    cl: TestCluster, new_os: MakeOS, out: Path
) -> None:
    new_os("legacy", variants=None)
    ok(add(cl, "leg1", *DISK, "--no-start", "-o", "legacy"))
    ok(cl.gnt("os", "modify", "--blacklisted=yes", "legacy"))
    failed(
        add(cl, "leg2", *DISK, "--no-start", "-o", "legacy"),
        "'legacy'",
        "blacklisted",
        "wrong_state",
    )
    assert query(cl, ["name"], "leg2") == {}
    (out / "create-leg1").unlink()
    ok(cl.gnt("instance", "reinstall", "-f", "leg1"))
    assert read_env(out / "create-leg1")["INSTANCE_REINSTALL"] == "1"
    ok(cl.gnt("instance", "rename", "-f", "--no-name-check", "--no-ip-check", "leg1", "leg1b"))
    assert read_env(out / "rename-leg1b")["OLD_INSTANCE_NAME"] == "leg1"


# Cluster-level OS parameters
def test_os_parameter_precedence(cl: TestCluster, new_os: MakeOS, out: Path) -> None:
    new_os(
        "prec",
        variants=("v1", "v2"),
        parameters={
            "a": "set by the OS",
            "b": "by the variant",
            "c": "by the instance",
            "d": "left to the script",
        },
    )
    ok(cl.gnt("os", "modify", "-O", "a=os,b=os,c=os", "prec"))
    ok(cl.gnt("os", "modify", "-O", "b=variant,c=variant", "prec+v1"))
    with cl.client() as client:
        osparams = client.call("QueryClusterInfo")["osparams"]
    assert osparams["prec"] == {"a": "os", "b": "os", "c": "os"}
    assert osparams["prec+v1"] == {"b": "variant", "c": "variant"}
    ok(add(cl, "p1", *DISK, "--no-start", "-o", "prec+v1", "-O", "c=instance"))
    env = read_env(out / "create-p1")
    assert (env["OSP_A"], env["OSP_B"], env["OSP_C"]) == ("os", "variant", "instance")
    assert "OSP_D" not in env  # the script's own default applies
    # another variant does not get v1's settings
    ok(add(cl, "p2", *DISK, "--no-start", "-o", "prec+v2"))
    env = read_env(out / "create-p2")
    assert (env["OSP_A"], env["OSP_B"], env["OSP_C"]) == ("os", "os", "os")
    # "-key" removes a cluster-level setting
    ok(cl.gnt("os", "modify", "-O", "-c", "prec+v1"))
    ok(cl.gnt("instance", "reinstall", "-f", "-O", "-c", "p1"))
    env = read_env(out / "create-p1")
    assert (env["OSP_B"], env["OSP_C"]) == ("variant", "os")
    # verify saw only the parameter variables, and "parameters" as its argument
    verify = read_env(out / "verify-parameters")
    assert verify["ARGS"] == "parameters"
    assert not [k for k in verify if k.startswith(("INSTANCE_", "DISK_", "NIC_"))]
    assert verify["OS_NAME"] == "prec"


def test_undeclared_parameter_is_refused(cl: TestCluster, new_os: MakeOS) -> None:
    new_os("strict", variants=None, parameters={"known": "a declared one"})
    failed(cl.gnt("os", "modify", "-O", "unknown=1", "strict"), "unknown", "strict")
    with cl.client() as client:
        assert "strict" not in client.call("QueryClusterInfo")["osparams"]
    failed(
        add(cl, "undecl", *DISK, "--no-start", "-o", "strict", "-O", "unknown=1"),
        "unknown",
        "known",
    )
    assert query(cl, ["name"], "undecl") == {}


def test_verify_refusing_a_value_is_refused(cl: TestCluster, new_os: MakeOS) -> None:
    verify = (
        '#!/bin/sh\nif [ "$OSP_SIZE" = huge ]; then echo "size huge is too big" >&2; exit 1; fi\n'
    )
    new_os("picky", variants=None, parameters={"size": "how big"}, scripts={"verify": verify})
    failed(cl.gnt("os", "modify", "-O", "size=huge", "picky"), "size huge is too big")
    with cl.client() as client:
        assert "picky" not in client.call("QueryClusterInfo")["osparams"]
    ok(cl.gnt("os", "modify", "-O", "size=small", "picky"))
    with cl.client() as client:
        assert client.call("QueryClusterInfo")["osparams"]["picky"] == {"size": "small"}


# Two nodes: os_version compared across nodes
def test_os_version_mismatch_between_nodes(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "c") as cl:
        node2 = add_node(cl, tmp_path / "node2")
        try:
            make_os(cl.paths, "twin", variants=None, os_version="1.0")
            make_os(node2.paths, "twin", variants=None, os_version="2.0")
            with cl.client() as client:
                result = client.query("os", ["name", "os_version", "os_version_consistent"])
            rows = {r[0][1]: (r[1][1], r[2][1]) for r in result["data"]}
            assert rows["twin"] == ({cl.node_name: "1.0", "node2.example.com": "2.0"}, False)
            verify = cl.gnt("cluster", "verify", "--error-codes")
            assert verify.rc == 1, verify
            assert "ENODEOS" in verify.stdout
            assert "os_version" in verify.stdout and "twin" in verify.stdout
            # the same version on both: all is well again
            (node2.paths.os_search_path[0] / "twin" / "os_version").write_text("1.0\n")
            assert cl.gnt("cluster", "verify").rc == 0
            assert "ENODEOS" not in cl.gnt("cluster", "verify", "--error-codes").stdout
        finally:
            node2.stop()
