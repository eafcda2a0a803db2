"""Ganeti's ssconf files: small plain-text copies of config values for scripts."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from corral import uidpool

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager
    from corral.paths import Paths


def ssconf_values(cfg: ConfigManager) -> dict[str, str]:
    cluster = cfg.cluster
    nodes = cfg.nodes()
    return {
        "cluster_name": cluster.name,
        "cluster_tags": "\n".join(sorted(cluster.tags)),
        "master_ip": cluster.master_ip,
        "master_netdev": cluster.master_netdev,
        "master_node": cfg.master_node.name,
        "node_list": "\n".join(n.name for n in nodes),
        "node_primary_ips": "\n".join(f"{n.name} {n.primary_ip}" for n in nodes),
        "node_secondary_ips": "\n".join(f"{n.name} {n.secondary_ip}" for n in nodes),
        "online_nodes": "\n".join(n.name for n in nodes if not n.offline),
        "master_candidates": "\n".join(n.name for n in nodes if n.master_candidate),
        "nodegroups": "\n".join(f"{g.uuid} {g.name}" for g in cfg.groups()),
        # luxid's order: by uuid.
        "networks": "\n".join(
            f"{n.uuid} {n.name}" for n in sorted(cfg.networks(), key=lambda n: n.uuid)
        ),
        "release_version": __import__("corral").__version__,
        "hypervisor_list": "\n".join(cluster.enabled_hypervisors),
        "file_storage_dir": cluster.file_storage_dir,
        "shared_file_storage_dir": cluster.shared_file_storage_dir,
        "enabled_disk_templates": "\n".join(cluster.enabled_disk_templates),
        "uid_pool": uidpool.format_pool(cluster.uid_pool, "\n"),
        "enabled_user_shutdown": str(cluster.enabled_user_shutdown),
    }


# Tables whose objects the ssconf files describe; instance changes leave them alone.
_SSCONF_TABLES = frozenset({"cluster", "nodes", "nodegroups", "networks"})


def affects_ssconf(tables: set[str]) -> bool:
    """Whether a change of these config tables changes the ssconf files."""
    return bool(tables & _SSCONF_TABLES)


def write_ssconf(paths: Paths, cfg: ConfigManager, tables: set[str] | None = None) -> None:
    """Write the ssconf files whose content changed (atomically)."""
    if tables is not None and not affects_ssconf(tables):
        return
    for key, value in ssconf_values(cfg).items():
        path = paths.ssconf_file(key)
        data = value + "\n"
        try:
            if path.read_text() == data:
                continue
        except OSError:
            pass
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(data)
        os.chmod(tmp, 0o444)
        os.replace(tmp, path)
