"""A job queued behind a rename (or a move) never acts on what its name no longer means.

Locks are taken by name: a job that looked its instance (group, node) up
before waiting for the lock must, once it holds it, find the same object
under the same name, or fail without changing anything.  Each test holds the
first job in a pre hook (a gate), queues the second until it waits for the
lock, then lets the first one finish.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.luxi.client import Client
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.gate import Gate
from tests.helpers.instances import add, ok, query, rows
from tests.helpers.jobs import wait_final
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.waiting import wait_until

NODE1, NODE2 = "node1.example.com", "node2.example.com"


def op(op_id: str, **fields: Any) -> dict[str, Any]:
    return {"OP_ID": op_id, **fields}


def rename(old: str, new: str) -> dict[str, Any]:
    return op(
        "OP_INSTANCE_RENAME", instance_name=old, new_name=new, name_check=False, ip_check=False
    )


def waits_for(client: Client, job: int, lock: str) -> bool:
    """Whether ``job`` is queued for ``lock`` (it has looked its names up)."""
    for name, pending in client.query("lock", ["name", "pending"])["data"]:
        if name[1] == lock and any(str(job) in owners for _, owners in pending[1]):
            return True
    return False


def behind(
    cl: TestCluster, gate: Gate, first: dict[str, Any], second: dict[str, Any], lock: str
) -> tuple[list[Any], list[Any]]:
    """Run ``first`` until its gate holds it, queue ``second`` behind ``lock``,
    open the gate; both jobs' (status, result)."""
    with cl.client() as client:
        one = client.submit_job([first])
        wait_until(gate.started.exists, 30, "the first job's gated hook")
        two = client.submit_job([second])
        wait_until(lambda: waits_for(client, two, lock), 30, f"job {two} waiting for {lock}")
        gate.release()
        first_row, second_row = wait_final(client, [one, two], ("opresult",), timeout=60)
        return list(first_row), list(second_row)


def error_of(row: list[Any]) -> tuple[str, str, str]:
    """(error class, message, error code) of a failed job's row."""
    status, result = row
    assert status == "error", row
    ((cls, (message, code)),) = result
    return cls, message, code


@pytest.fixture
def one_node(tmp_path: Path) -> Iterator[tuple[TestCluster, Gate]]:
    with running_cluster(tmp_path) as cl:
        gate = Gate.make(tmp_path)
        try:
            for name in ("x1", "other"):
                ok(add(cl, name, "-t", "diskless", "--no-install", "--no-start"))
            yield cl, gate
        finally:
            gate.release()


def test_remove_queued_behind_a_rename_removes_nothing(
    one_node: tuple[TestCluster, Gate],
) -> None:
    cl, gate = one_node
    cl.hook("instance-rename", "pre", "00-gate", gate.script())
    first, second = behind(
        cl, gate, rename("x1", "a1"), op("OP_INSTANCE_REMOVE", instance_name="x1"), "instance/x1"
    )
    assert first == ["success", ["a1"]]
    assert error_of(second) == (
        "OpPrereqError",
        "Instance 'x1' not known (renamed to 'a1' after this job was submitted)",
        "unknown_entity",
    )
    assert [r[0] for r in rows(cl, ["name"])] == ["a1", "other"]


def test_second_rename_of_the_old_name_fails(one_node: tuple[TestCluster, Gate]) -> None:
    cl, gate = one_node
    cl.hook("instance-rename", "pre", "00-gate", gate.script())
    first, second = behind(cl, gate, rename("x1", "a1"), rename("x1", "b1"), "instance/x1")
    assert first == ["success", ["a1"]]
    assert error_of(second)[2] == "unknown_entity"
    assert [r[0] for r in rows(cl, ["name"])] == ["a1", "other"]


def test_modify_and_tags_behind_a_rename_lose_no_update(
    one_node: tuple[TestCluster, Gate],
) -> None:
    """The reported loss: ``modify x1`` waiting behind ``rename x1 a1`` ran on
    a1 next to a tag job on a1 and wrote over its acknowledged tag."""
    cl, gate = one_node
    cl.hook("instance-rename", "pre", "00-gate", gate.script())
    modify = op(
        "OP_INSTANCE_SET_PARAMS", instance_name="x1", beparams={"maxmem": 256, "minmem": 256}
    )
    first, second = behind(cl, gate, rename("x1", "a1"), modify, "instance/x1")
    assert first == ["success", ["a1"]]
    assert error_of(second)[2] == "unknown_entity"
    ok(cl.gnt("instance", "add-tags", "a1", "acknowledged"))
    state = query(cl, ["tags", "be/maxmem"], "a1")["a1"]
    assert state["tags"] == ["acknowledged"] and state["be/maxmem"] != 256


def test_instance_tags_behind_a_rename_fail(one_node: tuple[TestCluster, Gate]) -> None:
    cl, gate = one_node
    cl.hook("instance-rename", "pre", "00-gate", gate.script())
    tags = op("OP_TAGS_SET", kind="instance", name="x1", tags=["lost"])
    first, second = behind(cl, gate, rename("x1", "a1"), tags, "instance/x1")
    assert first == ["success", ["a1"]]
    assert error_of(second)[2] == "unknown_entity"
    assert query(cl, ["tags"], "a1")["a1"]["tags"] == []


def test_a_new_instance_under_the_old_name_is_not_the_one_named(
    one_node: tuple[TestCluster, Gate],
) -> None:
    """Removed and created again while the job waited: Ganeti's "Maybe the
    instance changed since you submitted this job"."""
    cl, gate = one_node
    cl.hook("instance-remove", "pre", "00-gate", gate.script())
    recreate = op(
        "OP_INSTANCE_CREATE",
        instance_name="x1",
        mode="create",
        disk_template="diskless",
        disks=[],
        nics=[],
        no_install=True,
        start=False,
        name_check=False,
        ip_check=False,
    )
    tags = op("OP_TAGS_SET", kind="instance", name="x1", tags=["for-the-old-one"])
    with cl.client() as client:
        removal = client.submit_job([op("OP_INSTANCE_REMOVE", instance_name="x1")])
        wait_until(gate.started.exists, 30, "the removal's gated hook")
        tag_job = client.submit_job([tags])
        wait_until(lambda: waits_for(client, tag_job, "instance/x1"), 30, "the tag job queued")
        add_job = client.submit_job([recreate])
        wait_until(lambda: waits_for(client, add_job, "instance/x1"), 30, "the add queued")
        # The add was queued after the tag job, but takes the lock first if
        # the tag job's turn comes before: make the add go first by priority.
        client.call("ChangeJobPriority", add_job, -20)
        gate.release()
        rows_ = wait_final(client, [removal, add_job, tag_job], ("opresult",), timeout=60)
    assert [r[0] for r in rows_[:2]] == ["success", "success"]
    cls, message, code = error_of(list(rows_[2]))
    assert (cls, code) == ("OpPrereqError", "resource_not_unique")
    assert "Maybe the instance changed since you submitted this job" in message
    assert query(cl, ["tags"], "x1")["x1"]["tags"] == []


def test_group_job_behind_a_group_rename_fails(tmp_path: Path) -> None:
    gate = Gate.make(tmp_path)
    with running_cluster(tmp_path) as cl:
        try:
            ok(cl.gnt("group", "add", "g1"))
            cl.hook("group-rename", "pre", "00-gate", gate.script())
            modify = op("OP_GROUP_SET_PARAMS", group_name="g1", alloc_policy="last_resort")
            with cl.client() as client:
                first = client.submit_job([op("OP_GROUP_RENAME", group_name="g1", new_name="g2")])
                wait_until(gate.started.exists, 30, "the rename's gated hook")
                second = client.submit_job([modify])
                wait_until(lambda: waits_for(client, second, "cluster/BGL"), 30, "queued")
                gate.release()
                done = wait_final(client, [first, second], ("opresult",), timeout=60)
        finally:
            gate.release()
        assert done[0][0] == "success"
        assert error_of(list(done[1])) == (
            "OpPrereqError",
            "Node group 'g1' not known (renamed to 'g2' after this job was submitted)",
            "unknown_entity",
        )
        out = ok(cl.gnt("group", "list", "--no-headers", "-o", "name,alloc_policy"))
        assert out.split() == ["default", "preferred", "g2", "preferred"]


@pytest.mark.slow
def test_instance_job_locks_the_nodes_it_has_after_a_failover(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A job that looked an instance up before a failover moved it locks the
    instance's new node, not the one it saw (node locks are chosen under the
    instance's lock)."""
    root = tmp_path_factory.mktemp("fo")  # short: socket paths live under it
    gates = {"failover": Gate.make(root, "failover"), "start": Gate.make(root, "start")}
    with cluster_with_nodes(root, (NODE2,)) as (cl, extra):
        try:
            ok(
                add(
                    cl,
                    "mv1",
                    "-t",
                    "diskless",
                    "-o",
                    "plain",
                    "--no-install",
                    "--no-start",
                    "-n",
                    NODE1,
                )
            )
            # Failover's pre hooks run on the target (and the master, which is the source).
            hooks = extra[0].paths.hooks_dir / "instance-failover-pre.d"
            hooks.mkdir(parents=True)
            (hooks / "00-gate").write_text(gates["failover"].script())
            (hooks / "00-gate").chmod(0o755)
            cl.hook("instance-start", "pre", "00-gate", gates["start"].script())
            with cl.client() as client:
                failover = client.submit_job(
                    [
                        op(
                            "OP_INSTANCE_FAILOVER",
                            instance_name="mv1",
                            target_node=NODE2,
                            ignore_consistency=False,
                        )
                    ]
                )
                wait_until(gates["failover"].started.exists, 30, "the failover's hook")
                start = client.submit_job([op("OP_INSTANCE_STARTUP", instance_name="mv1")])
                wait_until(lambda: waits_for(client, start, "instance/mv1"), 30, "queued")
                gates["failover"].release()
                wait_until(gates["start"].started.exists, 60, "the startup's hook")
                held = {
                    name[1]: owner[1]
                    for name, owner in client.query("lock", ["name", "owner"])["data"]
                }
                listing = ok(cl.gnt("node", "list", "--no-headers", "-o", "name,uuid"))
                uuids = dict(line.split() for line in listing.splitlines())
                gates["start"].release()
                done = wait_final(client, [failover, start], timeout=60)
        finally:
            for gate in gates.values():
                gate.release()
    assert [row[0] for row in done] == ["success", "success"]
    assert held.get(f"node/{uuids[NODE2]}") == [str(start)], held
    assert f"node/{uuids[NODE1]}" not in held, held
