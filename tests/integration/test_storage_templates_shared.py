"""sharedfile on two nodes (issue 10, item 3): enabling it asks every node
whether it can write in the shared directory; a disk is created once, by the
primary node, and the other node sees the same disk through its own noded.

The shared directory: node 1's, and a symbolic link to it at the same place
in node 2's root (what an NFS mount is on real nodes).
"""

from __future__ import annotations

from pathlib import Path

from corral.disk_description import DiskDescription
from corral.paths import Paths
from corral.rpc.calls_storage import blockdev_getdimensions
from tests.helpers.cluster import running_cluster
from tests.helpers.instances import add, failed, ok, query
from tests.helpers.multinode import add_node
from tests.helpers.noded import Noded

MIB = 1024 * 1024
SHARED = "/srv/ganeti/shared-file-storage"  # Ganeti's default


async def dimensions(node: Noded, disk: DiskDescription) -> list[int | None]:
    async with node.client() as rpc:
        res = await rpc.result(node.target, blockdev_getdimensions([disk.to_wire()]))
    assert not res.failed, res
    return list(res.payload[0])


def share(node2: Paths, node1: Paths) -> None:
    """Give node 2 node 1's shared directory (and its ssconf entry: what the
    cluster's file distribution does)."""
    local = node2.from_wire(SHARED)
    local.parent.mkdir(parents=True, exist_ok=True)
    local.symlink_to(node1.from_wire(SHARED), target_is_directory=True)
    ssconf = node2.ssconf_file("shared_file_storage_dir")
    ssconf.parent.mkdir(parents=True, exist_ok=True)
    ssconf.write_text(f"{SHARED}\n")


async def test_a_sharedfile_disk_is_seen_by_both_nodes(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "one") as cl:
        node2 = add_node(cl, tmp_path / "two")
        try:
            cl.paths.from_wire(SHARED).mkdir(parents=True)
            templates = "file,diskless,sharedfile"
            # Node 2 has no shared directory yet: enabling is refused, naming it.
            failed(
                cl.gnt("cluster", "modify", "--enabled-disk-templates", templates),
                "Cannot enable disk template 'sharedfile': node node2.example.com cannot serve it:"
                f" the shared file storage directory {SHARED} does not exist",
            )
            share(node2.paths, cl.paths)
            enable = ("--enabled-disk-templates", templates, "--ipolicy-disk-templates", templates)
            ok(cl.gnt("cluster", "modify", *enable))
            args = ("-t", "sharedfile", "-s", "8m", "--no-install", "--no-start")
            ok(add(cl, "shared1", "-n", cl.node_name, *args))
            (path,) = cl.paths.from_wire(f"{SHARED}/shared1").iterdir()
            wire = f"{SHARED}/shared1/{path.name}"
            uuid = query(cl, ["disk.uuids"], "shared1")["shared1"]["disk.uuids"][0]
            disk = DiskDescription("sharedfile", ("loop", wire), 8, uuid, "disk/0")
            # Created once: node 2 sees the very disk node 1 made, at its size.
            assert await dimensions(node2, disk) == [8 * MIB, None]
            ok(cl.gnt("instance", "grow-disk", "shared1", "0", "8m"))
            assert await dimensions(node2, disk) == [16 * MIB, None]
            ok(cl.gnt("instance", "remove", "-f", "shared1"))
            assert not node2.paths.from_wire(wire).exists()
        finally:
            node2.stop()
