"""Network rules for the users QEMU runs as (nftables): see :mod:`.policy`
for what they allow and block, :mod:`.guard` for when noded applies them."""

from corral.node.netrules.guard import NetRules, problems
from corral.node.netrules.nft import table_name
from corral.node.netrules.policy import RULES, Link, Rule

__all__ = ["RULES", "Link", "NetRules", "Rule", "problems", "table_name"]
