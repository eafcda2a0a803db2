"""The master's side of the config drive: the data of an instance that asks
for one (``config-drive=yes``), as the calls that start it carry it (the wire
instance's ``config_drive``: an :class:`~corral.metad.model.InstanceMetadata`
record).  The node builds the ISO from it at each start.

Only stored parameters go in (never a secret one: none is stored).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.metad.model import InstanceMetadata, Nic
from corral.objects import NIC, Instance, Network
from corral.osdef import guest_settings as G
from corral.services.params import os_spec

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager


def instance_metadata(cfg: ConfigManager, inst: Instance) -> InstanceMetadata | None:
    """What the config drive of ``inst`` tells its guest; None: it asks for none."""
    # Filled as the scripts' parameters are (the cluster's defaults under the instance's).
    spec = os_spec(cfg.cluster, inst.os, inst.osparams, inst.osparams_private, strict=False)
    public = {k: p.reveal() for k, p in spec.params.items() if not p.hidden}
    if not G.config_drive_on(public):
        return None
    nics = tuple(_nic(cfg, nic) for nic in inst.nics)
    return InstanceMetadata.of_instance(inst.name, inst.uuid, spec, nics)


def record(cfg: ConfigManager, inst: Instance) -> dict[str, Any] | None:
    """The wire's ``config_drive`` of ``inst`` (None: no drive)."""
    meta = instance_metadata(cfg, inst)
    return None if meta is None else meta.to_record()


def _nic(cfg: ConfigManager, nic: NIC) -> Nic:
    network = cfg.get(Network, nic.network) if nic.network else None
    return Nic(
        mac=nic.mac,
        ip=nic.ip or None,
        network=network.network if network is not None and nic.ip else None,
        gateway=network.gateway if network is not None and nic.ip else None,
        name=nic.name or None,
    )
