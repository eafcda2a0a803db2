"""The fake hypervisor's parameters (Ganeti's ``hv_fake.PARAMETERS``)."""

from __future__ import annotations

from corral.hvparams.rows import MIGRATION_MODE_REQ, VTYPE_STRING, HvParam

PARAMS = (HvParam("migration_mode", VTYPE_STRING, "live", MIGRATION_MODE_REQ, built=True),)
