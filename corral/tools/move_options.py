"""move-instance's command line: Ganeti 3.0.2's options, checks and error
texts, plus Corral's ``--keep-source-instance`` and ``--no-name-check``; and the
moves it asks for."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import Any, NoReturn

from corral import constants as C
from corral import errors
from corral import paramtypes as T
from corral.cli import instance_specs as S
from corral.cli.optvalues import split_key_val

USAGE = "%(prog)s [--debug|--verbose] <source-cluster> <dest-cluster> <instance...>"
# Ganeti's constants.DEFAULT_OPPORTUNISTIC_RETRY_INTERVAL, in seconds.
DEFAULT_OPPORTUNISTIC_DELAY = 30


@dataclass
class InstanceMove:
    """One instance to move, and (after the move) what went wrong, if anything."""

    src_instance_name: str
    dest_instance_name: str
    dest_pnode: str | None = None
    dest_snode: str | None = None
    compress: str = C.IEC_NONE
    dest_iallocator: str | None = None
    dest_disk_template: str | None = None
    hvparams: dict[str, Any] = field(default_factory=dict)
    beparams: dict[str, Any] = field(default_factory=dict)
    osparams: dict[str, Any] = field(default_factory=dict)
    nics: list[dict[str, Any]] = field(default_factory=list)
    opportunistic_tries: int = 0
    opportunistic_delay: float = DEFAULT_OPPORTUNISTIC_DELAY
    keep_source_instance: bool = False
    name_check: bool = True
    error_message: str | None = None

    @property
    def label(self) -> str:
        """The name for messages: ``a`` or ``a as b``."""
        if self.dest_instance_name == self.src_instance_name:
            return self.src_instance_name
        return f"{self.src_instance_name} as {self.dest_instance_name}"


class Parser(argparse.ArgumentParser):
    """argparse with optparse's error layout (Ganeti's tools use optparse)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"Usage: {self.format_usage().removeprefix('usage: ')}\n")
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def _typed(parse: Any, option: str) -> Any:
    """An argparse type from a Ganeti value parser (its errors as usage errors)."""

    def convert(value: str) -> Any:
        try:
            return parse(option, value)
        except errors.GenericError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return convert


# -B/-H/-O: key=value lists overriding the source instance's parameters.
_OVERRIDES = (
    (("-B", "--backend-parameters"), "beparams", split_key_val, "Back-end"),
    (("-H", "--hypervisor-parameters"), "hvparams", split_key_val, "Hypervisor"),
    (("-O", "--os-parameters"), "osparams", split_key_val, "OS"),
)


def build_parser(prog: str) -> Parser:
    """The parser of Ganeti's options (see ``man move-instance``)."""
    p = Parser(prog=prog, usage=USAGE)
    p.add_argument("-d", "--debug", action="count", default=0, help="Turn debugging on")
    p.add_argument("-v", "--verbose", action="store_true", help="Verbose output")
    p.add_argument("-I", "--iallocator", help="Select nodes for the instance automatically")
    for flags, dest, parse, what in _OVERRIDES:
        p.add_argument(*flags, dest=dest, default={}, type=_typed(parse, flags[0]),
                       help=f"{what} parameters to override")  # fmt: skip
    p.add_argument("--net", dest="nics", action="append", default=[], help="NICs to override",
                   type=_typed(S.split_ident_key_val, "--net"))  # fmt: skip
    for side, name in (("src", "Source"), ("dest", "Destination")):
        p.add_argument(f"--{side}-rapi-port", type=int, default=C.DEFAULT_RAPI_PORT,
                       help=f"{name} cluster RAPI port")  # fmt: skip
        p.add_argument(f"--{side}-ca-file", help=f"{name} cluster CA (PEM)")
        p.add_argument(f"--{side}-username", help=f"{name} cluster username")
        p.add_argument(f"--{side}-password-file", help=f"File with the {side} cluster password")
    p.add_argument("--dest-instance-name", help="Instance name on the destination cluster")
    p.add_argument("--dest-primary-node", help="Primary node on the destination cluster")
    p.add_argument("--dest-secondary-node", help="Secondary node on the destination cluster")
    p.add_argument("--dest-disk-template", help="Disk template on the destination cluster")
    p.add_argument("--compress", default=C.IEC_NONE, help="Compression during the move")
    p.add_argument("-p", "--parallel", type=int, default=1, metavar="<number>",
                   help="Number of instances to be moved simultaneously")  # fmt: skip
    p.add_argument("--opportunistic-tries", type=int, metavar="<number>")
    p.add_argument("--opportunistic-delay", type=int, metavar="<number>")
    p.add_argument("--keep-source-instance", action="store_true",
                   help="Keep the instance on the source cluster (Corral)")  # fmt: skip
    p.add_argument("--no-name-check", dest="name_check", action="store_false",
                   help="Do not resolve the instance name on the destination (Corral)")  # fmt: skip
    p.add_argument("args", nargs="*", metavar="<cluster and instance names>")
    return p


def check_options(parser: Parser, opts: argparse.Namespace) -> tuple[str, str, list[str]]:
    """Ganeti's checks of the options; ``(source, destination, instances)``."""
    if len(opts.args) < 3:
        parser.error("Not enough arguments")
    src, dest, *names = opts.args
    if not opts.src_ca_file:
        parser.error("Missing source cluster CA file")
    if opts.parallel < 1:
        parser.error("Number of simultaneous moves must be >= 1")
    if opts.iallocator and (opts.dest_primary_node or opts.dest_secondary_node):
        parser.error("Destination node and iallocator options exclude each other")
    if not opts.iallocator and (opts.opportunistic_tries or 0) > 0:
        parser.error("Opportunistic instance creation can only be used with an iallocator")
    _check_opportunistic(parser, opts)
    _check_instance_options(parser, opts, names)
    return src, dest, names


def _check_opportunistic(parser: Parser, opts: argparse.Namespace) -> None:
    if opts.opportunistic_tries is not None:
        if opts.opportunistic_tries < 0:
            parser.error("Number of opportunistic creation attempts must be >= 0")
        if opts.opportunistic_delay is not None and opts.opportunistic_delay <= 0:
            parser.error(
                "The delay between two successive creation attempts must be greater than zero"
            )
    elif opts.opportunistic_delay is not None:
        parser.error("Opportunistic delay can only be specified when opportunistic tries are used")


def _check_instance_options(parser: Parser, opts: argparse.Namespace, names: list[str]) -> None:
    if len(names) > 1:
        if (opts.dest_instance_name or opts.dest_primary_node or opts.dest_secondary_node
                or opts.hvparams or opts.beparams or opts.osparams or opts.nics):  # fmt: skip
            parser.error(
                "The options --dest-instance-name, --dest-primary-node,"
                " --dest-secondary-node, --hypervisor-parameters,"
                " --backend-parameters, --os-parameters and --net can"
                " only be used when moving exactly one instance"
            )
        return
    try:
        T.force_dict_type(opts.hvparams, T.HV_PARAMETER_TYPES)
        T.force_dict_type(opts.beparams, T.BE_PARAMETER_TYPES)
        opts.nics = S.nics_from(opts.nics) if opts.nics else []
    except errors.GenericError as err:
        parser.error(str(err.args[0]) if err.args else str(err))


def moves_of(opts: argparse.Namespace, names: list[str]) -> list[InstanceMove]:
    """One InstanceMove per instance name, with the options' overrides."""
    return [
        InstanceMove(
            src_instance_name=name,
            dest_instance_name=opts.dest_instance_name or name,
            dest_pnode=opts.dest_primary_node,
            dest_snode=opts.dest_secondary_node,
            compress=opts.compress,
            dest_iallocator=opts.iallocator,
            dest_disk_template=opts.dest_disk_template,
            hvparams=opts.hvparams,
            beparams=opts.beparams,
            osparams=opts.osparams,
            nics=opts.nics,
            opportunistic_tries=opts.opportunistic_tries or 0,
            opportunistic_delay=(
                DEFAULT_OPPORTUNISTIC_DELAY
                if opts.opportunistic_delay is None
                else opts.opportunistic_delay
            ),
            keep_source_instance=opts.keep_source_instance,
            name_check=opts.name_check,
        )
        for name in names
    ]


def read_password(filename: str) -> str:
    """A password file: one non-empty line (Ganeti's ReadOneLineFile, strict)."""
    with open(filename) as file:
        lines = file.read().splitlines()
    if not lines or not lines[0].strip():
        raise errors.GenericError(f"No data in one-liner file {filename}")
    if any(line.strip() for line in lines[1:]):
        raise errors.GenericError(f"Too many lines in one-liner file {filename}")
    return lines[0].rstrip()
