"""What a master candidate keeps to become the master once the stores live in
etcd (corral.node.candidate_files): given with the store home last, taken
away with the node's own certificate as its client certificate again."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral import errors
from corral.crypto.certs import cert_info, make_ca, make_signed_cert, write_node_cert, write_pem
from corral.node.candidate_files import forget_master_files, write_master_files
from corral.paths import Paths
from corral.state import home


def test_a_candidate_gets_the_files_and_a_demoted_node_loses_them(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    ca_cert, ca_key = make_ca("candidate-files-ca", 2)
    write_pem(paths.ca_cert, ca_cert, private=False)
    write_node_cert(paths, ca_cert, ca_key, "node2.example.com", "127.0.98.2")
    write_pem(paths.client_pem, paths.server_pem.read_bytes())  # as a node joins
    masterd, masterd_key = make_signed_cert(
        ca_cert, ca_key, "corral-masterd", 2, server=False, client=True
    )
    where = home.EtcdHome("/corral/u/", ("https://127.0.98.1:2379",), 7)

    write_master_files(paths, where, ca_key, masterd + masterd_key)
    assert home.read(paths.store_home) == where
    assert paths.ca_key.read_bytes() == ca_key
    assert cert_info(paths.client_pem)["subject"] == "corral-masterd"
    assert {p.stat().st_mode & 0o777 for p in (paths.ca_key, paths.client_pem)} == {0o600}

    forget_master_files(paths)
    assert not paths.store_home.exists() and not paths.ca_key.exists()
    assert cert_info(paths.client_pem)["subject"] == "node2.example.com"


def test_the_store_home_says_sqlite_on_the_master_and_bad_ones_are_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store-home.json"
    back = home.SqliteHome("node1.example.com", 42)
    assert home.to_wire(back) == {
        "kind": "sqlite",
        "master": "node1.example.com",
        "moved_at_serial": 42,
    }
    home.write(path, back)
    assert home.read(path) == back
    # An etcd home is written as it always was (no kind): older masters read it.
    where = home.EtcdHome("/corral/u/", ("https://127.0.98.1:2379",), 7)
    assert "kind" not in home.to_wire(where)
    assert home.of_wire(home.to_wire(where)) == where
    path.write_text('{"kind": "sqlite", "master": "", "moved_at_serial": 1}')
    with pytest.raises(errors.ConfigurationError, match="restore it from another master"):
        home.read(path)
