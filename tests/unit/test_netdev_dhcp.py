"""The dnsmasq of a communication tap (corral.node.netdev.dhcp): what it is
told, a clear error without dnsmasq, and a pid file that names another
process kills nothing.  Serving a real guest: tests/integration/test_metad_cluster_kvm.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from corral import errors
from corral.node.netdev import dhcp


def test_dnsmasq_serves_one_address_to_one_mac_on_one_tap(tmp_path: Path) -> None:
    argv = dhcp.dnsmasq_argv("dnsmasq", "ct0", "52:54:00:00:00:05", "169.254.0.5", tmp_path / "p")
    assert "--interface=ct0" in argv and "--bind-interfaces" in argv
    assert "--dhcp-host=52:54:00:00:00:05,169.254.0.5" in argv
    assert "--dhcp-range=169.254.0.0,static,255.255.0.0" in argv
    assert "--port=0" in argv and "--leasefile-ro" in argv


def test_without_dnsmasq_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(dhcp.DNSMASQ_ENV, str(tmp_path / "missing"))
    with pytest.raises(errors.OpExecError, match="install dnsmasq-base"):
        dhcp.start(tmp_path, "ct0", "52:54:00:00:00:05", "169.254.0.5")
    assert not dhcp.pid_file(tmp_path, "ct0").exists()


def test_stop_kills_only_the_dnsmasq_of_its_pid_file(tmp_path: Path) -> None:
    pidfile = dhcp.pid_file(tmp_path, "ct0")
    pidfile.parent.mkdir(parents=True)
    with subprocess.Popen(["sleep", "infinity"]) as stranger:
        try:
            pidfile.write_text(f"{stranger.pid}\n")  # a pid reused by another process
            dhcp.stop(tmp_path, "ct0")
            assert stranger.poll() is None and not pidfile.exists()
        finally:
            stranger.kill()
    dhcp.stop(tmp_path, "ct1")  # none: nothing to do
