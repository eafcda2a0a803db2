"""Ganeti 3.0.2's own RAPI client (``ganeti.rapi.client``) against corral-rapi.

Debian's package runs, unmodified, with ``/usr/bin/python3``: over real HTTPS
(the cluster's ``rapi.pem`` as the CA file), with a write user, a read-only
user, no credentials and a wrong password.  Each group of calls is one Python
script printing a JSON object of the answers (``{"ok": value}`` or
``{"code": status, "error": text}``; a job ``{"id", "result" | "failed",
"log", "completed"}``, followed with Ganeti's ``client_utils.PollJob`` and then
``WaitForJobCompletion``).  The pytest side asserts on them; the answers'
shapes are compared with the field lists of Ganeti's ``rapi/rlib2.py``, which
each script prints too.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.ganeti import ganeti_library
from tests.helpers.cluster import RAPI_PORT, TestCluster, running_cluster
from tests.helpers.jobs import delay_gate_path, release_gate
from tests.helpers.osdef import make_os

OS_NAME = "debootstrap+default"
WRITER = ("admin", "admin-pw")
READER = ("viewer", "viewer-pw")
PRIVATE = "private-" + secrets.token_hex(8)
SECRET = "secret-" + secrets.token_hex(8)

# Every script starts with this: clients, call recording, job following.
_PRELUDE = r"""
import json, socket, threading
from ganeti import cli, objects
from ganeti.rapi import client as rc, client_utils, rlib2

A = json.loads(ARGS)


def connect(user=None, password=None):
    return rc.GanetiRapiClient(
        A["host"], port=A["port"], username=user, password=password,
        curl_config_fn=rc.GenericCurlConfig(cafile=A["ca"]))


W = connect(*A["writer"])
R = connect(*A["reader"])
N = connect()
B = connect(A["writer"][0], "wrong-password")
OUT = {"rlib2": {
    "I_FIELDS": rlib2.I_FIELDS, "N_FIELDS": rlib2.N_FIELDS, "G_FIELDS": rlib2.G_FIELDS,
    "J_FIELDS": rlib2.J_FIELDS,
    "J_FIELDS_BULK": rlib2.J_FIELDS_BULK, "FILTER_RULE_FIELDS": rlib2.FILTER_RULE_FIELDS,
    "FEATURES": sorted(rlib2.ALL_FEATURES)}}


def call(key, fn, *args, **kwargs):
    try:
        OUT[key] = {"ok": fn(*args, **kwargs)}
    except rc.GanetiApiError as err:
        OUT[key] = {"code": err.code, "error": str(err)}
    return OUT[key].get("ok")


class Log(cli.JobPollReportCbBase):
    def __init__(self):
        cli.JobPollReportCbBase.__init__(self)
        self.messages = []

    def ReportLogMessage(self, job_id, serial, timestamp, log_type, log_msg):
        self.messages.append([log_type, log_msg])

    def ReportNotChanged(self, job_id, status):
        pass


def finish(key, job_id):
    # Ganeti's own job following (WaitForJobChange), then its completion check.
    log = Log()
    try:
        done = {"id": job_id, "result": client_utils.PollJob(W, job_id, log)}
    except Exception as err:  # OpExecError, JobLost: reported, not raised
        done = {"id": job_id, "failed": "%s: %s" % (type(err).__name__, err)}
    done["log"] = log.messages
    done["completed"] = W.WaitForJobCompletion(job_id)
    OUT[key] = done
    return done


def job(key, fn, *args, **kwargs):
    job_id = call(key, fn, *args, **kwargs)
    if job_id is not None:
        finish(key, job_id)
    return job_id
"""


def ganeti_rapi(cl: TestCluster, code: str, **extra: Any) -> dict[str, Any]:
    """Run ``code`` (after the prelude) in Ganeti's Python; its ``OUT``."""
    args = {
        "host": cl.node_ip,
        "port": RAPI_PORT,
        "ca": str(cl.rapi_ca),
        "writer": WRITER,
        "reader": READER,
        "node": cl.node_name,
        **extra,
    }
    script = f"ARGS = {json.dumps(args)!r}\n{_PRELUDE}\n{code}\nprint(json.dumps(OUT))\n"
    result = ganeti_library(script)
    assert result.rc == 0, result.stderr
    answers: dict[str, Any] = json.loads(result.stdout)
    return answers


def ok(answers: dict[str, Any], key: str) -> Any:
    """The answer of a call that must have succeeded."""
    assert "ok" in answers[key], (key, answers[key])
    return answers[key]["ok"]


def done(answers: dict[str, Any], key: str) -> Any:
    """The opcode results of a job that must have succeeded."""
    answer = answers[key]
    assert "result" in answer, (key, answer)
    # Ganeti 3.0.2's RAPI answers job ids as JSON numbers (luxid's are integers).
    assert type(answer["id"]) is int, answer
    assert answer["completed"] is True, answer
    return answer["result"]


def refused(answers: dict[str, Any], key: str) -> int:
    """The HTTP status of a call that must have failed as an HTTP error."""
    assert "code" in answers[key], (key, answers[key])
    return int(answers[key]["code"])


@pytest.fixture(scope="module")
def rcluster(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """A cluster with an OS definition, a write user and a read-only user."""
    with running_cluster(tmp_path_factory.mktemp("rapi-client")) as cl:
        make_os(
            cl.paths,
            "debootstrap",
            parameters={"dhcp": "use DHCP", "api_key": "a key", "root_password": "a password"},
        )
        cl.add_rapi_user(WRITER[0], WRITER[1], "write")
        cl.add_rapi_user(READER[0], READER[1], "read")
        yield cl


# --- The cluster, its queries, nodes, groups, networks, filters and jobs ---

_CLUSTER = r"""
call("version", N.GetVersion)
call("features", N.GetFeatures)
call("info", N.GetInfo)
call("os", N.GetOperatingSystems)
call("tags/before", N.GetClusterTags)
job("tags/add", W.AddClusterTags, ["web", "prod"])
call("tags/added", N.GetClusterTags)
job("tags/delete", W.DeleteClusterTags, ["web"])
call("tags/after", N.GetClusterTags)
job("modify", W.ModifyCluster, candidate_pool_size=7)
call("info/after", N.GetInfo)

for what, key in A["queries"]:
    answer = call("query/" + what, R.Query, what, [key])
    if answer is not None:  # decoded with Ganeti's objects
        OUT["decoded/" + what] = [f.name for f in objects.QueryResponse.FromDict(answer).fields]
    fields = call("fields/" + what, N.QueryFields, what)
    if fields is not None:
        OUT["decoded/fields/" + what] = sorted(
            f.name for f in objects.QueryFieldsResponse.FromDict(fields).fields)
call("query/filtered", R.Query, "node", ["name", "role"], ["=", "name", A["node"]])
call("fields/named", N.QueryFields, "instance", ["name", "status"])

call("nodes", N.GetNodes)
call("nodes/bulk", N.GetNodes, bulk=True)
call("node", N.GetNode, A["node"])
call("node/role", N.GetNodeRole, A["node"])
job("node/tags/add", W.AddNodeTags, A["node"], ["rack1", "ssd"])
call("node/tags", N.GetNodeTags, A["node"])
job("node/tags/delete", W.DeleteNodeTags, A["node"], ["ssd"])
call("node/tags/after", N.GetNodeTags, A["node"])

call("groups", N.GetGroups)
call("groups/bulk", N.GetGroups, bulk=True)
call("group", N.GetGroup, "default")
job("group/tags/add", W.AddGroupTags, "default", ["blue"])
call("group/tags", N.GetGroupTags, "default")
job("group/tags/delete", W.DeleteGroupTags, "default", ["blue"])
call("group/tags/after", N.GetGroupTags, "default")

call("networks", N.GetNetworks)
call("networks/bulk", N.GetNetworks, bulk=True)

uuid = call("filter/add", W.AddFilter, 10, [], "CONTINUE")
call("filters", N.GetFilters)
call("filters/bulk", N.GetFilters, bulk=True)
call("filter", N.GetFilter, uuid)
predicates = [["jobid", [">", "id", "watermark"]]]
call("filter/replace", W.ReplaceFilter, uuid, 20, predicates, "CONTINUE")
call("filter/replaced", N.GetFilter, uuid)
call("filter/delete", W.DeleteFilter, uuid)
call("filters/after", N.GetFilters)

call("jobs", N.GetJobs)
call("jobs/bulk", N.GetJobs, bulk=True)
call("job", N.GetJobStatus, OUT["tags/add"]["id"])
call("job/missing", N.GetJobStatus, 999999)
"""

QUERIES = [
    ["instance", "name"],
    ["node", "name"],
    ["group", "name"],
    ["job", "id"],
    ["os", "name"],
    ["filter", "uuid"],
    ["network", "name"],
    ["lock", "name"],
    ["export", "node"],
]


@pytest.fixture(scope="module")
def cluster_answers(rcluster: TestCluster) -> dict[str, Any]:
    return ganeti_rapi(rcluster, _CLUSTER, queries=QUERIES)


def test_cluster_resources(rcluster: TestCluster, cluster_answers: dict[str, Any]) -> None:
    a = cluster_answers
    assert ok(a, "version") == 2
    assert sorted(ok(a, "features")) == a["rlib2"]["FEATURES"]  # a set in Ganeti
    assert ok(a, "os") == [OS_NAME]
    assert ok(a, "tags/before") == []
    done(a, "tags/add")
    assert sorted(ok(a, "tags/added")) == ["prod", "web"]
    done(a, "tags/delete")
    assert ok(a, "tags/after") == ["prod"]
    done(a, "modify")
    assert ok(a, "info")["candidate_pool_size"] != 7
    assert ok(a, "info/after")["candidate_pool_size"] == 7


def test_modify_cluster_result_as_ganeti(cluster_answers: dict[str, Any]) -> None:
    assert done(cluster_answers, "modify") == [None]


def test_info_is_luxi_cluster_info_with_aliases(
    rcluster: TestCluster, cluster_answers: dict[str, Any]
) -> None:
    info = ok(cluster_answers, "info/after")
    with rcluster.client() as client:
        luxi_info = client.call("QueryClusterInfo")
    aliases = {"volume_group_name": "vg_name", "drbd_usermode_helper": "drbd_helper"}
    expected = set(luxi_info) | {alias for key, alias in aliases.items() if key in luxi_info}
    assert set(info) == expected
    assert info["name"] == rcluster.cluster_name
    assert info["master"] == rcluster.node_name


@pytest.mark.parametrize("what", [q[0] for q in QUERIES])
def test_query_and_fields_decode_in_ganeti(cluster_answers: dict[str, Any], what: str) -> None:
    key = dict(QUERIES)[what]
    answer = ok(cluster_answers, "query/" + what)
    assert set(answer) == {"fields", "data"}
    assert cluster_answers["decoded/" + what] == [key]
    assert key in cluster_answers["decoded/fields/" + what]


def test_query_with_filter_and_named_fields(
    rcluster: TestCluster, cluster_answers: dict[str, Any]
) -> None:
    answer = ok(cluster_answers, "query/filtered")
    assert answer["data"] == [[[0, rcluster.node_name], [0, "M"]]]
    fields = ok(cluster_answers, "fields/named")["fields"]
    assert [f["name"] for f in fields] == ["name", "status"]


def test_nodes_and_groups(rcluster: TestCluster, cluster_answers: dict[str, Any]) -> None:
    a, fields = cluster_answers, cluster_answers["rlib2"]
    node = rcluster.node_name
    assert ok(a, "nodes") == [node]  # the client keeps the ids of [{id, uri}]
    (bulk,) = ok(a, "nodes/bulk")
    assert set(bulk) == set(fields["N_FIELDS"])
    one = ok(a, "node")
    assert set(one) == set(fields["N_FIELDS"]) | {"secondary_ip"}  # Ganeti's GET_ALIASES
    assert one["secondary_ip"] == one["sip"] and one["name"] == node
    assert ok(a, "node/role") == "master"
    done(a, "node/tags/add")
    assert sorted(ok(a, "node/tags")) == ["rack1", "ssd"]
    done(a, "node/tags/delete")
    assert ok(a, "node/tags/after") == ["rack1"]

    assert ok(a, "groups") == ["default"]
    (group,) = ok(a, "groups/bulk")
    assert set(group) == set(fields["G_FIELDS"])
    assert set(ok(a, "group")) == set(fields["G_FIELDS"])
    assert ok(a, "group")["node_list"] == [node]
    done(a, "group/tags/add")
    assert ok(a, "group/tags") == ["blue"]
    done(a, "group/tags/delete")
    assert ok(a, "group/tags/after") == []

    assert ok(a, "networks") == []
    assert ok(a, "networks/bulk") == []


def test_filter_rules(cluster_answers: dict[str, Any]) -> None:
    a = cluster_answers
    uuid = ok(a, "filter/add")
    assert ok(a, "filters") == [uuid]
    (rule,) = ok(a, "filters/bulk")
    assert set(rule) == set(a["rlib2"]["FILTER_RULE_FIELDS"])
    assert ok(a, "filter") == rule
    assert (rule["uuid"], rule["priority"], rule["predicates"], rule["action"]) == (
        uuid,
        10,
        [],
        "CONTINUE",
    )
    assert ok(a, "filter/replace") == uuid
    replaced = ok(a, "filter/replaced")
    assert (replaced["priority"], replaced["predicates"]) == (
        20,
        [["jobid", [">", "id", "watermark"]]],
    )
    ok(a, "filter/delete")
    assert ok(a, "filters/after") == []


def test_jobs_list_and_status(cluster_answers: dict[str, Any]) -> None:
    a, fields = cluster_answers, cluster_answers["rlib2"]
    job_id = a["tags/add"]["id"]
    ids = ok(a, "jobs")
    assert ids == sorted(ids) and job_id in ids and 1 in ids
    bulk = ok(a, "jobs/bulk")
    assert [j["id"] for j in bulk] == ids
    for entry in bulk:
        assert set(entry) == set(fields["J_FIELDS_BULK"])
    status = ok(a, "job")
    assert set(status) == set(fields["J_FIELDS"])
    assert status["id"] == job_id and status["status"] == "success"
    assert [op["OP_ID"] for op in status["ops"]] == ["OP_TAGS_SET"]
    # Ganeti's luxid answers an unknown job's row as nulls, and rlib2 passes it on.
    assert ok(a, "job/missing") == {
        name: 999999 if name == "id" else None for name in fields["J_FIELDS"]
    }


# --- Authentication: no credentials, a wrong password, a read-only user ---

_AUTH = r"""
call("anon/info", N.GetInfo)
call("anon/query", N.Query, "node", ["name"])
call("anon/wait", N.WaitForJobChange, 1, ["status"], None, None)
call("anon/tags", N.AddClusterTags, ["anon"])
call("wrong/info", B.GetInfo)
call("read/query", R.Query, "node", ["name"])
call("read/tags", R.AddClusterTags, ["reader"])
call("read/tags/delete", R.DeleteClusterTags, ["prod"])
call("read/modify", R.ModifyCluster, candidate_pool_size=3)
call("read/wait", R.WaitForJobChange, 1, ["status"], None, None)
call("read/cancel", R.CancelJob, 1)
call("read/filter", R.AddFilter, 10, [], "CONTINUE")
call("read/create", R.CreateInstance, "create", "x.example.com", "diskless", [], [],
     os=A["os"], ip_check=False, name_check=False)
call("read/startup", R.StartupInstance, "x.example.com")
call("tags/after", N.GetClusterTags)
call("jobs/after", N.GetJobs)
"""


def test_authentication_and_access(rcluster: TestCluster) -> None:
    with rcluster.client() as client:
        jobs_before = client.query_jobs(None, ["id"])
        tags_before = client.call("QueryTags", "cluster", "")
    a = ganeti_rapi(rcluster, _AUTH, os=OS_NAME)
    assert ok(a, "anon/info")["name"] == rcluster.cluster_name  # GET is open
    # Ganeti needs credentials for queries (read) and for waiting on a job (write).
    assert refused(a, "anon/query") == 401
    assert refused(a, "anon/wait") == 401
    assert refused(a, "anon/tags") == 401
    # Wrong credentials are refused even where none are needed.
    assert refused(a, "wrong/info") == 401
    assert ok(a, "read/query")["data"] == [[[0, rcluster.node_name]]]
    for key in (
        "read/tags",
        "read/tags/delete",
        "read/modify",
        "read/wait",
        "read/cancel",
        "read/filter",
        "read/create",
        "read/startup",
    ):
        assert refused(a, key) == 403, key
    # Nothing was submitted or changed.
    assert ok(a, "tags/after") == tags_before
    assert ok(a, "jobs/after") == [row[0] for row in jobs_before]


# --- Instances: their whole life, private and secret parameters ---

_INSTANCES = r"""
I1, I2, I3 = A["names"]
create = dict(os=A["os"], ip_check=False, name_check=False, hypervisor="fake")
job("dry-run", W.CreateInstance, "create", I1, "diskless", [], [], dry_run=True, **create)
call("after-dry-run", N.GetInstances)
job("create/diskless", W.CreateInstance, "create", I1, "diskless", [], [],
    osparams={"dhcp": "yes"}, osparams_private={"api_key": A["private"]},
    osparams_secret={"root_password": A["secret"]}, **create)
job("create/file", W.CreateInstance, "create", I2, "file", [{"size": 16}], [],
    beparams={"maxmem": 64, "minmem": 64}, **create)
call("create/status", N.GetJobStatus, OUT["create/diskless"]["id"])
call("jobs/bulk", N.GetJobs, bulk=True)

call("list", N.GetInstances)
call("list/bulk", N.GetInstances, bulk=True)
call("get", N.GetInstance, I2)
job("info", W.GetInstanceInfo, I2)
job("info/static", W.GetInstanceInfo, I2, static=True)
call("console", R.GetInstanceConsole, I2)
call("anon/console", N.GetInstanceConsole, I2)
job("reboot", W.RebootInstance, I2, reboot_type="hard")
job("reinstall", W.ReinstallInstance, I2, os=A["os"])
call("reinstall/status", N.GetJobStatus, OUT["reinstall"]["id"])
job("shutdown", W.ShutdownInstance, I2, timeout=0)
call("console/stopped", R.GetInstanceConsole, I2)
job("rename", W.RenameInstance, I2, I3, ip_check=False, name_check=False)
job("modify", W.ModifyInstance, I3, beparams={"maxmem": 96, "minmem": 96})
# A disk added, detached, attached back first (by name), then removed.
job("disks/add", W.ModifyInstance, I3, disks=[["add", -1, {"size": 8, "name": "spare"}]])
job("disks/detach", W.ModifyInstance, I3, disks=[["detach", "spare", {}]])
job("disks/attach", W.ModifyInstance, I3, disks=[["attach", 0, {"name": "spare"}]])
job("disks/attach-again", W.ModifyInstance, I3, disks=[["attach", -1, {"name": "spare"}]])
job("disks/remove", W.ModifyInstance, I3, disks=[["remove", 0, {}]])
job("grow", W.GrowInstanceDisk, I3, 0, 8)
job("startup", W.StartupInstance, I3)
job("tags/add", W.AddInstanceTags, I3, ["db", "eu"])
call("tags", N.GetInstanceTags, I3)
job("tags/delete", W.DeleteInstanceTags, I3, ["eu"])
call("tags/after", N.GetInstanceTags, I3)
call("get/after", N.GetInstance, I3)
call("get/renamed", N.GetInstance, I2)

# Moves of a file instance: the jobs run, and are refused (a file disk stays put).
node, inst = A["node"], I3
job("moves/redist-conf", W.RedistributeConfig)
job("moves/migrate", W.MigrateInstance, inst)
job("moves/failover", W.FailoverInstance, inst)
job("moves/replace-disks", W.ReplaceInstanceDisks, inst)  # Ganeti's legacy query arguments
job("moves/migrate-node", W.MigrateNode, node)
# Exports: prepare (nothing to do for a local one); the export of the running
# file instance reaches the LU, which refuses it as Ganeti's does (no snapshots,
# and the client cannot ask for --long-sleep).
job("export/prepare", W.PrepareExport, inst, "local")
job("export/local", W.ExportInstance, inst, "local", node, shutdown=True)

# Resources whose operation Corral does not have yet: 501, whoever asks.
missing = [
    ("InstancesMultiAlloc", W.InstancesMultiAlloc,
     [[W.InstanceAllocation("create", "m.example.com", "diskless", [], [], os=A["os"])]], {}),
]
for name, fn, args, kwargs in missing:
    call("missing/" + name, fn, *args, **kwargs)
# The disks of a running instance: activated; not deactivated nor recreated.
job("disks/activate", W.ActivateInstanceDisks, inst)
job("disks/deactivate", W.DeactivateInstanceDisks, inst)
job("disks/recreate", W.RecreateInstanceDisks, inst)
call("missing/read-only", R.MigrateInstance, inst)

job("delete/diskless", W.DeleteInstance, I1)
job("delete/renamed", W.DeleteInstance, I3)
call("list/after", N.GetInstances)
"""

NAMES = ["i1.example.com", "i2.example.com", "i3.example.com"]


@pytest.fixture(scope="module")
def instance_answers(rcluster: TestCluster) -> dict[str, Any]:
    return ganeti_rapi(
        rcluster, _INSTANCES, names=NAMES, os=OS_NAME, private=PRIVATE, secret=SECRET
    )


def test_create_instances(instance_answers: dict[str, Any]) -> None:
    a = instance_answers
    done(a, "dry-run")
    assert ok(a, "after-dry-run") == []
    assert done(a, "create/diskless") == [["node1.example.com"]]
    assert done(a, "create/file") == [["node1.example.com"]]
    assert ["message", "* running the instance OS create scripts..."] in a["create/file"]["log"]


def test_private_and_secret_parameters(
    rcluster: TestCluster, instance_answers: dict[str, Any]
) -> None:
    a = instance_answers
    status = ok(a, "create/status")
    (op,) = status["ops"]
    assert op["OP_ID"] == "OP_INSTANCE_CREATE"
    assert op["osparams"] == {"dhcp": "yes"}
    assert op["osparams_private"] == {"api_key": "<redacted>"}
    assert op["osparams_secret"] == {"root_password": "<redacted>"}
    (listed,) = [j for j in ok(a, "jobs/bulk") if j["id"] == status["id"]]
    assert listed["ops"] == status["ops"]
    assert PRIVATE not in json.dumps(a) and SECRET not in json.dumps(a)
    # The secret is stored nowhere: not in the queue, the config, the logs.
    root = rcluster.paths.root
    searched = private_kept = 0
    for top in (root / "var" / "lib" / "ganeti", root / "var" / "log" / "ganeti"):
        for path in top.rglob("*"):
            if path.is_file() and not path.is_symlink():
                searched += 1
                data = path.read_bytes()
                assert SECRET.encode() not in data, path
                private_kept += PRIVATE.encode() in data
    assert searched > 10
    assert private_kept  # the search does read where parameter values are kept


def test_instance_shapes(instance_answers: dict[str, Any]) -> None:
    a, fields = instance_answers, instance_answers["rlib2"]["I_FIELDS"]
    assert ok(a, "list") == NAMES[:2]
    bulk = ok(a, "list/bulk")
    assert [i["name"] for i in bulk] == NAMES[:2]
    for inst in bulk:
        assert set(inst) == set(fields)
        assert inst["beparams"]["memory"] == inst["beparams"]["maxmem"]  # Ganeti's alias
    one = ok(a, "get")
    assert set(one) == set(fields)
    assert (one["disk_template"], one["disk.sizes"], one["status"]) == ("file", [16], "running")
    assert one["custom_beparams"] == {"maxmem": 64, "minmem": 64}
    assert one["beparams"]["memory"] == 64


def test_instance_info_and_console(instance_answers: dict[str, Any]) -> None:
    a, name = instance_answers, NAMES[1]
    (live,) = done(a, "info")
    assert list(live) == [name]
    assert live[name]["run_state"] == "up" and live[name]["disk_template"] == "file"
    (static,) = done(a, "info/static")
    assert static[name]["run_state"] is None
    # The fake hypervisor has no console: Ganeti's message console, read access enough.
    assert ok(a, "console") == {
        "instance": name,
        "kind": "msg",
        "message": "Console not available for fake hypervisor",
    }
    assert refused(a, "anon/console") == 401
    assert refused(a, "console/stopped") == 503


def test_instance_operations(instance_answers: dict[str, Any]) -> None:
    a = instance_answers
    assert done(a, "reboot") == [None]
    assert done(a, "reinstall") == [None, None, None]
    ops = ok(a, "reinstall/status")["ops"]
    assert [op["OP_ID"] for op in ops] == [
        "OP_INSTANCE_SHUTDOWN",
        "OP_INSTANCE_REINSTALL",
        "OP_INSTANCE_STARTUP",
    ]
    assert ops[1]["os_type"] == OS_NAME
    for key in ("shutdown", "rename", "modify", "grow", "startup", "tags/add", "tags/delete"):
        done(a, key)
    assert sorted(ok(a, "tags")) == ["db", "eu"]
    assert ok(a, "tags/after") == ["db"]
    after = ok(a, "get/after")
    assert after["name"] == NAMES[2]
    assert (after["status"], after["disk.sizes"], after["tags"]) == ("running", [24], ["db"])
    assert after["beparams"]["maxmem"] == after["beparams"]["memory"] == 96
    assert refused(a, "get/renamed") == 404
    done(a, "delete/diskless")
    done(a, "delete/renamed")
    assert ok(a, "list/after") == []


def test_moves_run_as_jobs(instance_answers: dict[str, Any]) -> None:
    a = instance_answers
    done(a, "moves/redist-conf")
    for key in ("moves/migrate", "moves/failover"):
        # Submitted and followed through Ganeti's client; refused as Ganeti would.
        assert a[key]["completed"] is False, a[key]
        assert "does not allow" in a[key]["failed"], a[key]
    replaced = a["moves/replace-disks"]
    assert replaced["completed"] is False, replaced
    assert "Can only run replace disks for mirrored instances" in replaced["failed"], replaced
    # The node migration submits one job per instance (which fail the same way).
    assert "jobs" in done(a, "moves/migrate-node")[0], a["moves/migrate-node"]


def test_local_export(instance_answers: dict[str, Any]) -> None:
    a = instance_answers
    assert done(a, "export/prepare") == [None]
    failed = a["export/local"]["failed"]
    assert failed.startswith("OpPrereqError: ('Not all disks could be snapshotted"), failed
    assert "--long-sleep option; aborting', 'wrong_state')" in failed


def test_missing_operations_are_501(instance_answers: dict[str, Any]) -> None:
    a = instance_answers
    missing = sorted(key for key in a if key.startswith("missing/") and key != "missing/read-only")
    assert len(missing) == 1
    for key in missing:
        # Once Corral has the operation, the call belongs in a test of its own.
        assert refused(a, key) == 501, (key, a[key])
        assert "is not implemented by Corral yet" in a[key]["error"], a[key]
    # Access is checked first, as for any other write.
    assert refused(a, "missing/read-only") == 403


def test_instance_disks(instance_answers: dict[str, Any]) -> None:
    a = instance_answers
    assert done(a, "disks/detach") == [[["disk/1", "detach"]]]
    assert done(a, "disks/attach") == [[["disk/0", "attach:size=8,mode=rw"]]]
    assert (
        "Disk spare already attached to instance i3.example.com"
        in a["disks/attach-again"]["failed"]
    )
    assert done(a, "disks/remove") == [[["disk/0", "remove"]]]
    [[[node, iv_name, path]]] = done(a, "disks/activate")
    assert (node, iv_name) == ("node1.example.com", "disk/0") and path.startswith("/srv/ganeti/")
    for key, what in (("deactivate", "shutdown disks"), ("recreate", "recreate disks")):
        answer = a[f"disks/{key}"]
        assert f"is marked to be up, cannot {what}" in answer["failed"], answer


# --- Jobs: waiting, cancelling, long polls ---

_JOBS = r"""
gate = A["gate"]  # a number, as RAPI's job ids
waiting = {"depends": [[A["gate"], ["success"]]]}
held = call("held", W.ModifyCluster, **waiting)
other = call("other", W.ModifyCluster, **waiting)
call("held/status", N.GetJobStatus, held)

# The job behind the gate does not change for the server's whole wait: null.
unchanged = {}
def wait_unchanged():
    unchanged["answer"] = W.WaitForJobChange(other, ["status"], ["waiting"], 0)
idle = threading.Thread(target=wait_unchanged)
idle.start()

first = call("gate/first", W.WaitForJobChange, gate, ["status"], None, None)
serial = max(entry[0] for entry in first["log_entries"])

call("cancel", W.CancelJob, held)
call("held/canceled", N.GetJobStatus, held)
finish("held", held)
idle.join()
OUT["unchanged"] = unchanged

# This one is answered when the gate is released (whenever it starts waiting:
# started after the idle wait ended, its own wait cannot end before the release).
changed = {}
def wait_changed():
    changed["answer"] = W.WaitForJobChange(gate, ["status"], ["running"], serial)
follower = threading.Thread(target=wait_changed)
follower.start()

sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(A["gate_path"])
sock.close()
follower.join()
OUT["changed"] = changed
finish("gate", gate)
finish("other", other)
call("cancel/finished", W.CancelJob, gate)
call("wait/missing", W.WaitForJobChange, 999999, ["status"], None, None)
# Ganeti's ht.TJobId takes digit strings too.
job("depends/string", W.ModifyCluster, depends=[["1", ["success"]]])
"""


@pytest.fixture(scope="module")
def job_answers(rcluster: TestCluster) -> dict[str, Any]:
    """The jobs script, run against a job that waits on a gate (released by it)."""
    gate = {"OP_ID": "OP_TEST_DELAY", "duration": 300, "interruptible": True}
    with rcluster.client() as client:
        gate_id = client.submit_job([gate])
        gate_path = delay_gate_path(client, gate_id)
    try:
        a = ganeti_rapi(rcluster, _JOBS, gate=gate_id, gate_path=gate_path)
    finally:
        with contextlib.suppress(OSError):  # released by the script, as it should be
            release_gate(gate_path)
    return a


@pytest.mark.slow  # one wait lasts the server's whole 10 s
def test_job_waiting_and_cancel(job_answers: dict[str, Any]) -> None:
    a = job_answers
    assert ok(a, "held/status")["status"] == "waiting"
    first = ok(a, "gate/first")
    assert first["job_info"] == ["running"]
    assert [entry[2] for entry in first["log_entries"]] == ["delay-test"]
    assert a["unchanged"] == {"answer": None}
    # Woken by the release (not by the server's time-out, which answers null):
    # the delay's log message, with the job still running or already done.
    changed = a["changed"]["answer"]
    assert changed["job_info"] in (["running"], ["success"])
    serial = max(entry[0] for entry in first["log_entries"])
    (entry, *_) = changed["log_entries"]
    assert entry[0] == serial + 1 and entry[2] == "message", changed
    assert entry[3].startswith("Received connection"), changed
    cancel = ok(a, "cancel")
    assert cancel[0] is True
    assert ok(a, "held/canceled")["status"] == "canceled"
    assert "failed" in a["held"] and a["held"]["completed"] is False
    assert done(a, "gate") == [None]
    done(a, "other")
    assert ok(a, "cancel/finished")[0] is False
    # Corral's masterd refuses to wait on an unknown job (Ganeti's rlib2 would
    # answer 404 to an empty result), as tests/integration/test_rapi_http.py has it.
    assert refused(a, "wait/missing") == 500
    assert "999999" in a["wait/missing"]["error"]


def test_depends_on_a_job_id_string(job_answers: dict[str, Any]) -> None:
    assert done(job_answers, "depends/string") is not None


# --- Instance communication ---

_COMMUNICATION = r"""
I = A["name"]
create = dict(os=A["os"], ip_check=False, name_check=False, hypervisor="fake")
job("set", W.ModifyCluster, instance_communication_network="rapinet")
[[submitted, ensure]] = OUT["set"]["result"][0]["jobs"]
finish("ensure", ensure)
call("info", N.GetInfo)
call("bad-network", W.ModifyCluster, instance_communication_network=5)
job("create", W.CreateInstance, "create", I, "diskless", [], [], instance_communication=True,
    **create)
call("get", N.GetInstance, I)
call("bad-flag", W.ModifyInstance, I, instance_communication="maybe")
job("off", W.ModifyInstance, I, instance_communication=False)
call("get/off", N.GetInstance, I)
job("delete", W.DeleteInstance, I)
job("unset", W.ModifyCluster, instance_communication_network="")
job("disconnect", W.DisconnectNetwork, "rapinet", "default")
job("remove", W.DeleteNetwork, "rapinet")
"""


def test_instance_communication(rcluster: TestCluster) -> None:
    """The cluster's network set through ModifyCluster (its follow-up job
    creates and connects it), the NIC through CreateInstance and
    ModifyInstance; wrong types are refused with 400 and submit nothing."""
    name = "comm1.example.com"
    a = ganeti_rapi(rcluster, _COMMUNICATION, name=name, os=OS_NAME)
    [[submitted, _]] = done(a, "set")[0]["jobs"]
    assert submitted is True
    assert done(a, "ensure") == [None, None]  # the network added, then connected
    assert ok(a, "info")["instance_communication_network"] == "rapinet"
    assert refused(a, "bad-network") == 400
    done(a, "create")
    got = ok(a, "get")
    # Created with no NIC of its own: the communication NIC is its only one.
    assert got["nic.names"] == [f"ganeti:communication:{name}"]
    assert (got["nic.modes"], got["nic.links"]) == (["routed"], ["communication_rt"])
    assert got["nic.ips"][0].startswith("169.254.")
    assert refused(a, "bad-flag") == 400
    done(a, "off")
    assert ok(a, "get/off")["nic.names"] == []
    for key in ("delete", "unset", "disconnect", "remove"):
        done(a, key)
