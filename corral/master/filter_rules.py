"""luxid's filter-rule calls: QueryFilters, ReplaceFilter and DeleteFilter.

Rules live in the configuration (so they survive a restart and bump the
cluster serial, as in Ganeti); committing a change makes the job queue
re-filter its jobs (see ``corral.master.daemon``).
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral.jobs.filter_decode import (
    delete_filter_args,
    query_filters_args,
    replace_filter_args,
)
from corral.master.resources.filters import FIELDS, sorted_rules
from corral.objects.base import new_uuid
from corral.objects.filter_rule import FilterRule

if TYPE_CHECKING:
    from corral.services.context import Master

# luxid accepts only the form of the uuids it makes: lower-case hexadecimal.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
# The reason-trail entry luxid adds to every rule it stores.
_LUXID_SOURCE = "luxid"


async def query_filters(master: Master, args: Any) -> list[list[Any]]:
    """``QueryFilters(uuids, fields)``: a row of values per rule, in luxid's order.

    Unknown uuids are left out silently (luxid filters on the uuid field).
    """
    uuids, fields = query_filters_args(args)
    unknown = [name for name in fields if name not in FIELDS.fields]
    if unknown:
        raise errors.OpPrereqError(
            f"Unknown output fields selected: {', '.join(unknown)}", C.ECODE_INVAL
        )
    wanted = set(uuids)
    getters = [FIELDS.fields[name].getter for name in fields]
    return [
        [getter(rule) for getter in getters]
        for rule in sorted_rules(master.cfg)
        if not wanted or rule.uuid in wanted
    ]


async def replace_filter(master: Master, args: Any) -> str:
    """``ReplaceFilter(uuid, priority, predicates, action, reason)``: add a rule
    (uuid null) or replace, or create, the one with that uuid; returns the uuid."""
    uuid, priority, predicates, action, reason = replace_filter_args(args)
    if uuid is None:
        uuid = new_uuid()
    elif not _UUID.match(uuid):
        raise errors.GenericError("Unable to parse UUID")
    # luxid's timestamps have microsecond precision, written in nanoseconds.
    reason.append([_LUXID_SOURCE, "", time.time_ns() // 1000 * 1000])
    cfg = master.cfg
    current = cfg.get(FilterRule, uuid)
    rule = FilterRule(
        uuid=uuid,
        name=uuid,
        watermark=master.queue.last_job_id,
        priority=priority,
        predicates=predicates,
        action=action,
        reason_trail=reason,
    )
    tx = cfg.transaction()
    if current is None:
        tx.add(rule)
    else:
        rule.ctime = current.ctime
        tx.update(rule)
    await tx.commit()
    return uuid


async def delete_filter(master: Master, args: Any) -> None:
    """``DeleteFilter(uuid)``: remove a rule; an unknown uuid is an error."""
    uuid = delete_filter_args(args)
    rule = master.cfg.get(FilterRule, uuid)
    if rule is None:
        raise errors.GenericError(f"Filter rule with UUID {uuid} does not exist")
    tx = master.cfg.transaction()
    tx.remove(rule)
    await tx.commit()
