"""The install appliance's pieces outside a VM: its OS parameters, read from
metad's ``os/parameters.json`` by its awk program under Debian's busybox (as
the appliance runs it), become the OSP_* variables the OS interface defines,
every value intact."""

from __future__ import annotations

import subprocess
from pathlib import Path

from corral.metad import trees
from corral.metad.model import InstanceMetadata
from corral.osdef.spec import OsParam, OsSpec, Visibility
from tests.helpers.appliance import SOURCE
from tests.helpers.guest import busybox

VALUES = {
    "release": "bookworm",
    "quoted": 'it\'s "quoted" and $(not run) `either` \\ back',
    "multi-line": "one\ntwo\tthree",
    "unicode": "café ☃",
    "empty": "",
}


def test_parameters_become_osp_variables(tmp_path: Path) -> None:
    params = {name: OsParam.of(value, Visibility.SECRET) for name, value in VALUES.items()}
    meta = InstanceMetadata("i", "u", "i", OsSpec("os", params), installing=True)
    document = trees.tree(meta)["/ganeti/latest/os/parameters.json"]
    assert isinstance(document, trees.Document)
    (tmp_path / "parameters.json").write_bytes(document.body)
    # Each variable printed NUL-terminated: values may hold newlines.
    names = "RELEASE QUOTED MULTI_LINE UNICODE EMPTY"
    script = (
        f'eval "$(awk -f {SOURCE / "json-params.awk"} {tmp_path / "parameters.json"})"'
        f'; for v in {names}; do eval "printf \'%s\\\\0\' \\"\\$OSP_$v\\""; done'
    )
    out = subprocess.run(
        [str(busybox()), "sh", "-c", script], capture_output=True, check=True
    ).stdout
    assert out.decode().split("\0")[:-1] == list(VALUES.values())
