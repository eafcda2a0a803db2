"""gnt-cluster renew-crypto --new-confd-hmac-key: a new confd key (Ganeti's
``hmac.key``) written on the master, then sent to every node with
OP_CLUSTER_REDIST_CONF; each node's confd signs with it as soon as it sees
the new file (corral-noded looks every second), so nothing is
restarted."""

from __future__ import annotations

import argparse

from corral.cli import common

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


def add_option(parser: Any) -> None:
    """Ganeti's ``--new-confd-hmac-key``."""
    parser.add_argument(
        "--new-confd-hmac-key",
        dest="new_confd_hmac_key",
        action="store_true",
        help="Create a new HMAC key for ganeti-confd",
    )


def replace_key(opts: argparse.Namespace) -> None:
    """Write a new key on the master (this node) and send it to every node."""
    client = common.get_client()
    # masterd's answer makes sure this is the master node.
    client.call("QueryConfigValues", ["master_node"])
    from corral.crypto.certs import make_confd_hmac_key, write_pem
    from corral.paths import Paths

    print("Updating certificates and keys")
    write_pem(Paths.from_env().confd_hmac_key, make_confd_hmac_key())
    print("Copying the confd HMAC key to all nodes")
    op = {**common.common_op_fields(opts), "OP_ID": "OP_CLUSTER_REDIST_CONF"}
    common.poll_job(client, client.submit_job([op]))
