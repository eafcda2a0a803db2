"""mond's collectors and paths (Ganeti's names, categories, kinds and report
format), served over real HTTP on loopback; bad paths and methods refused."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from corral.daemons import noded
from corral.mond import collectors as dc
from corral.mond.server import NO_REPORT, NOT_FOUND, Mond
from corral.paths import Paths

STAT = """cpu  100 0 50 1000 10 0 0 0 0 0
cpu0 60 0 30 500 5 0 0 0 0 0
cpu1 40 0 20 500 5 0 0 0 0 0
intr 12345 0 0
"""
DISKSTATS = """   7       0 loop0 11 1 30 6 48 84 302 21 0 83 28 64 0 100 2 26 63
 259       0 nvme0n1 1 2 3 4 5 6 7 8 9 10 11
   8       0 sda 1 2
"""
REPORT_KEYS = ["name", "version", "format_version", "timestamp", "category", "kind", "data"]


def test_stat_lines_count_all_but_idle() -> None:
    assert dc.parse_stat(STAT) == [160, 95, 65]
    with pytest.raises(ValueError):
        dc.parse_stat("intr 1\n")


def test_diskstats_have_ganetis_fields_and_skip_short_lines() -> None:
    disks = dc.parse_diskstats(DISKSTATS)
    assert [d["name"] for d in disks] == ["loop0", "nvme0n1"]
    assert list(disks[0]) == ["major", "minor", "name", *dc.DISKSTATS_FIELDS]
    assert disks[1]["wIOmillis"] == 11 and disks[0]["wIOmillis"] == 28


def test_cpu_load_averages_from_the_oldest_sample_in_the_window(tmp_path: Path) -> None:
    cpu = dc.CpuAvgLoad(tmp_path)
    assert "error" in cpu.average((10.0, [0, 0]))  # nothing sampled yet
    ticks = os.sysconf("SC_CLK_TCK")
    cpu.samples.extend([(0.0, [0, 0, 0]), (700.0, [0, 0, 0]), (750.0, [ticks, 0, ticks])])
    # The window is the last 600 s: the sample at 0 is out of it.
    data = cpu.average((800.0, [100 * ticks, 40 * ticks, 60 * ticks]))
    assert data == {"cpu_number": 2, "cpus": [0.4, 0.6], "cpu_total": 1.0}


@pytest.fixture
async def mond(tmp_path: Path) -> AsyncIterator[TestClient[Any, Any]]:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "stat").write_text(STAT)
    (proc / "diskstats").write_text(DISKSTATS)
    server = Mond(Paths(tmp_path / "root"), "127.0.0.1")
    server.cpu = dc.CpuAvgLoad(proc)
    server.collectors = [server.cpu, dc.DiskStats(proc)]
    await server.cpu.sample()
    async with TestClient(TestServer(server.app(), host="127.0.0.1")) as client:
        yield client


def _check_report(report: dict[str, Any], name: str, category: str | None) -> None:
    assert list(report) == REPORT_KEYS
    assert (report["name"], report["version"], report["format_version"]) == (name, "B", 1)
    assert (report["category"], report["kind"]) == (category, 0)
    assert isinstance(report["timestamp"], int) and report["timestamp"] > 10**18  # ns


async def test_ganetis_paths_answer_in_ganetis_format(mond: TestClient[Any, Any]) -> None:
    assert await (await mond.get("/")).json() == [1]
    assert await (await mond.get("/1")).json() is None
    listing = await (await mond.get("/1/list/collectors")).json()
    assert listing == [["cpu-avg-load", "default", 0], ["diskstats", "storage", 0]]
    reports = await (await mond.get("/1/report/all")).json()
    assert [r["name"] for r in reports] == ["cpu-avg-load", "diskstats"]
    _check_report(reports[0], "cpu-avg-load", None)
    _check_report(reports[1], "diskstats", "storage")
    assert set(reports[0]["data"]) == {"cpu_number", "cpus", "cpu_total"}
    assert reports[1]["data"] == dc.parse_diskstats(DISKSTATS)
    one = await mond.get("/1/report/storage/diskstats")
    assert one.status == 200
    _check_report(await one.json(), "diskstats", "storage")
    cpu = await (await mond.get("/1/report/default/cpu-avg-load")).json()
    _check_report(cpu, "cpu-avg-load", None)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("/2", NOT_FOUND),
        ("/1/list", NOT_FOUND),
        ("/1/list/other", NOT_FOUND),
        ("/nothing", NOT_FOUND),
        ("/1/report", NO_REPORT),
        ("/1/report/storage/cpu-avg-load", NO_REPORT),  # not its category
        ("/1/report/nosuch/diskstats", NO_REPORT),
        ("/1/report/storage/drbd", NO_REPORT),
        ("/1/report/all/more", NO_REPORT),
    ],
)
async def test_bad_paths_get_ganetis_404(mond: TestClient[Any, Any], path: str, text: str) -> None:
    answer = await mond.get(path)
    assert (answer.status, (await answer.text()).strip()) == (404, text)


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "HEAD"])
async def test_only_get_is_answered(mond: TestClient[Any, Any], method: str) -> None:
    for path in ("/", "/1/report/all", "/metrics"):
        answer = await mond.request(method, path)
        assert answer.status == 405
        assert answer.headers["Allow"] == "GET"


async def test_metrics_on_a_node_that_is_not_the_master(
    mond: TestClient[Any, Any], tmp_path: Path
) -> None:
    answer = await mond.get("/metrics")
    assert answer.status == 404
    assert "Not the master node" in await answer.text()
    paths = Paths(tmp_path / "root")
    paths.ssconf_file("master_node").parent.mkdir(parents=True, exist_ok=True)
    paths.ssconf_file("master_node").write_text("node1.example.com\n")
    paths.ssconf_file("node_primary_ips").write_text(
        "node1.example.com 127.0.0.9\nnode2.example.com 127.0.0.1\n"
    )
    answer = await mond.get("/metrics")
    assert answer.status == 404
    assert "served on the master node, node1.example.com only" in await answer.text()
    # Named the master by its ssconf files, without a masterd: 503, saying why.
    paths.ssconf_file("master_node").write_text("node2.example.com\n")
    answer = await mond.get("/metrics")
    assert answer.status == 503
    assert "Cannot get the master's metrics" in await answer.text()


def test_noded_takes_a_mond_port_and_zero_turns_it_off() -> None:
    assert noded.parse_args(["-b", "127.0.0.1", "--mond-port", "1900"]).mond_port == 1900
    assert noded._mond_port(0) is None
    assert noded._mond_port(1900) == 1900
    with pytest.raises(SystemExit):
        noded.parse_args(["-b", "127.0.0.1", "--mond-port", "70000"])
