"""Parameter tables behind the query fields: Ganeti's titles of backend and
node parameters (their defaults and filling: :mod:`corral.services.ndparams`)."""

from __future__ import annotations

# Backend parameters with a title of their own (the others are titled by name).
BE_TITLES: dict[str, str] = {
    "auto_balance": "Auto_balance",
    "maxmem": "ConfigMaxMem",
    "minmem": "ConfigMinMem",
    "vcpus": "ConfigVCPUs",
}

ND_TITLES: dict[str, str] = {
    "exclusive_storage": "ExclusiveStorage",
    "oob_program": "OutOfBandProgram",
    "ovs": "OpenvSwitch",
    "ovs_link": "OpenvSwitchLink",
    "ovs_name": "OpenvSwitchName",
    "spindle_count": "SpindleCount",
}
