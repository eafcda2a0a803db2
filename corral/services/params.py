"""Parameters as they apply to an instance: Ganeti's defaults, filled with
the cluster's, the OS's and the instance's own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral import constants as C
from corral import errors
from corral import params as P
from corral.objects import NIC, Cluster, Instance
from corral.osdef.definition import split_name
from corral.osdef.spec import OsParam, OsSpec, Visibility


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


def cluster_osparams(cluster: Cluster, os_name: str, visibility: Visibility) -> dict[str, Any]:
    """The cluster's OS parameters of one visibility for ``os_name``: the base
    OS's, then its variant's over them (there are no cluster secrets)."""
    tables = {
        Visibility.PUBLIC: cluster.osparams,
        Visibility.PRIVATE: cluster.osparams_private_cluster,
    }
    table = tables.get(visibility, {})
    base, _ = split_name(os_name)
    return P.fill({}, *(table.get(name, {}) for name in dict.fromkeys((base, os_name))))


def os_spec(
    cluster: Cluster,
    os_name: str,
    public: Mapping[str, Any],
    private: Mapping[str, Any] | None = None,
    secret: Mapping[str, Any] | None = None,
    *,
    strict: bool = True,
) -> OsSpec:
    """The OS with its parameters filled as Ganeti's SimpleFillOS does: each
    visibility over the cluster's defaults of that visibility (private ones only
    when ``private`` is given).

    A parameter set at two visibilities is refused (OpPrereqError), as Ganeti
    refuses it, unless not ``strict``: then the more hidden value wins (for an
    instance that exists already, whose scripts must run whatever it holds).
    """
    layers = {
        Visibility.PUBLIC: P.fill(
            cluster_osparams(cluster, os_name, Visibility.PUBLIC), dict(public)
        ),
        Visibility.PRIVATE: {}
        if private is None
        else P.fill(cluster_osparams(cluster, os_name, Visibility.PRIVATE), dict(private)),
        Visibility.SECRET: dict(secret or {}),
    }
    params: dict[str, OsParam] = {}
    repeated: dict[str, list[str]] = {}
    for visibility, values in layers.items():
        for key, value in values.items():
            if key in params:
                repeated.setdefault(key, [params[key].visibility]).append(visibility)
            params[key] = OsParam.of(value, visibility)
    if repeated and strict:
        where = "; ".join(f"'{k}' at {' and '.join(v)}" for k, v in sorted(repeated.items()))
        raise errors.OpPrereqError(
            f"Cannot assign multiple values to OS parameters: {where} visibility;"
            " give each parameter at one visibility only",
            C.ECODE_INVAL,
        )
    return OsSpec(os_name, params)
