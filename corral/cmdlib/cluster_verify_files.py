"""gnt-cluster verify: the cluster's distributed files, alike on every node.

Which file belongs on which node is the distribution's own list
(:mod:`corral.services.distribution`: the CA certificate and domain secret on
every node, the RAPI key on master candidates) plus the ssconf files: the
one source of truth for what ``redist-conf`` sends and what verify expects.
Findings are Ganeti's _VerifyFiles' (ECLUSTERFILECHECK, ENODEFILECHECK).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from corral.cmdlib.cluster_verify_nodes import NodeImage, Reporter
from corral.rpc import node_verify as NV
from corral.services.distribution import ancillary_files
from corral.services.ssconf import ssconf_values

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager
    from corral.objects import Node
    from corral.paths import Paths


def expected_files(paths: Paths, cfg: ConfigManager, node: Node) -> set[str]:
    """The production paths of the cluster files ``node`` must have."""
    files = [path for path, _ in ancillary_files(paths, node)]
    files += [paths.ssconf_file(key) for key in ssconf_values(cfg)]
    return {paths.to_wire(path) for path in files}


def checked_files(paths: Paths, cfg: ConfigManager, nodes: Iterable[Node]) -> list[str]:
    """Every file some of ``nodes`` must have: what each node is asked about."""
    return sorted(set().union(*(expected_files(paths, cfg, n) for n in nodes)))


def _names(images: dict[str, NodeImage], uuids: Iterable[str]) -> str:
    return ", ".join(sorted(images[uuid].node.name for uuid in uuids))


def verify_files(
    report: Reporter, paths: Paths, cfg: ConfigManager, images: dict[str, NodeImage]
) -> None:
    """Each file on the nodes that must have it, nowhere else, one content."""
    expected = {uuid: expected_files(paths, cfg, img.node) for uuid, img in images.items()}
    # file → checksum → nodes having that content
    found: dict[str, dict[str, set[str]]] = {f: {} for f in set().union(*expected.values())}
    ignored = set()
    for uuid, img in sorted(images.items(), key=lambda item: item[1].node.name):
        if img.node.offline:
            ignored.add(uuid)
            continue
        sums = None if img.answer is None else img.answer.get(NV.FILELIST)
        if not isinstance(sums, dict):
            report(
                "ENODEFILECHECK", "node", img.node.name, "Node did not return file checksum data"
            )
            ignored.add(uuid)
            continue
        for name, digest in sums.items():
            found.setdefault(name, {}).setdefault(digest, set()).add(uuid)
    for name, variants in sorted(found.items()):
        having = set().union(*variants.values()) - ignored
        should = {uuid for uuid, files in expected.items() if name in files} - ignored
        if should - having:
            text = f"File {name} is missing from node(s) {_names(images, should - having)}"
            report("ECLUSTERFILECHECK", "cluster", None, text)
        if having - should:
            text = f"File {name} should not exist on node(s) {_names(images, having - should)}"
            report("ECLUSTERFILECHECK", "cluster", None, text)
        if len(variants) > 1:
            listed = "; ".join(
                f"variant {index} on {_names(images, uuids)}"
                for index, (_, uuids) in enumerate(sorted(variants.items()), 1)
            )
            text = f"File {name} found with {len(variants)} different checksums ({listed})"
            report("ECLUSTERFILECHECK", "cluster", None, text)
