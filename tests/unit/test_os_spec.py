"""The OS spec: parameters merged as Ganeti's SimpleFillOS, each with its
visibility; what is hidden follows from the data and redacts itself."""

from __future__ import annotations

import json
import pickle

import pytest

from corral import constants as C
from corral import errors
from corral.objects import Cluster
from corral.opcodes.base import from_dict, scrub
from corral.osdef.spec import OsParam, OsSpec, Private, Visibility
from corral.services.params import os_spec


def cluster() -> Cluster:
    return Cluster(
        name="cluster.example.com",
        master_node="n1",
        master_ip="127.0.0.1",
        osparams={"os": {"mirror": "http://m", "suite": "old"}, "os+default": {"suite": "new"}},
        osparams_private_cluster={"os": {"key": "k3y"}},
    )


def test_each_visibility_fills_over_the_clusters_defaults_of_that_visibility() -> None:
    spec = os_spec(cluster(), "os+default", {"arch": "x"}, {"key": "mine"}, {"token": "t0ken"})
    assert spec.name == "os+default"
    assert spec.script_values() == {
        "mirror": "http://m",
        "suite": "new",  # the variant's default over the base OS's
        "arch": "x",
        "key": "mine",  # the instance's private value over the cluster's
        "token": "t0ken",
    }
    visibility = {k: p.visibility for k, p in spec.params.items()}
    assert visibility == {
        "mirror": Visibility.PUBLIC,
        "suite": Visibility.PUBLIC,
        "arch": Visibility.PUBLIC,
        "key": Visibility.PRIVATE,
        "token": Visibility.SECRET,
    }
    assert sorted(spec.hidden_values()) == ["mine", "t0ken"]


def test_without_private_parameters_only_public_ones_are_filled() -> None:
    # As Ganeti's SimpleFillOS without os_params_private (what queries show).
    assert os_spec(cluster(), "os", {}).script_values() == {"mirror": "http://m", "suite": "old"}


@pytest.mark.parametrize(
    ("public", "private", "secret", "where"),
    [
        ({"key": "shown"}, {}, {}, "'key' at public and private"),
        ({}, {}, {"key": "s"}, "'key' at private and secret"),
        ({"t": "1"}, {"t": "2"}, {"t": "3"}, "'t' at public and private and secret"),
    ],
)
def test_a_parameter_at_two_visibilities_is_refused(
    public: dict[str, str], private: dict[str, str], secret: dict[str, str], where: str
) -> None:
    # Ganeti's SimpleFillOS refuses it too ("Cannot assign multiple values").
    with pytest.raises(errors.OpPrereqError) as caught:
        os_spec(cluster(), "os", public, private, secret)
    assert caught.value.ecode == C.ECODE_INVAL
    assert f"Cannot assign multiple values to OS parameters: {where} visibility" in str(
        caught.value
    )


def test_an_existing_instance_s_conflict_runs_with_the_more_hidden_value() -> None:
    spec = os_spec(cluster(), "os", {"key": "shown"}, {}, strict=False)
    assert spec.params["key"] == OsParam(Private("k3y"), Visibility.PRIVATE)


def test_private_values_redact_themselves_wherever_shown() -> None:
    spec = os_spec(cluster(), "os", {"arch": "x"}, {"note": "n0te"}, {"token": "t0ken"})
    param = spec.params["token"]
    for shown in (
        str(spec),
        repr(spec),
        f"{param.value}",
        f"{param.value:>20}",
        str(param),
        json.dumps(spec.shown()),
        json.dumps(spec.params, default=str),
    ):
        assert "n0te" not in shown and "t0ken" not in shown
    assert spec.shown() == {
        "mirror": "http://m",
        "suite": "old",
        "arch": "x",
        "key": C.REDACTED,  # the cluster's private default
        "note": C.REDACTED,
        "token": C.REDACTED,
    }
    assert param.reveal() == "t0ken"
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(spec)
    # Stores and wires encode JSON without a fallback: a private value put
    # there by mistake fails the write instead of leaking.
    with pytest.raises(TypeError, match="not JSON serializable"):
        json.dumps({"token": param.value})


def test_the_wire_carries_values_and_visibilities_and_comes_back_equal() -> None:
    spec = os_spec(cluster(), "os", {"n": 3}, {"note": "n0te"}, {"token": "t0ken"})
    wire = spec.to_wire()
    assert wire["params"]["token"] == {"value": "t0ken", "visibility": "secret"}
    assert wire["params"]["n"] == {"value": "3", "visibility": "public"}  # scripts get text
    assert OsSpec.from_wire(json.loads(json.dumps(wire))) == spec


@pytest.mark.parametrize(
    "wire",
    [
        {"name": "os"},
        {"name": 1, "params": {}},
        {"name": "os", "params": {"a": {"value": "v", "visibility": "hidden"}}},
        {"name": "os", "params": {"a": {"value": 3, "visibility": "public"}}},
        {"name": "os", "params": {"a": "v"}},
    ],
)
def test_a_malformed_wire_spec_is_refused(wire: object) -> None:
    with pytest.raises(errors.OpExecError, match="Malformed OS"):
        OsSpec.from_wire(wire)  # type: ignore[arg-type]


def test_a_parameter_keeps_a_private_value_private() -> None:
    assert OsParam.of(Private("p"), Visibility.SECRET) == OsParam(Private("p"), Visibility.SECRET)
    assert OsParam.of(Private("p"), Visibility.PUBLIC).value == "p"


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
