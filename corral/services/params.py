"""Parameters as they apply to an instance: Ganeti's defaults, filled with
the cluster's, the OS's and the instance's own."""

from __future__ import annotations

from typing import Any

from corral import params as P
from corral.objects import NIC, Cluster, Instance


def filled_beparams(cluster: Cluster, inst: Instance) -> dict[str, Any]:
    """The instance's backend parameters, filled."""
    return P.fill(P.BE_DEFAULTS, cluster.beparams.get("default", {}), inst.beparams)


def filled_hvparams(cluster: Cluster, inst: Instance) -> dict[str, Any]:
    """The instance's hypervisor parameters over the OS's, the cluster's and the defaults."""
    return P.fill(
        P.HV_DEFAULTS.get(inst.hypervisor, {}),
        cluster.hvparams.get(inst.hypervisor, {}),
        cluster.os_hvp.get(inst.os, {}).get(inst.hypervisor, {}),
        inst.hvparams,
    )


def filled_nicparams(cluster: Cluster, nic: NIC) -> dict[str, Any]:
    """One NIC's parameters, filled."""
    return P.fill(P.NIC_DEFAULTS, cluster.nicparams.get("default", {}), nic.nicparams)
