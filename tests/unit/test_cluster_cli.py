"""gnt-cluster's option parsing and output helpers, as Ganeti 3.0.2's."""

from __future__ import annotations

import pytest

from corral import errors
from corral.cli import cluster_opts, gnt_cluster, optvalues
from corral.cli.info import format_grouped_params
from corral.nicesort import nice_sort


def modify_op(*argv: str) -> dict[str, object] | None:
    opts = gnt_cluster.build_parser().parse_args(["modify", *argv])
    return cluster_opts.modify_opcode(opts)


def test_modify_builds_the_opcode() -> None:
    assert modify_op() is None
    assert modify_op("-B", "") is None  # an empty -B asks for nothing, as in Ganeti
    op = modify_op(
        "--ipolicy-vcpu-ratio", "2", "-H", "fake:migration_mode=non-live", "--maintain-node-health",
        "yes", "--uid-pool", "3000,1000-2000", "-C", "5", "--compression-tools", "",
    )  # fmt: skip
    assert op == {
        "OP_ID": "OP_CLUSTER_SET_PARAMS",
        "force": False,
        "ipolicy": {"vcpu-ratio": 2.0},
        "hvparams": {"fake": {"migration_mode": "non-live"}},
        "maintain_node_health": True,
        "uid_pool": [[1000, 2000], [3000, 3000]],
        "candidate_pool_size": 5,
        "compression_tools": ["gzip", "gzip-fast", "gzip-slow"],
    }


def test_modify_value_errors() -> None:
    with pytest.raises(errors.ParameterError, match="Invalid boolean value 'maybe'"):
        modify_op("--prealloc-wipe-disks", "maybe")
    with pytest.raises(errors.OpPrereqError, match="Only one hyphen allowed"):
        modify_op("--uid-pool", "1-2-3")
    with pytest.raises(errors.ParameterError, match="Cannot pass options when removing"):
        modify_op("-H", "no_fake:a=b")
    assert cluster_opts.ident_key_vals("-D", ["-drbd", "no_plain", "file:a=1"]) == {
        "drbd": None,
        "plain": False,
        "file": {"a": "1"},
    }


@pytest.mark.parametrize(
    ("text", "seconds"), [("30", 30), ("5m", 300), ("1h", 3600), ("2w", 1209600)]
)
def test_timespec(text: str, seconds: int) -> None:
    assert optvalues.parse_timespec(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Empty time specification passed"),
        ("h", "Invalid time specification (only suffix passed)"),
        ("5x", "Invalid time specification '5x'"),
        ("ah", "Invalid time specification 'a'"),
    ],
)
def test_bad_timespec(text: str, message: str) -> None:
    with pytest.raises(errors.OpPrereqError) as info:
        optvalues.parse_timespec(text)
    assert info.value.message == message


def test_output_helpers() -> None:
    assert nice_sort(["a10", "a2", "b", "a1"]) == ["a1", "a2", "a10", "b"]
    assert format_grouped_params({"x": {"a": 1, "b": {"c": False}}, "y": None}) == {
        "x": {"a": "1", "b": {"c": "False"}},
        "y": "None",
    }
