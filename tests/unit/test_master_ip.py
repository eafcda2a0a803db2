"""The master IP's pieces on their own: the netmask rule, the setup script's
checks of its environment, noded's calls (the site's script, its hooks, the
node's own address left alone), and corral-rapi's answers when its masterd
stands by or stopped leading."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable
from pathlib import Path

import pytest

from corral import bootstrap, errors
from corral import constants as C
from corral.cmdlib.cluster_mip_modify import check_netmask
from corral.luxi import protocol
from corral.master_network import master_params, valid_netmask
from corral.node.context import NodeContext
from corral.node.handlers.master_ip import node_activate_master_ip, node_deactivate_master_ip
from corral.node.master_ip import external_script
from corral.objects import Cluster, Node
from corral.paths import Paths
from corral.rapi.errors import from_luxi
from corral.rapi.luxi import LuxiPool
from corral.rpc.wire import MasterNetworkWire
from corral.tools import master_ip_setup as tool
from tests.helpers.waiting import poll_async

IP = "10.213.0.200"


def _params(ip: str = IP, netmask: int = 32) -> MasterNetworkWire:
    return {"uuid": "u", "ip": ip, "netmask": netmask, "netdev": "eth9", "ip_family": 2}


@pytest.mark.parametrize(
    ("netmask", "version", "valid"),
    [(1, 4, True), (32, 4, True), (0, 4, False), (33, 4, False), (128, 6, True), (129, 6, False)],
)
def test_netmask_rule(netmask: int, version: int, valid: bool) -> None:
    assert valid_netmask(netmask, version) is valid


def test_master_params_as_ganeti_gives_them() -> None:
    node = Node(name="n1", primary_ip="10.0.0.1", secondary_ip="10.0.0.1", group="g")
    cluster = Cluster(name="c", master_node=node.uuid, master_ip="fd00::5", master_netmask=64)
    assert master_params(cluster, node) == {
        "uuid": node.uuid,
        "ip": "fd00::5",
        "netmask": 64,
        "netdev": "lo",
        "ip_family": socket.AF_INET6,
    }


def test_cluster_modify_refuses_a_netmask_beyond_the_address() -> None:
    cluster = Cluster(name="c", master_node="x", master_ip="10.1.1.1")
    with pytest.raises(errors.OpPrereqError) as caught:
        check_netmask(cluster, 33)
    assert caught.value.args == ("CIDR netmask (33) not valid", C.ECODE_INVAL)
    check_netmask(cluster, 24)
    check_netmask(Cluster(name="c", master_node="x", master_ip="fd00::1"), 100)


def _init_options(version: int, netmask: int | None) -> bootstrap.InitOptions:
    node_ip, master_ip = ("10.0.0.1", "10.0.0.2") if version == 4 else ("fd00::1", "fd00::2")
    return bootstrap.InitOptions(
        cluster_name="c.example.com",
        node_name="n1.example.com",
        node_ip=node_ip,
        master_ip=master_ip,
        secondary_ip="10.0.0.1",
        primary_ip_version=version,
        master_netmask=netmask,
    )


def test_init_netmask_default_by_version_and_bad_one_refused() -> None:
    for version, full in ((4, 32), (6, 128)):
        opts = _init_options(version, None)
        bootstrap._check_master_netmask(opts)
        assert opts.master_netmask == full
    with pytest.raises(errors.OpPrereqError) as caught:
        bootstrap._check_master_netmask(_init_options(4, 64))
    assert caught.value.args == ("CIDR netmask (64) not valid for IPv4 ", C.ECODE_INVAL)


def _env(netmask: str, version: str) -> dict[str, str]:
    return {
        "MASTER_NETDEV": "e",
        "MASTER_IP": IP,
        "MASTER_NETMASK": netmask,
        "CLUSTER_IP_VERSION": version,
    }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MASTER_IP": IP}, "Environment variable MASTER_NETDEV is not set"),
        (_env("32", "5"), "Invalid cluster IP version specified: 5"),
        (_env("40", "4"), f"Invalid master IP address or netmask: {IP}/40"),
        (_env("32", "6"), f"{IP} is not an IPv6 address"),
    ],
)
def test_setup_script_refuses_a_bad_environment(env: dict[str, str], message: str) -> None:
    with pytest.raises(tool.Refused) as caught:
        tool.Setup(env)
    assert str(caught.value) == message


def test_setup_script_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert tool.main([]) == 1
    assert tool.main(["restart"]) == 1
    assert capsys.readouterr().err == f"{tool.USAGE}\n{tool.USAGE}\n"


def test_setup_script_leaves_a_local_address_alone() -> None:
    env = {"MASTER_NETDEV": "lo", "MASTER_IP": "127.0.0.1", "MASTER_NETMASK": "32"}
    setup = tool.Setup({**env, "CLUSTER_IP_VERSION": "4"})
    assert tool.start(setup) == (
        "Master IP address already configured on this machine. Doing nothing."
    )
    # 127.0.0.1/32 is not on lo (127.0.0.1/8 is): nothing to take down.
    assert tool.stop(setup) == "Master IP address not configured on this machine. Doing nothing."


def _run(call: Awaitable[None]) -> None:
    async def wait() -> None:
        await call

    asyncio.run(wait())


def _site_script(paths: Paths, body: str) -> Path:
    script = external_script(paths)
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return script


def test_the_site_script_gets_ganeti_environment(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    seen = tmp_path / "seen"
    variables = "$MASTER_NETDEV $MASTER_IP $MASTER_NETMASK $CLUSTER_IP_VERSION"
    _site_script(paths, f'echo "$1 {variables}" > {seen}\n')
    ctx = NodeContext(paths, "10.213.0.2", 0)
    _run(node_activate_master_ip(ctx, _params(), True))
    assert seen.read_text() == f"start eth9 {IP} 32 4\n"
    _run(node_deactivate_master_ip(ctx, _params(), True))
    assert seen.read_text() == f"stop eth9 {IP} 32 4\n"


def test_a_failing_script_fails_the_call_in_ganeti_words(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    _site_script(paths, "echo cannot; exit 4\n")
    ctx = NodeContext(paths, "10.213.0.2", 0)
    with pytest.raises(errors.OpExecError) as caught:
        _run(node_activate_master_ip(ctx, _params(), True))
    assert caught.value.message == (
        "Failed to start the master IP. Script return value: 4, output: 'cannot'"
    )


def test_the_node_own_address_is_never_taken_down(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    ran = tmp_path / "ran"
    _site_script(paths, f"touch {ran}\n")
    ctx = NodeContext(paths, IP, 0)
    _run(node_deactivate_master_ip(ctx, _params(), True))
    assert not ran.exists()


def test_hooks_around_the_script_and_a_failing_pre_hook_stops_it(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    ran = tmp_path / "ran"
    _site_script(paths, f"touch {ran}\n")
    post = paths.hooks_dir / "master-ip-turnup-post.d"
    post.mkdir(parents=True)
    env_seen = tmp_path / "env"
    (post / "10-env").write_text(f"#!/bin/sh\nenv > {env_seen}\n")
    (post / "10-env").chmod(0o755)
    ctx = NodeContext(paths, "10.213.0.2", 0)
    _run(node_activate_master_ip(ctx, _params(), True))
    env = dict(line.split("=", 1) for line in env_seen.read_text().splitlines())
    assert env["GANETI_OP_CODE"] == "OP_CLUSTER_IP_TURNUP"
    assert env["GANETI_HOOKS_PHASE"] == "post"
    assert env["GANETI_MASTER_IP"] == env["GANETI_POST_MASTER_IP"] == IP
    assert env["GANETI_MASTER_NETDEV"] == "eth9"
    ran.unlink()
    pre = paths.hooks_dir / "master-ip-turnup-pre.d"
    pre.mkdir(parents=True)
    (pre / "10-no").write_text("#!/bin/sh\necho not now; exit 1\n")
    (pre / "10-no").chmod(0o755)
    with pytest.raises(errors.HooksAbort):
        _run(node_activate_master_ip(ctx, _params(), True))
    assert not ran.exists()


def test_rapi_names_the_master_when_its_masterd_stands_by() -> None:
    text = f"This node (n2) {errors.NOT_MASTER} n1 (run the command there)"
    answer = from_luxi(errors.OpPrereqError(text, C.ECODE_STATE))
    assert (answer.status, answer.message) == (502, text)
    other = from_luxi(errors.OpPrereqError("something else", C.ECODE_STATE))
    assert other.status == 500


def test_rapi_drops_connections_masterd_closed(tmp_path: Path) -> None:
    """A masterd that stopped leading closed its connections: the next call
    goes to whoever listens on the socket now, not into a dead connection."""

    async def scenario() -> list[object]:
        path = str(tmp_path / "m")
        answers = iter(["first", "second"])

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(protocol.ETX)
            writer.write(protocol.encode_response(True, next(answers)))
            await writer.drain()
            writer.close()  # as a masterd that stops leading

        server = await asyncio.start_unix_server(serve, path)
        pool = LuxiPool(path)
        try:
            first = await pool.call("QueryClusterInfo")

            async def closed() -> bool:
                return all(c.reader.at_eof() for c in pool._idle)

            await poll_async(closed, bool, 5.0, "masterd's close seen", interval=0.01)
            second = await pool.call("QueryClusterInfo")
        finally:
            await pool.close()
            server.close()
        return [first, second]

    assert asyncio.run(scenario()) == ["first", "second"]


def test_init_refuses_a_candidate_pool_without_candidates() -> None:
    opts = _init_options(4, None)
    opts.candidate_pool_size = 0
    with pytest.raises(errors.OpPrereqError, match="at least one master candidate") as caught:
        bootstrap._validate(opts)
    assert caught.value.ecode == C.ECODE_INVAL
