"""gnt-network: add, remove, modify, list, list-fields, info, connect,
disconnect and the networks' tags."""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral import errors
from corral.cli import common, tags
from corral.cli.instance_specs import key_val
from corral.cli.optvalues import unescape_and_split
from corral.cli.table import generic_list, generic_list_fields, list_filter

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

    from corral.cli.table import Formatter

DEFAULT_FIELDS = ["name", "network", "gateway", "mac_prefix", "group_list", "tags"]
INFO_FIELDS = ["name", "network", "gateway", "network6", "gateway6", "mac_prefix",
               "free_count", "reserved_count", "map", "group_list", "inst_list",
               "external_reservations", "serial_no", "uuid"]  # fmt: skip
# The NIC parameters a connection takes when -N does not say (Ganeti's NICC_DEFAULTS).
NIC_DEFAULTS = {"mode": "bridged", "link": "xen-br0", "vlan": ""}
# Addresses per line of the usage map.
MAP_WIDTH = 64


def _reserved_ips(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return unescape_and_split(text) if text else []


def cmd_add(opts: argparse.Namespace) -> int:
    (name,) = opts.network_name
    if opts.network is None:
        raise errors.OpPrereqError("The --network option must be given", C.ECODE_INVAL)
    op = {"OP_ID": "OP_NETWORK_ADD", "network_name": name, "network": opts.network,
          "gateway": opts.gateway, "network6": opts.network6, "gateway6": opts.gateway6,
          "mac_prefix": opts.mac_prefix, "add_reserved_ips": _reserved_ips(opts.add_reserved_ips),
          "conflicts_check": opts.conflicts_check,
          "tags": opts.tags.split(",") if opts.tags is not None else []}  # fmt: skip
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def cmd_remove(opts: argparse.Namespace) -> int:
    (name,) = opts.network_name
    op = {"OP_ID": "OP_NETWORK_REMOVE", "network_name": name, "force": opts.force}
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def cmd_modify(opts: argparse.Namespace) -> int:
    (name,) = opts.network_name
    changes = {
        "gateway": opts.gateway,
        "add_reserved_ips": _reserved_ips(opts.add_reserved_ips),
        "remove_reserved_ips": _reserved_ips(opts.remove_reserved_ips),
        "mac_prefix": opts.mac_prefix,
        "gateway6": opts.gateway6,
        "network6": opts.network6,
    }
    if all(value is None for value in changes.values()):
        print("Please give at least one of the parameters.", file=sys.stderr)
        return C.EXIT_FAILURE
    common.submit_or_send(opts, {"OP_ID": "OP_NETWORK_SET_PARAMS", "network_name": name,
                                 **changes})  # fmt: skip
    return C.EXIT_SUCCESS


def _groups(client: Any, groups: list[str]) -> list[str]:
    """The groups named, or (none named) the uuids of all groups."""
    if groups:
        return groups
    return [uuid for (uuid,) in client.call("QueryGroups", [], ["uuid"], False)]


def cmd_connect(opts: argparse.Namespace) -> int:
    network, *groups = opts.args
    client = common.get_client()
    nicparams = {**NIC_DEFAULTS, **opts.nicparams}
    for group in _groups(client, groups):
        op = {"OP_ID": "OP_NETWORK_CONNECT", "group_name": group, "network_name": network,
              "network_mode": nicparams["mode"], "network_link": nicparams["link"],
              "network_vlan": nicparams["vlan"],
              "conflicts_check": opts.conflicts_check}  # fmt: skip
        common.submit_or_send(opts, op, client)
    return C.EXIT_SUCCESS


def cmd_disconnect(opts: argparse.Namespace) -> int:
    network, *groups = opts.args
    client = common.get_client()
    for group in _groups(client, groups):
        op = {"OP_ID": "OP_NETWORK_DISCONNECT", "group_name": group, "network_name": network}
        common.submit_or_send(opts, op, client)
    return C.EXIT_SUCCESS


def _group_list(data: Any) -> str:
    return ", ".join(f"{name} ({mode}, {link}, {vlan})" for name, mode, link, vlan in data)


def cmd_list(opts: argparse.Namespace) -> int:
    fields = common.output_fields(opts, DEFAULT_FIELDS)
    join = ",".join
    formatters: dict[str, Formatter] = {"group_list": _group_list, "inst_list": join,
                                        "tags": join}  # fmt: skip
    opts.force_filter = False
    qfilter = list_filter(opts, opts.names)
    return generic_list(common.get_client(), C.QR_NETWORK, fields, qfilter, opts, formatters)


def cmd_list_fields(opts: argparse.Namespace) -> int:
    return generic_list_fields(common.get_client(), C.QR_NETWORK, opts.fields, opts)


def network_info(client: Any, row: list[Any]) -> list[str]:
    """One network as Ganeti's ``gnt-network info`` shows it."""
    (name, network, gateway, network6, gateway6, mac_prefix, free, reserved, mapping,
     groups, instances, external, serial, uuid) = row  # fmt: skip
    size = free + reserved
    lines = [f"Network name: {name}", f"UUID: {uuid}", f"Serial number: {serial}",
             f"  Subnet: {network}", f"  Gateway: {gateway}", f"  IPv6 Subnet: {network6}",
             f"  IPv6 Gateway: {gateway6}", f"  Mac Prefix: {mac_prefix}", f"  Size: {size}",
             f"  Free: {free} ({100 * float(free) / float(size):.2f}%)",
             "  Usage map:"]  # fmt: skip
    for start in range(0, len(mapping), MAP_WIDTH):
        part = mapping[start : start + MAP_WIDTH]
        lines.append(f"     {str(start).rjust(4)} {part.ljust(MAP_WIDTH)} {start + MAP_WIDTH - 1}")
    lines.append("         (X) used    (.) free")
    if external:
        import textwrap

        lines.append("  externally reserved IPs:")
        lines += [f"    {line}" for line in textwrap.wrap(external, width=MAP_WIDTH)]
    if groups:
        lines.append("  connected to node groups:")
        lines += [f"    {g} (mode:{m} link:{link} vlan:{vlan})" for g, m, link, vlan in groups]
    else:
        lines.append("  not connected to any node group")
    return lines + _instances_info(client, uuid, instances)


def _instances_info(client: Any, uuid: str, instances: list[str]) -> list[str]:
    """The instances on the network, each with its NICs on it ("index:ip")."""
    if not instances:
        return ["  not used by any instances"]
    lines = [f"  used by {len(instances)} instances:"]
    for inst in instances:
        rows = client.call("QueryInstances", [inst], ["nic.ips", "nic.networks"], False)
        ips, nets = rows[0]
        pairs = enumerate(zip(ips, nets, strict=True))
        used = [f"{index}:{ip}" for index, (ip, net) in pairs if net == uuid]
        lines.append(f"    {inst}: {', '.join(used)}")
    return lines


def cmd_info(opts: argparse.Namespace) -> int:
    client = common.get_client()
    for row in client.call("QueryNetworks", opts.networks, INFO_FIELDS, False):
        print("\n".join(network_info(client, row)))
    return C.EXIT_SUCCESS


def _addresses_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gateway", help="IP address of the router (gateway)")
    p.add_argument("--add-reserved-ips", help="Comma-separated list of reserved IPs to add")
    p.add_argument("-m", "--mac-prefix", help="The MAC prefix of the network's NICs (XX:XX:XX)")
    p.add_argument("--network6", help="IP network in CIDR notation")
    p.add_argument("--gateway6", help="IP6 address of the router (gateway)")


def _conflicts_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-conflicts-check", dest="conflicts_check", action="store_false",
                   help="Don't check for conflicting IPs")  # fmt: skip


def _add_changes(sub: Any) -> None:
    p = common.add_command(sub, "add", cmd_add, "Add a new IP network to the cluster")
    common.add_args(p, "network_name", "NETWORK", 1, 1)
    p.add_argument("--network", help="IP network in CIDR notation")
    _addresses_options(p)
    _conflicts_option(p)
    p.add_argument("--tags", help="Comma-separated list of tags")
    common.add_submit_options(p)
    p = common.add_command(sub, "modify", cmd_modify, "Alters the parameters of a network")
    common.add_args(p, "network_name", "NETWORK", 1, 1)
    _addresses_options(p)
    p.add_argument("--remove-reserved-ips", help="Comma-delimited list of reserved IPs to remove")
    common.add_submit_options(p)
    p = common.add_command(sub, "remove", cmd_remove, "Remove an (empty) network from the cluster")
    common.add_args(p, "network_name", "NETWORK", 1, 1)
    common.add_force(p)
    common.add_submit_options(p)
    p = common.add_command(sub, "connect", cmd_connect,
                           "Map a given network to the specified node group with given mode"
                           " and link (netparams)")  # fmt: skip
    common.add_args(p, "args", "NETWORK [GROUP...]", 1, None)
    _conflicts_option(p)
    common.add_priority_option(p)
    p.add_argument("-N", "--nic-parameters", dest="nicparams", type=key_val("-N"), default={})
    p = common.add_command(sub, "disconnect", cmd_disconnect,
                           "Unmap a given network from a specified node group")  # fmt: skip
    common.add_args(p, "args", "NETWORK [GROUP...]", 1, None)
    common.add_priority_option(p)


def _add_queries(sub: Any) -> None:
    p = common.add_command(sub, "list", cmd_list, "Lists the IP networks in the cluster")
    common.add_list_options(p)
    common.add_args(p, "names", "NETWORK", 0, None)
    p = common.add_command(sub, "list-fields", cmd_list_fields,
                           "Lists all available fields for networks")  # fmt: skip
    common.add_list_options(p, verbose=False)
    common.add_args(p, "fields", "FIELD", 0, None)
    p = common.add_command(sub, "info", cmd_info, "Show information about the network(s)")
    common.add_args(p, "networks", "NETWORK", 0, None)
    tags.add_tag_commands(sub, C.TAG_NETWORK, "NETWORK", "network")


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-network", "Manage IP networks")
    _add_changes(sub)
    _add_queries(sub)
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
