"""Faults of the import/export engine between real nodeds: the exporter's
noded killed mid-stream, a full destination, threads left behind, what a
dead noded leaves on disk (unfinished exports, expired X509 keys)."""

from __future__ import annotations

import datetime
import os
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.rpc import calls_impexp
from corral.rpc.calls_impexp import (
    export_start,
    impexp_abort,
    impexp_cleanup,
    import_start,
    x509_cert_create,
)
from tests.helpers.certs import self_signed_pem
from tests.helpers.noded import start_noded
from tests.helpers.tmpfs import tmpfs
from tests.integration.test_impexp_node import (
    MIB,
    Pair,
    finished,
    instance,
    make_disk,
    opts,
    start,
    start_pair,
    status,
    until,
)


@pytest.fixture
def fresh_pair(tmp_path: Path) -> Iterator[Pair]:
    p = start_pair(tmp_path, name="f")
    try:
        yield p
    finally:
        p.two.stop()
        p.one.stop()


def threads(pid: int | None) -> int:
    assert pid is not None
    return len(os.listdir(f"/proc/{pid}/task"))


def expired_key(base: Path) -> Path:
    """A per-move key directory whose certificate expired an hour ago."""
    directory = base / "x509-20200101000000-0badc0de"
    directory.mkdir(parents=True, mode=0o700)
    hour = datetime.timedelta(hours=1)
    (directory / "cert").write_text(self_signed_pem("old", -2 * hour, -hour))
    (directory / "key").write_bytes(b"unused")
    return directory


async def test_exporter_killed_then_restart_cleans_up(fresh_pair: Pair) -> None:
    pair = fresh_pair
    name = f"kill-{secrets.token_hex(3)}"
    inst = instance(name, [16])
    make_disk(pair.one.paths, inst, 0, os.urandom(16 * MIB))
    o = opts(connect_timeout=300)
    imp = await pair.two.run(
        import_start(o, inst, "disk/0", "file", {"export": name, "dump": "d0"})
    )
    port = (await status(pair.two, imp))["listen_port"]
    await pair.one.run(calls_impexp.test_impexp_gate(True))
    await pair.one.run(
        export_start(o, pair.two.address, port, inst, "disk/0", "disk", {"index": 0})
    )

    async def moved() -> bool:
        return bool((await status(pair.two, imp))["progress_mbytes"])

    await until(moved)
    partial = pair.two.paths.export_dir / f"{name}.new" / "d0"
    assert partial.exists()
    pid = pair.one.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    st = await finished(pair.two, imp, timeout=20)
    assert st["exit_status"] != 0 and "closed the connection" in st["error_message"], st
    await pair.two.run(impexp_cleanup(imp))
    assert not partial.exists()
    # The importer's node: another unfinished export and an expired key, as a
    # dead noded leaves them; its restart removes both.
    leftover = pair.two.paths.export_dir / "gone.example.com.new"
    leftover.mkdir(parents=True)
    (leftover / "d0").write_bytes(b"partial")
    key_dir = expired_key(pair.two.paths.run_dir / "crypto")
    live, _ = await pair.two.run(x509_cert_create(600))
    pair.two.stop()
    pair.two = start_noded(pair.two.paths, pair.two.address, pair.two.port)
    pair.two.name = "node2.example.com"
    assert not leftover.exists() and not key_dir.exists()
    assert (pair.two.paths.run_dir / "crypto" / live / "key").exists()


async def test_full_destination_is_a_clear_error(fresh_pair: Pair) -> None:
    pair = fresh_pair
    name = f"full-{secrets.token_hex(3)}"
    inst = instance(name, [8])
    make_disk(pair.one.paths, inst, 0, os.urandom(8 * MIB))
    with tmpfs(pair.two.paths.export_dir, "2m"):
        dump = ("file", {"export": name, "dump": "d0"})
        imp, exp = await start(pair.one, pair.two, inst, ("disk", {"index": 0}), dump, opts())
        st_imp = await finished(pair.two, imp)
        st_exp = await finished(pair.one, exp)
        assert st_imp["exit_status"] != 0
        assert "No space left on the device" in st_imp["error_message"], st_imp
        # The exporter says why too: the importer's reason reaches it.
        assert st_exp["exit_status"] != 0
        await pair.two.run(impexp_cleanup(imp))
        await pair.one.run(impexp_cleanup(exp))
        assert not (pair.two.paths.export_dir / f"{name}.new" / "d0").exists()


async def _round(pair: Pair, count: int) -> None:
    """``count`` streams at once, plus an import nobody connects to, aborted."""
    inst = instance("th", [1])
    names = []
    for _ in range(count):
        o = opts()
        imp = await pair.two.run(import_start(o, inst, "disk/0", "discard", {}))
        port = (await status(pair.two, imp))["listen_port"]
        exp = await pair.one.run(
            export_start(o, pair.two.address, port, inst, "disk/0", "zero", {"size": 9 * MIB})
        )
        names.append((exp, imp))
    idle = await pair.two.run(import_start(opts(), inst, "disk/0", "discard", {}))
    await pair.two.run(impexp_abort(idle))
    for exp, imp in names:
        assert (await finished(pair.one, exp))["exit_status"] == 0
        assert (await finished(pair.two, imp))["exit_status"] == 0
        await pair.one.run(impexp_cleanup(exp))
        await pair.two.run(impexp_cleanup(imp))
    assert (await finished(pair.two, idle))["error_message"] == "Aborted"
    await pair.two.run(impexp_cleanup(idle))


async def test_no_thread_left_behind(fresh_pair: Pair) -> None:
    pair = fresh_pair
    # The first round starts the event loop's executor workers, which stay.
    await _round(pair, 3)
    before = threads(pair.one.pid), threads(pair.two.pid)
    await _round(pair, 3)

    async def back() -> bool:
        now = threads(pair.one.pid), threads(pair.two.pid)
        return now[0] <= before[0] and now[1] <= before[1]

    await until(back, timeout=10)
