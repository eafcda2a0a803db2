"""Instance policy options and output, as Ganeti 3.0.2's commands have them.

Options (values parsed as Ganeti's optparse types do):

- ``--ipolicy-bounds-specs min:k=v,.../max:k=v,...//min:...``: the ``minmax`` list;
- ``--ipolicy-std-specs k=v,...``, ``--ipolicy-disk-templates a,b``,
  ``--ipolicy-vcpu-ratio F``, ``--ipolicy-spindle-ratio F``;
- ``--specs-mem-size min=..,max=..,std=..`` and the other ``--specs-*`` (init only).

``create_ipolicy`` turns them into the policy (or policy change) of an opcode,
``format_policy_info`` into ``gnt-cluster info``'s lines (also for groups),
``ipolicy_command`` into ``show-ispecs-cmd``'s options.
"""

from __future__ import annotations

import argparse

from corral import constants as C
from corral import errors
from corral import ipolicy as IP
from corral.cli.optvalues import split_key_val, unescape_and_split
from corral.paramtypes import parse_unit

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

BOUNDS_SPECS_OPT = "--ipolicy-bounds-specs"
STD_SPECS_OPT = "--ipolicy-std-specs"
# ``--specs-*`` options: (option, destination, ispec name).
SPLIT_SPECS = (
    ("--specs-cpu-count", "ispecs_cpu_count", IP.ISPEC_CPU_COUNT),
    ("--specs-disk-count", "ispecs_disk_count", IP.ISPEC_DISK_COUNT),
    ("--specs-disk-size", "ispecs_disk_size", IP.ISPEC_DISK_SIZE),
    ("--specs-mem-size", "ispecs_mem_size", IP.ISPEC_MEM_SIZE),
    ("--specs-nic-count", "ispecs_nic_count", IP.ISPEC_NIC_COUNT),
)


def _split_list_key_val(opt: str, value: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for elem in value.split("/"):
        if not elem:
            raise errors.ParameterError(f"Empty section in option '{opt}'")
        ident, _, rest = elem.partition(":")
        if ident in out:
            raise errors.ParameterError(f"Duplicated parameter '{ident}' in parsing {opt}: {elem}")
        out[ident] = split_key_val(opt, rest, parse_prefixes=False)
    return out


def multilist_ident_key_val(opt: str, value: str) -> list[dict[str, dict[str, Any]]]:
    """``ident:k=v,.../ident:...//ident:...`` as a list of dicts of dicts."""
    return [_split_list_key_val(opt, line) for line in value.split("//")]


def parse_list(value: str) -> list[str]:
    return unescape_and_split(value) if value else []


def parse_maybe_float(opt: str, value: str) -> float | str:
    """A float, or ``default``."""
    lowered = value.lower()
    if lowered == IP.VALUE_DEFAULT:
        return lowered
    try:
        return float(lowered)
    except ValueError:
        raise errors.ParameterError(
            f"option {opt}: invalid floating-point value: '{value}'"
        ) from None


# Options
def add_options(parser: argparse.ArgumentParser, *, init: bool) -> None:
    """The policy options of ``gnt-cluster init`` (with ``--specs-*``) or ``modify``."""
    parser.add_argument(BOUNDS_SPECS_OPT, dest="ipolicy_bounds_specs")
    parser.add_argument(STD_SPECS_OPT, dest="ipolicy_std_specs")
    parser.add_argument("--ipolicy-disk-templates", dest="ipolicy_disk_templates")
    parser.add_argument("--ipolicy-vcpu-ratio", dest="ipolicy_vcpu_ratio")
    parser.add_argument("--ipolicy-spindle-ratio", dest="ipolicy_spindle_ratio")
    if init:
        for option, dest, _ in SPLIT_SPECS:
            parser.add_argument(option, dest=dest)


def _parse_spec(spec: dict[str, Any], keyname: str, required: bool) -> dict[str, Any]:
    out = dict(spec)
    for key in (IP.ISPEC_DISK_SIZE, IP.ISPEC_MEM_SIZE):
        if key in out:
            try:
                out[key] = parse_unit(out[key])
            except errors.UnitParseError as err:
                raise errors.OpPrereqError(
                    f"Invalid parameter {key} ({out[key]}) in {keyname} instance specs:"
                    f" {err.message}",
                    C.ECODE_INVAL,
                ) from None
    out = IP.force_int_specs(out)
    missing = [p for p in IP.ISPECS_PARAMETERS if p not in out]
    if required and missing:
        raise errors.OpPrereqError(
            f"Missing parameters in ipolicy spec {keyname}: {IP.comma_join(missing)}",
            C.ECODE_INVAL,
        )
    return out


def _bounds(opts: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    for pair in multilist_ident_key_val(BOUNDS_SPECS_OPT, opts.ipolicy_bounds_specs):
        parsed = {}
        for key, spec in pair.items():
            if key not in IP.ISPECS_MINMAX_KEYS:
                raise errors.OpPrereqError(
                    f"Invalid key in bounds instance specifications: {key}", C.ECODE_INVAL
                )
            parsed[key] = _parse_spec(spec, key, True)
        out.append(parsed)
    return out


def _split_specs(opts: argparse.Namespace) -> dict[str, Any]:
    """The ``--specs-*`` options of init, filled from Ganeti's defaults."""
    given = {dest: split_key_val(opt, getattr(opts, dest) or "") for opt, dest, _ in SPLIT_SPECS}
    try:
        for dest in ("ispecs_mem_size", "ispecs_disk_size"):
            given[dest] = {
                k: v if v == IP.VALUE_DEFAULT else parse_unit(v) for k, v in given[dest].items()
            }
    except errors.UnitParseError as err:
        raise errors.OpPrereqError(
            f"Invalid disk ({given['ispecs_disk_size']}) or memory ({given['ispecs_mem_size']})"
            f" size in policy: {err.message}",
            C.ECODE_INVAL,
        ) from None
    by_key: dict[str, dict[str, Any]] = {IP.ISPECS_MIN: {}, IP.ISPECS_MAX: {}, IP.ISPECS_STD: {}}
    for _, dest, name in SPLIT_SPECS:
        for key, value in IP.force_ints(given[dest], tuple(by_key)).items():
            by_key[key][name] = value
    return {
        IP.ISPECS_MINMAX: [
            {k: {**IP.ISPECS_MINMAX_DEFAULTS[k], **by_key[k]} for k in IP.ISPECS_MINMAX_KEYS}
        ],
        IP.ISPECS_STD: {**IP.IPOLICY_DEFAULTS[IP.ISPECS_STD], **by_key[IP.ISPECS_STD]},
    }


def create_ipolicy(opts: argparse.Namespace, *, init: bool) -> dict[str, Any]:
    """The policy the options ask for (Ganeti's CreateIPolicyFromOpts): at init
    complete (``fill_all``), at modify only what was given."""
    split = init and any(getattr(opts, dest) for _, dest, _ in SPLIT_SPECS)
    full = opts.ipolicy_bounds_specs is not None or opts.ipolicy_std_specs is not None
    if split and full:
        raise errors.OpPrereqError(
            "A --specs-xxx option cannot be specified together with any --ipolicy-xxx-specs option",
            C.ECODE_INVAL,
        )
    policy: dict[str, Any] = {}
    if split:
        policy.update(_split_specs(opts))
    if opts.ipolicy_bounds_specs is not None:
        policy[IP.ISPECS_MINMAX] = _bounds(opts)
    if opts.ipolicy_std_specs is not None:
        std = split_key_val(STD_SPECS_OPT, opts.ipolicy_std_specs)
        policy[IP.ISPECS_STD] = _parse_spec(std, "std", False)
    if opts.ipolicy_disk_templates is not None:
        policy[IP.IPOLICY_DTS] = parse_list(opts.ipolicy_disk_templates)
    for key, dest in (
        (IP.IPOLICY_VCPU_RATIO, "ipolicy_vcpu_ratio"),
        (IP.IPOLICY_SPINDLE_RATIO, "ipolicy_spindle_ratio"),
    ):
        if getattr(opts, dest) is not None:
            policy[key] = parse_maybe_float(f"--{dest.replace('_', '-')}", getattr(opts, dest))
    return IP.fill_ipolicy(IP.IPOLICY_DEFAULTS, policy) if init else policy


# Output
def format_params_dict_info(own: dict[str, Any], actual: dict[str, Any]) -> dict[str, Any]:
    """Each parameter as its own value, or ``default (value)`` when inherited
    (Ganeti's FormatParamsDictInfo)."""
    out: dict[str, Any] = {}
    for key, value in actual.items():
        if isinstance(value, dict) and value:
            out[key] = format_params_dict_info(own.get(key, {}), value)
        else:
            out[key] = str(own.get(key, f"default ({value})"))
    return out


def format_policy_info(
    custom: dict[str, Any], effective: dict[str, Any] | None, is_cluster: bool
) -> list[tuple[str, Any]]:
    """``info``'s policy section: the group's own values, the rest shown as
    ``default (...)`` from ``effective``; a cluster's policy is all its own."""
    eff: dict[str, Any] = custom if is_cluster or effective is None else effective
    own_minmax = custom.get(IP.ISPECS_MINMAX)
    bounds = [
        [
            (f"{key}/{index}", format_params_dict_info(pair[key] if own_minmax else {}, pair[key]))
            for key in IP.ISPECS_MINMAX_KEYS
        ]
        for index, pair in enumerate(own_minmax or eff[IP.ISPECS_MINMAX])
    ]
    out: list[tuple[str, Any]] = [("bounds specs", bounds)]
    if is_cluster:
        std = custom[IP.ISPECS_STD]
        out.append((IP.ISPECS_STD, format_params_dict_info(std, std)))
    own_dts = custom.get(IP.IPOLICY_DTS)
    out.append(
        (
            "allowed disk templates",
            IP.comma_join(own_dts)
            if own_dts is not None
            else f"default ({IP.comma_join(eff[IP.IPOLICY_DTS])})",
        )
    )
    out += [(key, str(custom.get(key, f"default ({eff[key]})"))) for key in IP.IPOLICY_PARAMETERS]
    return out


def _specs_text(specs: dict[str, Any]) -> str:
    return ",".join(f"{name}={value}" for name, value in sorted(specs.items()))


def ipolicy_command(policy: dict[str, Any], is_group: bool) -> str:
    """The options that re-create the policy's specs (Ganeti's PrintIPolicyCommand)."""
    out = ""
    std = policy.get(IP.ISPECS_STD)
    if not is_group and std:
        out += f" {STD_SPECS_OPT} {_specs_text(std)}"
    first = True
    for pair in policy.get(IP.ISPECS_MINMAX, []):
        low, high = pair.get(IP.ISPECS_MIN), pair.get(IP.ISPECS_MAX)
        if low and high:
            out += f" {BOUNDS_SPECS_OPT} " if first else "//"
            first = False
            out += f"min:{_specs_text(low)}/max:{_specs_text(high)}"
    return out
