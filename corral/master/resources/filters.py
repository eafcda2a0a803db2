"""Query("filter"): the job filter rules, with luxid's fields."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral import constants as C
from corral.master.resources.common import Names
from corral.nicesort import nice_key
from corral.objects.filter_rule import FilterRule
from corral.query.fields import Field, FieldSet

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager
    from corral.services.context import Master

FIELDS = FieldSet(
    [
        Field(
            "watermark",
            "Watermark",
            C.QFT_OTHER,
            "Highest job ID used at the time when the filter was added",
            lambda r: r.watermark,
        ),
        Field("priority", "Priority", C.QFT_OTHER, "Filter priority", lambda r: r.priority),
        Field(
            "predicates",
            "Predicates",
            C.QFT_OTHER,
            "List of filter predicates",
            lambda r: r.predicates,
        ),
        Field("action", "Action", C.QFT_OTHER, "Filter action", lambda r: r.action),
        Field(
            "reason_trail",
            "ReasonTrail",
            C.QFT_OTHER,
            "Reason why this filter was added",
            lambda r: r.reason_trail,
        ),
        Field("uuid", "UUID", C.QFT_OTHER, "Filter ID", lambda r: r.uuid),
    ]
)


def sorted_rules(cfg: ConfigManager) -> list[FilterRule]:
    """The rules in the order luxid lists them: by uuid, nicely sorted."""
    return sorted(cfg.filter_rules(), key=lambda rule: nice_key(rule.uuid))


async def items(master: Master, needs: set[str], names: Names) -> list[FilterRule]:
    """Every rule; they are all in the configuration, so ``needs`` changes nothing."""
    return sorted_rules(master.cfg)
