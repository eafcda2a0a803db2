"""The node's import/export engine between two real nodeds (mutual TLS 1.3):
disks and export files round-trip byte for byte under every compression; the
OS export/import scripts get Ganeti's environment and EXP_SIZE_FD; wrong
magics and foreign or tampered certificates are refused while the import
keeps waiting; per-move X509 keys work; abort stops both ends; impexp_wait answers when a
stream ends."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from corral.paths import Paths
from corral.rpc import calls_impexp
from corral.rpc.calls_impexp import (
    ImpExpOptions,
    export_info,
    export_list,
    export_remove,
    export_start,
    finalize_export,
    impexp_abort,
    impexp_cleanup,
    impexp_status,
    impexp_wait,
    import_start,
    x509_cert_create,
    x509_cert_remove,
)
from corral.rpc.declare import Request
from corral.rpc.result import NodeCallError
from tests.helpers.cluster import unique_loopback
from tests.helpers.noded import REPO_ROOT, Noded, free_port, make_node_root, start_noded
from tests.helpers.osdef import make_os

MIB = 1024 * 1024
REFERENCE = REPO_ROOT / "tests" / "data" / "ganeti-3.0.2-env"


class Pair:
    def __init__(self, one: Noded, two: Noded) -> None:
        self.one, self.two = one, two


def start_pair(root: Path, *, name: str = "ie") -> Pair:
    """Two nodeds of one cluster on unique loopback addresses."""
    ip1, ip2 = unique_loopback(), unique_loopback()
    port = free_port(ip1)
    paths1 = make_node_root(root / f"{name}1", node_ip=ip1)
    paths2 = make_node_root(
        root / f"{name}2", node_name="node2.example.com", node_ip=ip2, cluster=paths1
    )
    one = start_noded(paths1, ip1, port)
    try:
        two = start_noded(paths2, ip2, port)
    except BaseException:
        one.stop()
        raise
    two.name = "node2.example.com"
    return Pair(one, two)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    p = start_pair(tmp_path_factory.mktemp("impexp"))
    try:
        yield p
    finally:
        p.two.stop()
        p.one.stop()


async def until(check: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
    """Poll ``check`` until it returns something true; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not (value := await check()):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)
    return value


async def status(node: Noded, name: str) -> dict[str, Any]:
    [st] = await node.run(impexp_status([name]))
    assert st is not None
    return dict(st)


async def finished(node: Noded, name: str, timeout: float = 60.0) -> dict[str, Any]:
    async def ended() -> dict[str, Any] | None:
        st = await status(node, name)
        return st if st["exit_status"] is not None else None

    result: dict[str, Any] = await until(ended, timeout)
    return result


def opts(**kw: Any) -> ImpExpOptions:
    base: dict[str, Any] = {
        "key_name": None,
        "ca_pem": None,
        "compress": "none",
        "magic": "magic-" + secrets.token_hex(4),
        "connect_timeout": 30,
        "bind_address": None,
        "size": None,
    }
    return cast("ImpExpOptions", base | kw)


def disk_desc(name: str, index: int, size_mib: int) -> dict[str, Any]:
    return {
        "template": "file",
        "logical_id": ["loop", f"/srv/ganeti/file-storage/{name}/disk{index}"],
        "size": size_mib,
        "uuid": f"{name}-{index}",
        "iv_name": f"disk/{index}",
        "name": None,
        "mode": "rw",
    }


def instance(name: str, sizes: list[int], os_name: str = "none") -> dict[str, Any]:
    """A descriptor as the master sends it (disks carry their description)."""
    disks = [
        {"uuid": f"{name}-{i}", "size": s, "mode": "rw", "description": disk_desc(name, i, s)}
        for i, s in enumerate(sizes)
    ]
    return {
        "name": name,
        "os": f"{os_name}+default",
        "uuid": f"uuid-{name}",
        "ctime": 1.0,
        "mtime": 2.0,
        "primary_node": "node1.example.com",
        "secondary_nodes": [],
        "hypervisor": "fake",
        "disks": disks,
        "nics": [],
        "beparams": {"vcpus": 1},
        "hvparams": {},
        "osspec": {
            "name": f"{os_name}+default",
            "params": {
                "greeting": {"value": "hello", "visibility": "public"},
                "token": {"value": "sekrit-value", "visibility": "secret"},
            },
        },
        "debug": 0,
    }


def disk_path(paths: Paths, inst: dict[str, Any], index: int) -> Path:
    return paths.from_wire(inst["disks"][index]["description"]["logical_id"][1])


def make_disk(paths: Paths, inst: dict[str, Any], index: int, content: bytes | None) -> Path:
    path = disk_path(paths, inst, index)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(inst["disks"][index]["size"] * MIB)
        if content:
            handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    return path


def drop_cache(path: Path) -> None:
    """Evict the (clean) file from the page cache: it is read with direct I/O."""
    with path.open("rb") as handle:
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


async def start(
    src: Noded,
    dst: Noded,
    inst: dict[str, Any],
    source: tuple[str, dict[str, Any]],
    dest: tuple[str, dict[str, Any]],
    o: ImpExpOptions,
) -> tuple[str, str]:
    """Start a stream from ``src`` to ``dst``: the import's and the export's names."""
    imp = await dst.run(import_start(o, inst, "disk/0", *dest))
    port = (await status(dst, imp))["listen_port"]
    assert isinstance(port, int) and port > 0
    exp = await src.run(export_start(o, dst.address, port, inst, "disk/0", *source))
    return imp, exp


async def transfer(
    src: Noded,
    dst: Noded,
    inst: dict[str, Any],
    source: tuple[str, dict[str, Any]],
    dest: tuple[str, dict[str, Any]],
    **kw: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One stream from ``src`` to ``dst``: the final status of both ends."""
    imp, exp = await start(src, dst, inst, source, dest, opts(**kw))
    out = await finished(src, exp), await finished(dst, imp)
    await src.run(impexp_cleanup(exp))
    await dst.run(impexp_cleanup(imp))
    return out


@pytest.mark.parametrize("compress", ["none", "gzip", "gzip-fast", "gzip-slow", "zstd"])
async def test_disk_to_file_to_disk_round_trip(pair: Pair, compress: str) -> None:
    name = f"rt-{compress}-{secrets.token_hex(3)}"
    inst = instance(name, [11])
    # Odd size, data then a run of zeros (skipped by sparse writes) then data.
    content = os.urandom(5 * MIB + 333) + bytes(4 * MIB) + os.urandom(MIB + 7)
    source = make_disk(pair.one.paths, inst, 0, content)
    if compress in ("none", "gzip"):
        # Half of the runs read the source from the device, half from the cache.
        drop_cache(source)
    exp, imp = await transfer(
        pair.one,
        pair.two,
        inst,
        ("disk", {"index": 0}),
        ("file", {"export": name, "dump": "d0"}),
        compress=compress,
    )
    assert exp["exit_status"] == 0 and imp["exit_status"] == 0, (exp, imp)
    assert exp["progress_percent"] == 100 and imp["connected"]
    assert exp["progress_mbytes"] == imp["progress_mbytes"] == 11
    assert exp["progress_throughput"] > 0 and exp["progress_eta"] == 0
    dump = pair.two.paths.export_dir / f"{name}.new" / "d0"
    assert dump.read_bytes() == content + bytes(11 * MIB - len(content))
    await pair.two.run(finalize_export(name, "[export]\nversion = 0\n"))
    assert name in await pair.two.run(export_list())
    assert await pair.two.run(export_info(name)) == "[export]\nversion = 0\n"
    # Back into a fresh disk on the first node.
    back = instance(name + "-b", [11])
    make_disk(pair.one.paths, back, 0, None)
    exp, imp = await transfer(
        pair.two,
        pair.one,
        back,
        ("file", {"export": name, "dump": "d0"}),
        ("disk", {"index": 0}),
        compress=compress,
    )
    assert exp["exit_status"] == 0 and imp["exit_status"] == 0, (exp, imp)
    assert disk_path(pair.one.paths, back, 0).read_bytes() == dump_bytes(pair.two.paths, name)
    await pair.two.run(export_remove(name))
    assert name not in await pair.two.run(export_list())


def dump_bytes(paths: Paths, name: str) -> bytes:
    return (paths.export_dir / name / "d0").read_bytes()


ENV_DUMP = 'env | sort > "$(dirname "$0")/{kind}-$INSTANCE_NAME.env"\n'
EXPORT_SCRIPT = (
    "#!/bin/bash\nset -e\n" + ENV_DUMP.format(kind="export") +
    # Twice the real size: the status must follow EXP_SIZE_FD (50% at the end).
    'echo $(( $(stat -c %s "$EXPORT_DEVICE") * 2 )) >&$EXP_SIZE_FD\n'
    'echo "exporting $OSP_TOKEN" >&2\n'
    'cat "$EXPORT_DEVICE"\n'
)
IMPORT_SCRIPT = (
    "#!/bin/bash\nset -e\n"
    + ENV_DUMP.format(kind="import")
    + 'echo "importing to $IMPORT_DEVICE"\n'
    'cat > "$IMPORT_DEVICE"\n'
)


# What the shell adds.
SHELL = {"PWD", "SHLVL", "_", "OLDPWD"}
OTHER = ("NIC_", "INSTANCE_BE_", "INSTANCE_HV_", "OSP_")


def reference_keys(kind: str) -> set[str]:
    shell = SHELL
    keys = set()
    for line in (REFERENCE / f"os-{kind}.1.env.txt").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            keys.add(line.split("=", 1)[0])
    # The reference instance had a NIC and Ganeti's full beparams: not this one's.
    return {k for k in keys - shell if not k.startswith(OTHER)}


def env_keys(path: Path) -> set[str]:
    keys = {line.split("=", 1)[0] for line in path.read_text().splitlines() if "=" in line}
    return {k for k in keys - SHELL if not k.startswith(OTHER)}


async def test_scripts_stream_with_ganeti_environment(pair: Pair) -> None:
    os_name = "ieos"
    scripts = {"export": EXPORT_SCRIPT, "import": IMPORT_SCRIPT}
    for node in (pair.one, pair.two):
        make_os(node.paths, os_name, parameters={"greeting": "g", "token": "t"}, scripts=scripts)
    name = f"sc-{secrets.token_hex(3)}"
    inst = instance(name, [3], os_name)
    content = os.urandom(3 * MIB - 4096) + b"tail"
    make_disk(pair.one.paths, inst, 0, content)
    make_disk(pair.two.paths, inst, 0, None)
    exp, imp = await transfer(
        pair.one,
        pair.two,
        inst,
        ("script", {"index": 0}),
        ("script", {"index": 0}),
        compress="zstd",
    )
    assert exp["exit_status"] == 0 and imp["exit_status"] == 0, (exp, imp)
    assert disk_path(pair.two.paths, inst, 0).read_bytes()[: len(content)] == content
    # EXP_SIZE_FD said twice the size: the export stopped at 50 %.
    assert exp["progress_percent"] == 50, exp
    # The script's messages reach recent_output, its secret parameter does not.
    assert any("exporting <redacted>" in line for line in exp["recent_output"]), exp
    assert not any("sekrit" in line for line in exp["recent_output"])
    os_dir1 = pair.one.paths.os_search_path[0] / os_name
    os_dir2 = pair.two.paths.os_search_path[0] / os_name
    assert env_keys(os_dir1 / f"export-{name}.env") == reference_keys("export")
    assert env_keys(os_dir2 / f"import-{name}.env") == reference_keys("import")


async def test_wrong_magic_refused_import_keeps_waiting(pair: Pair) -> None:
    inst = instance(f"mg-{secrets.token_hex(3)}", [1])
    good = opts(compress="none")
    imp = await pair.two.run(import_start(good, inst, "disk/0", "discard", {}))
    port = (await status(pair.two, imp))["listen_port"]
    bad = opts(compress="none", magic="other-magic")
    exp = await pair.one.run(
        export_start(bad, pair.two.address, port, inst, "disk/0", "zero", {"size": MIB})
    )
    st = await finished(pair.one, exp)
    assert st["exit_status"] != 0 and "wrong magic" in st["error_message"], st
    mid = await status(pair.two, imp)
    assert mid["exit_status"] is None and not mid["connected"]
    assert any("refused" in line and "wrong magic" in line for line in mid["recent_output"])
    exp2 = await pair.one.run(
        export_start(good, pair.two.address, port, inst, "disk/0", "zero", {"size": MIB})
    )
    assert (await finished(pair.one, exp2))["exit_status"] == 0
    assert (await finished(pair.two, imp))["exit_status"] == 0
    for node, name in ((pair.one, exp), (pair.one, exp2), (pair.two, imp)):
        await node.run(impexp_cleanup(name))


async def test_per_move_x509_keys(pair: Pair) -> None:
    inst = instance(f"x5-{secrets.token_hex(3)}", [1])
    name1, pem1 = await pair.one.run(x509_cert_create(3600))
    name2, pem2 = await pair.two.run(x509_cert_create(3600))
    key = pair.one.paths.run_dir / "crypto" / name1 / "key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert "PRIVATE" not in pem1
    # Each side presents its own key and requires exactly the other's certificate.
    exp, imp = await _x509_transfer(pair, inst, (name1, pem2), (name2, pem1))
    assert exp["exit_status"] == 0 and imp["exit_status"] == 0, (exp, imp)
    # A third certificate expected by the importer: the exporter is refused.
    name3, pem3 = await pair.one.run(x509_cert_create(3600))
    exp, imp = await _x509_transfer(pair, inst, (name1, pem2), (name2, pem3), timeout=3)
    assert exp["exit_status"] != 0 and "refused" in exp["error_message"], exp
    assert any("refused a connection" in line for line in imp["recent_output"]), imp
    # The exporter expects another certificate than the importer's: it refuses.
    exp, imp = await _x509_transfer(pair, inst, (name1, pem3), (name2, pem1), timeout=3)
    assert exp["exit_status"] != 0 and "unacceptable certificate" in exp["error_message"], exp
    # A tampered copy of the importer's certificate: its signature does not verify.
    lines = pem2.splitlines()
    lines[5] = lines[5][::-1]
    exp, imp = await _x509_transfer(pair, inst, (name1, "\n".join(lines)), (name2, pem1), timeout=3)
    assert exp["exit_status"] != 0 and "certificate" in exp["error_message"], exp
    for node, key_name in ((pair.one, name1), (pair.two, name2), (pair.one, name3)):
        await node.run(x509_cert_remove(key_name))
    assert not key.parent.exists()
    with pytest.raises(Exception, match="Unknown X509 key"):
        await pair.one.run(x509_cert_remove(name1))


async def _x509_transfer(
    pair: Pair,
    inst: dict[str, Any],
    exporter: tuple[str, str],
    importer: tuple[str, str],
    timeout: int = 30,
) -> tuple[dict[str, Any], dict[str, Any]]:
    base = opts(connect_timeout=timeout)
    imp_opts: ImpExpOptions = {**base, "key_name": importer[0], "ca_pem": importer[1]}
    exp_opts: ImpExpOptions = {**base, "key_name": exporter[0], "ca_pem": exporter[1]}
    imp = await pair.two.run(import_start(imp_opts, inst, "disk/0", "discard", {}))
    port = (await status(pair.two, imp))["listen_port"]
    exp = await pair.one.run(
        export_start(exp_opts, pair.two.address, port, inst, "disk/0", "zero", {"size": 3 * MIB})
    )
    done = await finished(pair.one, exp)
    if done["exit_status"] != 0:
        # The import would wait for another exporter until its time-out.
        await pair.two.run(impexp_abort(imp))
    out = done, await finished(pair.two, imp)
    await pair.one.run(impexp_cleanup(exp))
    await pair.two.run(impexp_cleanup(imp))
    return out


async def test_abort_stops_both_ends(pair: Pair) -> None:
    inst = instance(f"ab-{secrets.token_hex(3)}", [1])
    o = opts(connect_timeout=300)
    imp = await pair.two.run(import_start(o, inst, "disk/0", "discard", {}))
    port = (await status(pair.two, imp))["listen_port"]
    await pair.one.run(calls_impexp.test_impexp_gate(True))
    try:
        exp = await pair.one.run(
            export_start(o, pair.two.address, port, inst, "disk/0", "zero", {"size": 64 * MIB})
        )
        await until(lambda: _moved(pair.one, exp))
        start = time.monotonic()
        await pair.two.run(impexp_abort(imp))
        st_imp = await finished(pair.two, imp, timeout=10)
        assert time.monotonic() - start < 10
    finally:
        await pair.one.run(calls_impexp.test_impexp_gate(False))
    # Once past the gate, the exporter finds the connection gone.
    st_exp = await finished(pair.one, exp, timeout=10)
    assert st_imp["exit_status"] != 0 and st_imp["error_message"] == "Aborted"
    assert st_exp["exit_status"] != 0
    await pair.one.run(impexp_cleanup(exp))
    await pair.two.run(impexp_cleanup(imp))
    assert await pair.two.run(impexp_status([imp])) == [None]


async def _moved(node: Noded, name: str) -> bool:
    st = await status(node, name)
    return bool(st["progress_mbytes"])


async def test_bad_names_refused(pair: Pair) -> None:
    for bad in ("..", "a/b", "../x", "", ".hidden"):
        with pytest.raises(Exception, match="Invalid"):
            await pair.two.run(export_info(bad))
        with pytest.raises(Exception, match="Invalid"):
            await pair.two.run(export_remove(bad))
        with pytest.raises(Exception, match="Invalid"):
            await pair.two.run(finalize_export(bad, "x"))
    inst = instance("bn", [1])
    with pytest.raises(Exception, match="Invalid"):
        await pair.two.run(
            import_start(opts(), inst, "disk/0", "file", {"export": "bn", "dump": "../escape"})
        )


def _foreign(tmp: Path) -> Paths:
    """A node of another cluster (its own CA)."""
    return make_node_root(tmp / "foreign", node_name="node9.example.com", node_ip="127.0.0.9")


def _foreign_client(paths: Paths, address: str, port: int) -> str:
    """Connect to an import as the foreign node: what the handshake and the
    header exchange gave."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # only the importer's check is tested here
    ctx.load_cert_chain(paths.server_pem)
    try:
        with (
            socket.create_connection((address, port), timeout=10) as raw,
            ctx.wrap_socket(raw) as sock,
        ):
            sock.sendall(b"CORRAL-IMPEXP/1\n")
            return repr(sock.recv(1))
    except (OSError, ssl.SSLError) as err:
        return f"refused: {err}"


async def test_foreign_cluster_certificates_refused(pair: Pair, tmp_path: Path) -> None:
    foreign = _foreign(tmp_path)
    inst = instance(f"fc-{secrets.token_hex(3)}", [1])
    o = opts()
    imp = await pair.two.run(import_start(o, inst, "disk/0", "discard", {}))
    port = (await status(pair.two, imp))["listen_port"]
    # Another cluster's node connects to the import: refused, the import waits on.
    answer = await asyncio.to_thread(_foreign_client, foreign, pair.two.address, port)
    assert answer.startswith("refused") or answer == "b''", answer
    mid = await status(pair.two, imp)
    assert mid["exit_status"] is None and not mid["connected"]
    assert any("refused a connection" in line for line in mid["recent_output"]), mid
    await pair.two.run(impexp_abort(imp))
    await finished(pair.two, imp)
    await pair.two.run(impexp_cleanup(imp))
    # An export to another cluster's node (presenting its own certificate): refused.
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(foreign.server_pem)
    with socket.create_server((pair.two.address, 0)) as listener:
        fport = listener.getsockname()[1]
        exp = await pair.one.run(
            export_start(o, pair.two.address, fport, inst, "disk/0", "zero", {"size": MIB})
        )
        raw, _ = await asyncio.to_thread(listener.accept)
        with raw:
            with contextlib.suppress(OSError, ssl.SSLError):
                await asyncio.to_thread(server.wrap_socket, raw, server_side=True)
            st = await finished(pair.one, exp)
    assert st["exit_status"] != 0 and "unacceptable certificate" in st["error_message"], st
    await pair.one.run(impexp_cleanup(exp))


async def test_exporter_retries_until_connect_timeout(pair: Pair) -> None:
    inst = instance(f"rt-{secrets.token_hex(3)}", [1])
    nobody = free_port(pair.two.address)
    start = time.monotonic()
    exp = await pair.one.run(
        export_start(
            opts(connect_timeout=2), pair.two.address, nobody, inst, "disk/0", "zero", {"size": MIB}
        )
    )
    st = await finished(pair.one, exp)
    assert time.monotonic() - start >= 2
    assert st["exit_status"] != 0 and "Cannot connect" in st["error_message"], st
    assert any("retrying" in line for line in st["recent_output"]), st
    await pair.one.run(impexp_cleanup(exp))


async def test_wait_answers_when_a_stream_ends(pair: Pair) -> None:
    """impexp_wait answers once a stream ended, not after its timeout (30 s,
    far longer than this test): a gate holds the export, the wait is
    pending, the gate opens and the wait returns the ended stream's status."""
    inst, o = instance(f"wt-{secrets.token_hex(3)}", [1]), opts()
    imp = await pair.two.run(import_start(o, inst, "disk/0", "discard", {}))
    port = (await status(pair.two, imp))["listen_port"]
    await pair.one.run(calls_impexp.test_impexp_gate(True))
    try:
        exp = await pair.one.run(
            export_start(o, pair.two.address, port, inst, "disk/0", "zero", {"size": 16 * MIB})
        )
        await until(lambda: _moved(pair.one, exp))
        waiting = asyncio.ensure_future(pair.one.run(impexp_wait([exp, "unknown"], 30)))
        waiting_imp = asyncio.ensure_future(pair.two.run(impexp_wait([imp], 30)))
        # Held by the gate, the export cannot end: both waits are still pending
        # after a status call that went through the same nodes.
        assert (await status(pair.one, exp))["exit_status"] is None
        assert (await status(pair.two, imp))["exit_status"] is None
        assert not waiting.done() and not waiting_imp.done()
    finally:
        await pair.one.run(calls_impexp.test_impexp_gate(False))
    # Deadlines below the waits' own 30 s: a wait that only answers when its
    # timeout is over fails here instead of passing late.
    st_exp, unknown = await asyncio.wait_for(waiting, 20)
    [st_imp] = await asyncio.wait_for(waiting_imp, 20)
    assert st_exp is not None and st_imp is not None and unknown is None
    assert st_exp["exit_status"] == 0 and st_exp["progress_mbytes"] == 16, st_exp
    assert st_imp["exit_status"] == 0, st_imp
    # A stream that ended already: the wait answers at once.
    [ended] = await pair.one.run(impexp_wait([exp], 30))
    assert ended is not None and ended["exit_status"] == 0
    # Nothing that can end (unknown names only): the wait is its timeout.
    assert await pair.one.run(impexp_wait(["nothing-here"], 0)) == [None]
    for bad in ((exp, 1), ([exp], -1), ([exp], "1"), ([exp], True)):
        with pytest.raises(NodeCallError, match="Invalid"):
            # Arguments the declaration refuses, sent as they are: noded refuses them.
            await pair.one.run(Request(impexp_wait, list(bad)))
    await pair.one.run(impexp_cleanup(exp))
    await pair.two.run(impexp_cleanup(imp))
