"""Ganeti 3.0.2's own ssconf reader (``ssconf.SimpleStore``) on the files a
Corral cluster writes: every key it knows is there, and its getters parse
each to what the cluster holds.  The exact bytes: tests/unit/test_ssconf.py."""

from __future__ import annotations

import json
from typing import Any

from tests.conformance.ganeti import run_ganeti_python
from tests.helpers.cluster import TestCluster
from tests.helpers.instances import add, ok
from tests.helpers.osdef import make_os

READ = r"""
import json, os
from ganeti import ssconf
ss = ssconf.SimpleStore()
print(json.dumps({
    "missing": sorted(k for k in constants.VALID_SS_KEYS
                      if not os.path.exists(ss.KeyToFilename(k))),
    "all": ss.ReadAll(),
    "vm_capable": ss.GetNodesVmCapable(),
    "ip_family": ss.GetPrimaryIPFamily(),
    "netmask": ss.GetMasterNetmask(),
    "ssh_ports": ss.GetSshPortMap(),
    "hvparams": ss.GetHvparams(),
    "node_health": ss.GetMaintainNodeHealth(),
    "candidates": ss.GetMasterCandidates(),
    "candidate_ips": ss.GetMasterCandidatesIPList(),
    "candidate_certs": ss.GetMasterCandidatesCertMap(),
    "networks": ss.GetNetworkList(),
    "groups": ss.GetNodegroupList(),
    "user_shutdown": ss.GetEnabledUserShutdown(),
}))
"""


def read(cl: TestCluster) -> dict[str, Any]:
    result = run_ganeti_python(cl.paths.root, READ)
    assert result.rc == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def test_ganeti_reads_every_key(gcluster: TestCluster) -> None:
    make_os(gcluster.paths, "plain", variants=None)
    for name in ("web10.example.com", "web9.example.com"):
        ok(add(gcluster, name, "-t", "diskless", "-o", "plain", "--no-start"))
    with gcluster.client() as client:
        rows = client.query("node", ["name", "pip", "group.uuid"], None)["data"]
    [[node, ip, group]] = [[cell[1] for cell in row] for row in rows]
    got = read(gcluster)
    assert got["missing"] == []
    assert got["all"]["instance_list"] == "web9.example.com\nweb10.example.com"
    assert got["vm_capable"] == {node: True}
    assert (got["ip_family"], got["netmask"]) == (2, "32")
    assert got["ssh_ports"] == {node: 22}
    assert got["hvparams"]["fake"] == {"migration_mode": "live"}
    assert got["hvparams"]["kvm"] == {}
    assert got["node_health"] is False and got["user_shutdown"] is False
    assert (got["candidates"], got["candidate_ips"]) == ([node], [ip])
    assert got["candidate_certs"] == {} and got["networks"] == []
    assert got["groups"] == [f"{group} default"]
