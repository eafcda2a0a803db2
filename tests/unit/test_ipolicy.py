"""The instance policy's logic (corral.ipolicy) and its command-line side
(corral.cli.ipolicy): Ganeti 3.0.2's defaults, checks, messages and syntax."""

from __future__ import annotations

import argparse
import copy
from typing import Any

import pytest

from corral import errors
from corral import ipolicy as IP
from corral import paramtypes as PT
from corral.cli import ipolicy as CLI
from corral.cli import optvalues

MIN = {"cpu-count": 1, "disk-count": 1, "disk-size": 1024, "memory-size": 128, "nic-count": 1,
       "spindle-use": 1}  # fmt: skip
MAX = {"cpu-count": 8, "disk-count": 16, "disk-size": 1048576, "memory-size": 32768,
       "nic-count": 8, "spindle-use": 12}  # fmt: skip


def cluster_policy() -> dict[str, Any]:
    return IP.initial_ipolicy({}, ["file", "diskless"])


# Defaults and filling
def test_defaults_are_ganetis() -> None:
    policy = cluster_policy()
    assert policy == {
        "minmax": [{"min": MIN, "max": MAX}],
        "std": MIN,
        "disk-templates": ["diskless", "file"],
        "vcpu-ratio": 4.0,
        "spindle-ratio": 32.0,
    }
    IP.check_syntax(policy, True)


def test_fill_takes_whole_keys_but_std_per_spec() -> None:
    filled = IP.fill_ipolicy(IP.IPOLICY_DEFAULTS, {"std": {"cpu-count": 2}, "vcpu-ratio": 2.0})
    assert filled["std"] == {**MIN, "cpu-count": 2}
    assert filled["vcpu-ratio"] == 2.0
    assert filled["minmax"] == IP.IPOLICY_DEFAULTS["minmax"]
    group = IP.group_ipolicy(cluster_policy(), {"disk-templates": ["file"]})
    assert group["disk-templates"] == ["file"] and group["std"] == MIN


# Changes and their checks (Ganeti's GetUpdatedIPolicy and CheckParameterSyntax)
def test_update_converts_and_merges() -> None:
    new = IP.updated_ipolicy(cluster_policy(), {"vcpu-ratio": "2.5", "std": {"memory-size": "256"}})
    assert new["vcpu-ratio"] == 2.5
    assert new["std"] == {**MIN, "memory-size": 256}


def prereq(change: dict[str, Any], group: bool = False, old: Any = None) -> str:
    with pytest.raises(errors.OpPrereqError) as info:
        IP.updated_ipolicy(old if old is not None else cluster_policy(), change, group)
    assert info.value.ecode == "wrong_input"
    return info.value.message


def test_bad_changes_are_refused_with_ganetis_messages() -> None:
    assert prereq({"colour": 1}) == "Invalid key in new ipolicy: colour"
    assert prereq({"vcpu-ratio": 0}) == "Can't unset ipolicy attribute 'vcpu-ratio' on the cluster'"
    assert prereq({"disk-templates": ["default"]}) == (
        "Can't unset ipolicy attribute 'disk-templates' on the cluster'"
    )
    assert prereq({"vcpu-ratio": "lots"}) == (
        "Invalid value for attribute 'vcpu-ratio': 'lots', error: could not convert string"
        " to float: 'lots'"
    )
    assert prereq({"disk-templates": ["floppy", "file"]}) == (
        "Invalid instance policy: Invalid disk template(s) floppy"
    )
    assert prereq({"std": {"cpu-count": 1}}, group=True) == (
        "std cannot appear in group instance specs"
    )
    assert "minmax must be a list" in prereq({"minmax": {"min": MIN}})


def test_min_above_max_and_std_outside_are_refused() -> None:
    pair = {"min": {**MIN, "cpu-count": 9}, "max": MAX}
    assert prereq({"minmax": [pair]}) == (
        "Invalid instance policy: Invalid specification of min/max values for cpu-count: 9/8"
    )
    assert prereq({"std": {"memory-size": 64}}) == (
        "Invalid instance policy: Invalid std specifications"
    )
    assert prereq({"minmax": [{"min": {"cpu-count": 1}, "max": MAX}]}) == (
        "Invalid instance policy: Missing instance specs parameters for min: disk-count,"
        " disk-size, memory-size, nic-count, spindle-use"
    )
    assert prereq({"minmax": [{"max": MAX}]}) == (
        "Invalid instance policy: Missing instance specification: min"
    )


def test_wrong_value_types_are_type_errors() -> None:
    with pytest.raises(errors.TypeEnforcementError, match="'cpu-count' \\(value x\\) is not a"):
        IP.updated_ipolicy(cluster_policy(), {"std": {"cpu-count": "x"}})
    with pytest.raises(errors.TypeEnforcementError, match="Unknown parameter 'colour'"):
        IP.updated_ipolicy(cluster_policy(), {"minmax": [{"min": {"colour": 1}, "max": MAX}]})
    with pytest.raises(errors.TypeEnforcementError, match="Expected dictionary"):
        IP.updated_ipolicy(cluster_policy(), {"minmax": [["min"]]})


def test_group_policy_keys_can_be_removed() -> None:
    old = {"vcpu-ratio": 2.0, "disk-templates": ["file"]}
    assert IP.updated_ipolicy(old, {"vcpu-ratio": "default"}, group_policy=True) == {
        "disk-templates": ["file"]
    }


def test_allowed_templates_must_be_enabled() -> None:
    IP.check_vs_disk_templates(cluster_policy(), ["file", "diskless"])
    with pytest.raises(errors.OpPrereqError, match="allowed by the ipolicy, but not enabled"):
        IP.check_vs_disk_templates(cluster_policy(), ["file"])


# Violations (Ganeti's ComputeIPolicySpecViolation)
def test_specs_in_range_comply() -> None:
    assert IP.spec_violations(cluster_policy(), 128, 1, [1024], 1, 1, ["file"]) == []


def test_violations_name_the_spec_and_its_range() -> None:
    found = IP.spec_violations(cluster_policy(), 64, 9, [512, 2048], 0, None, ["file"] * 2)
    assert found == [
        "memory-size value 64 is not in range [128, 32768]",
        "cpu-count value 9 is not in range [1, 8]",
        "nic-count value 0 is not in range [1, 8]",
        "disk-size/0 value 512 is not in range [1024, 1048576]",
    ]


def test_disk_templates_and_diskless() -> None:
    policy = {**cluster_policy(), "disk-templates": ["file"]}
    assert IP.spec_violations(policy, None, None, [], None, None, []) == [
        "Disk template diskless is not allowed (allowed templates file)"
    ]
    assert IP.spec_violations(policy, None, None, [1024], None, None, ["plain"]) == [
        "Disk template plain is not allowed (allowed templates: file)"
    ]
    # A diskless instance has no disk count to check.
    assert IP.spec_violations(cluster_policy(), None, None, [], None, None, []) == []


def test_the_pair_with_fewest_violations_counts() -> None:
    policy = cluster_policy()
    big = {"min": {**MIN, "cpu-count": 16}, "max": {**MAX, "cpu-count": 32}}
    policy["minmax"] = [policy["minmax"][0], big]
    assert IP.spec_violations(policy, 128, 20, [1024], 1, 1, ["file"]) == []
    assert IP.spec_violations(policy, 64, 12, [1024], 1, 1, ["file"]) == [
        "memory-size value 64 is not in range [128, 32768]",
        "cpu-count value 12 is not in range [1, 8]",
    ]


def test_disk_size_and_instance_spec_helpers() -> None:
    policy = cluster_policy()
    assert IP.disk_sizes_violations(policy, [1024, 2 * 1048576], ["file"] * 2) == [
        "disk-size/1 value 2097152 is not in range [1024, 1048576]"
    ]
    ispec = {"memory-size": 128, "cpu-count": 1, "disk-size": [1024], "disk-count": 1}
    assert IP.instance_spec_violations(policy, ispec, ["file"]) == [
        "nic-count value 0 is not in range [1, 8]"
    ]
    beparams = {"maxmem": 128, "vcpus": 1, "spindle_use": 1}
    assert IP.instance_violations(policy, beparams, [(1024, "file")], 1) == []


# The command line (Ganeti's option types and CreateIPolicyFromOpts)
def test_option_value_syntax() -> None:
    assert optvalues.unescape_and_split(r"a\,b,c\\,d") == ["a,b", "c\\", "d"]
    parsed = optvalues.split_key_val("-x", "a=1,no_b,-c,d")
    assert parsed == {"a": "1", "b": False, "c": None, "d": True}
    with pytest.raises(errors.ParameterError, match="Duplicate key 'a' in option -x"):
        optvalues.split_key_val("-x", "a=1,a=2")
    assert CLI.multilist_ident_key_val("-o", "min:a=1/max:a=2//min:a=3") == [
        {"min": {"a": "1"}, "max": {"a": "2"}},
        {"min": {"a": "3"}},
    ]
    with pytest.raises(errors.ParameterError, match="Missing value for key 'a'"):
        CLI.multilist_ident_key_val("-o", "min:a")
    with pytest.raises(errors.ParameterError, match="Empty section in option '-o'"):
        CLI.multilist_ident_key_val("-o", "min:a=1/")


@pytest.mark.parametrize(
    ("text", "mib"), [("1", 4), ("512", 512), ("1.5g", 1536), ("2T", 2097152), ("3 MiB", 4)]
)
def test_units_round_up_to_four_mib(text: str, mib: int) -> None:
    assert PT.parse_unit(text) == mib


def options(**given: Any) -> argparse.Namespace:
    names = ["ipolicy_bounds_specs", "ipolicy_std_specs", "ipolicy_disk_templates",
             "ipolicy_vcpu_ratio", "ipolicy_spindle_ratio"]  # fmt: skip
    names += [dest for _, dest, _ in CLI.SPLIT_SPECS]
    return argparse.Namespace(**{name: given.get(name) for name in names})


def test_modify_options_give_only_what_was_asked() -> None:
    assert CLI.create_ipolicy(options(), init=False) == {}
    policy = CLI.create_ipolicy(
        options(
            ipolicy_std_specs="memory-size=1g",
            ipolicy_disk_templates="file,diskless",
            ipolicy_vcpu_ratio="Default",
        ),
        init=False,
    )
    assert policy == {
        "std": {"memory-size": 1024},
        "disk-templates": ["file", "diskless"],
        "vcpu-ratio": "default",
    }


def test_bounds_need_every_spec() -> None:
    with pytest.raises(errors.OpPrereqError, match="Missing parameters in ipolicy spec min"):
        CLI.create_ipolicy(
            options(ipolicy_bounds_specs="min:cpu-count=1/max:cpu-count=2"), init=False
        )
    with pytest.raises(errors.OpPrereqError, match="Invalid key in bounds instance specifications"):
        CLI.create_ipolicy(options(ipolicy_bounds_specs="low:cpu-count=1"), init=False)


def test_init_split_specs_are_filled_from_the_defaults() -> None:
    policy = CLI.create_ipolicy(options(ispecs_mem_size="min=64,std=256"), init=True)
    assert policy["minmax"] == [{"min": {**MIN, "memory-size": 64}, "max": MAX}]
    assert policy["std"] == {**MIN, "memory-size": 256}
    assert policy["vcpu-ratio"] == 4.0
    with pytest.raises(errors.OpPrereqError, match="cannot be specified together"):
        CLI.create_ipolicy(
            options(ispecs_cpu_count="min=1", ipolicy_std_specs="cpu-count=1"), init=True
        )


def test_policy_output() -> None:
    policy = cluster_policy()
    shown = CLI.format_policy_info(policy, None, True)
    assert [key for key, _ in shown] == [
        "bounds specs",
        "std",
        "allowed disk templates",
        "spindle-ratio",
        "vcpu-ratio",
    ]
    assert shown[0][1][0][0] == ("max/0", {k: str(v) for k, v in MAX.items()})
    assert shown[2] == ("allowed disk templates", "diskless, file")
    # A group shows what it inherits as "default (...)".
    group = CLI.format_policy_info({"vcpu-ratio": 2.0}, policy, False)
    assert group[0][1][0][1] == ("min/0", {k: f"default ({v})" for k, v in MIN.items()})
    assert group[1:] == [
        ("allowed disk templates", "default (diskless, file)"),
        ("spindle-ratio", "default (32.0)"),
        ("vcpu-ratio", "2.0"),
    ]


def test_ispecs_command() -> None:
    policy = cluster_policy()
    policy["minmax"].append(copy.deepcopy(policy["minmax"][0]))
    text = CLI.ipolicy_command(policy, False)
    spec = "cpu-count=1,disk-count=1,disk-size=1024,memory-size=128,nic-count=1,spindle-use=1"
    assert text.startswith(f" --ipolicy-std-specs {spec} --ipolicy-bounds-specs min:{spec}/max:")
    assert text.count("//min:") == 1
    assert CLI.ipolicy_command(policy, True).startswith(" --ipolicy-bounds-specs ")
