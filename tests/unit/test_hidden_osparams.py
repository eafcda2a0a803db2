"""Which OS parameter values are scrubbed: private and secret ones, wherever set."""

from __future__ import annotations

from corral.cmdlib.instance_utils import hidden_osparams, merged_osparams
from corral.objects import Cluster
from corral.opcodes.base import from_dict, scrub


def cluster() -> Cluster:
    return Cluster(
        name="cluster.example.com",
        master_node="n1",
        master_ip="127.0.0.1",
        osparams={"os": {"mirror": "http://m", "seed": "public-seed"}},
        osparams_private_cluster={"os": {"seed": "cluster-seed", "key": "k3y"}},
    )


def test_the_source_that_wins_decides() -> None:
    cl = cluster()
    # Cluster private "seed" beats cluster public; instance public "key" beats cluster private.
    public, private, secret = {"key": "shown"}, {"note": "n0te"}, {"token": "t0ken"}
    merged = merged_osparams(cl, "os+default", public, private, secret)
    assert merged == {
        "mirror": "http://m",
        "seed": "cluster-seed",
        "key": "shown",
        "note": "n0te",
        "token": "t0ken",
    }
    assert hidden_osparams(cl, "os+default", public, private, secret) == ["note", "seed", "token"]


def test_opcode_hidden_values_hold_private_and_secret_ones_longest_first() -> None:
    op = from_dict(
        {
            "OP_ID": "OP_INSTANCE_REINSTALL",
            "instance_name": "i1",
            "osparams": {"shown": "visible"},
            "osparams_private": {"note": "ab"},
            "osparams_secret": {"token": "abcd"},
        }
    )
    assert op.hidden_values() == ["abcd", "ab"]
    assert scrub("got abcd and ab", op.hidden_values()) == "got <redacted> and <redacted>"


def test_nested_private_cluster_parameters_are_hidden() -> None:
    op = from_dict(
        {"OP_ID": "OP_CLUSTER_SET_PARAMS", "osparams_private_cluster": {"os": {"key": "k3y"}}}
    )
    assert op.hidden_values() == ["k3y"]
