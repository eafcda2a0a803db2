"""The metadata model: redaction, secrets kept only during installs, the
instance id, and the control socket's record format."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from corral.metad.model import InstanceMetadata, RecordError, UserData
from corral.metad.progress import MAX_LINE, ProgressLog
from corral.osdef.spec import Visibility
from tests.helpers.metad import PRIVATE_VALUE, SECRET_VALUE, USER_DATA, sample


def test_printing_the_model_shows_no_private_value() -> None:
    meta = sample(installing=True)
    for shown in (str(meta), repr(meta), f"{meta}", str(meta.to_record()["os"]["name"])):
        assert PRIVATE_VALUE not in shown
        assert SECRET_VALUE not in shown
        assert USER_DATA.decode() not in shown
    assert "<redacted>" in repr(meta)


def test_user_data_refuses_pickling() -> None:
    with pytest.raises(TypeError):
        pickle.dumps(UserData(b"x"))


def test_secrets_are_kept_only_while_installing() -> None:
    assert meta_visibilities(sample(installing=True)) == {"public", "private", "secret"}
    assert meta_visibilities(sample(installing=False)) == {"public", "private"}
    record = sample(installing=True).to_record()
    record["installing"] = False
    assert SECRET_VALUE not in repr(InstanceMetadata.from_record(record).os.script_values())


def meta_visibilities(meta: InstanceMetadata) -> set[str]:
    return {p.visibility.value for p in meta.os.params.values()}


def test_instance_id_follows_the_data_but_not_secrets_or_the_install_flag() -> None:
    base = sample()
    assert base.instance_id == sample().instance_id
    assert base.instance_id.startswith("i-")
    assert sample(installing=True).instance_id == base.instance_id
    assert dataclasses.replace(base, hostname="other").instance_id != base.instance_id
    assert dataclasses.replace(base, user_data=UserData(b"#x")).instance_id != base.instance_id
    assert sample(ip="10.20.0.6").instance_id != base.instance_id
    assert dataclasses.replace(base, ssh_keys=()).instance_id != base.instance_id


def test_record_round_trip() -> None:
    meta = sample(installing=True, os_dir="/srv/ganeti/os/debootstrap")
    again = InstanceMetadata.from_record(meta.to_record())
    assert again == meta
    assert again.os.params["password"].visibility is Visibility.SECRET
    assert again.user_data.reveal() == USER_DATA


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": ""}, "'name' must be a non-empty string"),
        ({"nics": [{"mac": "aa:00:00:00:00:01", "ip": "10.0.0.300"}]}, "malformed record"),
        ({"nics": "eth0"}, "'nics' and 'ssh_keys' must be lists"),
        ({"ssh_keys": ["a\nb"]}, "one line"),
        ({"os": {"name": "x", "params": {"a": {"value": "1", "visibility": "top"}}}}, "visib"),
        ({"user_data": "not base64!"}, "malformed record"),
    ],
)
def test_malformed_records_say_what_is_wrong(change: dict[str, object], message: str) -> None:
    record = {**sample().to_record(), **change}
    with pytest.raises(RecordError, match=message):
        InstanceMetadata.from_record(record)


def test_a_record_must_be_an_object() -> None:
    with pytest.raises(RecordError, match="JSON object"):
        InstanceMetadata.from_record(["x"])


def test_progress_is_bounded_and_says_what_it_dropped() -> None:
    log = ProgressLog(max_lines=3)
    assert log.add("one\n\ntwo\r\nthree\nfour\n" + "x" * 5000) == 5
    assert log.lines() == ["three", "four", "x" * MAX_LINE]
    assert log.take() == ["(2 earlier progress lines dropped)", "three", "four", "x" * MAX_LINE]
    assert log.take() == []
