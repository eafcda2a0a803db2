"""gnt-cluster renew-crypto: a new RAPI certificate, generated
(``--new-rapi-certificate``) or given as a file (``--rapi-certificate``),
then corral-rapi restarted to serve it; a new cluster domain secret, generated
(``--new-cluster-domain-secret``) or given as a file
(``--cluster-domain-secret``), then sent to every node; a new confd key
(:mod:`corral.cli.renew_hmac`).  Ganeti's other renewals (cluster and node
certificates, SPICE, SSH keys) are refused as not built yet.

Only corral-rapi is restarted, not every daemon as Ganeti does: it is the only
one that uses the certificate; the domain secret is read afresh by each
operation that needs it, so nothing is restarted for it.  cryptography is
imported only when a certificate is handled (the gnt-* commands start fast).
"""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral import errors
from corral.cli import common, renew_hmac

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

    from corral.paths import Paths

_RAPI_DAEMON = "corral-rapi"
# Bounds of a domain secret given as a file: Ganeti makes 40 hex digits; a
# short one would be a weak HMAC key, a huge one is not a secret file.
_SECRET_MIN = 16
_SECRET_LIMIT = 4096

# Ganeti's renew-crypto options that Corral does not build yet: flag, dest,
# the value's name (None: a flag without a value).
_NOT_BUILT = (
    ("--new-cluster-certificate", "new_cluster_cert", None),
    ("--new-node-certificates", "new_node_cert", None),
    ("--new-ssh-keys", "new_ssh_keys", None),
    ("--new-spice-certificate", "new_spice_cert", None),
    ("--spice-certificate", "spice_cert", "FILE"),
    ("--spice-ca-certificate", "spice_cacert", "FILE"),
    ("--ssh-key-type", "ssh_key_type", "TYPE"),
    ("--ssh-key-bits", "ssh_key_bits", "BITS"),
)

# Ganeti's texts (the double space is Ganeti's).
_STARTING = (
    'Updating certificates now. Running "gnt-cluster verify"  is recommended after this operation.'
)
_QUESTION = (
    "This requires all daemons on all nodes to be restarted and may take some time. Continue?"
)
_DONE = (
    "All requested certificates and keys have been replaced."
    ' Running "gnt-cluster verify" now is recommended.'
)


def add_command(sub: Any) -> None:
    """Register ``renew-crypto`` with Ganeti's options."""
    p = common.add_command(
        sub, "renew-crypto", cmd_renew_crypto, "Renews cluster certificates, keys and secrets"
    )
    p.add_argument(
        "--new-rapi-certificate",
        dest="new_rapi_cert",
        action="store_true",
        help="Generate a new self-signed RAPI certificate",
    )
    p.add_argument(
        "--rapi-certificate",
        dest="rapi_cert",
        metavar="FILE",
        help="File containing new RAPI certificate (and its private key)",
    )
    p.add_argument(
        "--new-cluster-domain-secret",
        dest="new_cluster_domain_secret",
        action="store_true",
        help="Create a new cluster domain secret",
    )
    p.add_argument(
        "--cluster-domain-secret",
        dest="cluster_domain_secret",
        metavar="FILE",
        help="Load new cluster domain secret from file",
    )
    common.add_force(p)
    renew_hmac.add_option(p)
    for flag, dest, metavar in _NOT_BUILT:
        if metavar:
            p.add_argument(flag, dest=dest, metavar=metavar, help="Not built in Corral yet")
        else:
            p.add_argument(flag, dest=dest, action="store_true", help="Not built in Corral yet")
    # Ganeti's option for --new-ssh-keys; alone it changes nothing.
    p.add_argument("--no-ssh-key-check", dest="ssh_key_check", action="store_false")
    p.add_argument("-v", "--verbose", action="store_true", help="Verbose output")
    common.add_args(p, "args", "", 0, 0)


def cmd_renew_crypto(opts: argparse.Namespace) -> int:
    """Replace the RAPI certificate and restart corral-rapi, and/or replace the
    cluster domain secret and send it to all nodes (on the master)."""
    refused = [flag for flag, dest, _ in _NOT_BUILT if getattr(opts, dest) not in (None, False)]
    if refused:
        print(
            f"Failure: 'gnt-cluster renew-crypto {' '.join(refused)}' is not built in Corral yet;"
            " only the RAPI certificate, cluster domain secret and confd HMAC key options are",
            file=sys.stderr,
        )
        return C.EXIT_FAILURE
    print(_STARTING)
    if opts.new_rapi_cert and opts.rapi_cert:
        print(
            "Only one of the --new-rapi-certificate and --rapi-certificate"
            " options can be specified at the same time.",
            file=sys.stderr,
        )
        return C.EXIT_FAILURE
    if opts.new_cluster_domain_secret and opts.cluster_domain_secret:
        print(
            "Only one of the --new-cluster-domain-secret and --cluster-domain-secret"
            " options can be specified at the same time.",
            file=sys.stderr,
        )
        return C.EXIT_FAILURE
    pem = None
    if opts.rapi_cert:
        try:
            pem = read_rapi_pem(opts.rapi_cert)
        except errors.X509CertError as err:
            print(f"Unable to load X509 certificate from {opts.rapi_cert}: {err}", file=sys.stderr)
            return C.EXIT_FAILURE
    secret = None
    if opts.cluster_domain_secret:
        try:
            secret = read_domain_secret(opts.cluster_domain_secret)
        except errors.GenericError as err:
            print(
                f"Can't load new cluster domain secret from {opts.cluster_domain_secret}: {err}",
                file=sys.stderr,
            )
            return C.EXIT_FAILURE
    if not opts.force and not common.confirm(_QUESTION):
        return C.EXIT_FAILURE
    if opts.new_rapi_cert or pem is not None:
        _replace_rapi_cert(pem)
    if opts.new_cluster_domain_secret or secret is not None:
        _replace_domain_secret(opts, secret)
    if opts.new_confd_hmac_key:
        renew_hmac.replace_key(opts)
    print(_DONE)
    return C.EXIT_SUCCESS


def read_rapi_pem(filename: str) -> bytes:
    """The content of ``filename`` if it holds a PEM certificate and its
    (unencrypted) private key; X509CertError saying what is wrong otherwise."""
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    try:
        with open(filename, "rb") as file:
            data = file.read()
    except OSError as err:
        raise errors.X509CertError(f"Unable to read certificate: {err.strerror}") from None
    try:
        cert = x509.load_pem_x509_certificate(data)
    except ValueError:
        raise errors.X509CertError(
            "Unable to load certificate: the file holds no valid PEM certificate"
        ) from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:  # a key that needs a password
        raise errors.X509CertError(
            "Unable to load private key: the key is encrypted; give it without a passphrase"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise errors.X509CertError(
            "Unable to load private key: the file holds no valid PEM private key;"
            " it must hold the certificate and its key"
        ) from None
    spki = serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*spki) != cert.public_key().public_bytes(*spki):
        raise errors.X509CertError("The private key does not match the certificate")
    _check_servable(filename)
    return data


def read_domain_secret(filename: str) -> bytes:
    """The content of ``filename`` if it can serve as a cluster domain secret:
    one line of printable ASCII (the form Ganeti's LUs read with
    ReadOneLineFile(strict=True)), at least 16 characters; GenericError else."""
    try:
        with open(filename, "rb") as file:
            data = file.read(_SECRET_LIMIT + 1)
    except OSError as err:
        raise errors.GenericError(err.strerror or str(err)) from None
    lines = data.splitlines()
    secret = lines[0].strip() if lines else b""
    if len(data) > _SECRET_LIMIT:
        raise errors.GenericError(f"the file is longer than {_SECRET_LIMIT} bytes")
    if not secret:
        raise errors.GenericError("No data in one-liner file")
    if any(line.strip() for line in lines[1:]):
        raise errors.GenericError("Too many lines in one-liner file")
    if not all(32 < byte < 127 for byte in secret):
        raise errors.GenericError("the secret must be printable ASCII without blanks")
    if len(secret) < _SECRET_MIN:
        raise errors.GenericError(f"the secret is shorter than {_SECRET_MIN} characters")
    return secret + b"\n"


def _check_servable(filename: str) -> None:
    """X509CertError unless corral-rapi's TLS set-up accepts the file (OpenSSL
    refuses e.g. keys too weak for its security level)."""
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(filename)
    except (ssl.SSLError, OSError) as err:
        reason = str(err.strerror or err).partition(" (_ssl.c")[0]
        raise errors.X509CertError(f"corral-rapi cannot serve it: {reason}") from None


def _replace_rapi_cert(pem: bytes | None) -> None:
    """Write ``pem`` (None: a new self-signed certificate) as rapi.pem while
    corral-rapi is stopped, then start it again; on the master only."""
    print("Gathering cluster information")
    # As Ganeti: asking masterd makes sure this is the master node.
    cluster_name, master = common.get_client().call(
        "QueryConfigValues", ["cluster_name", "master_node"]
    )
    # Only now: a run refused above stays free of the slower imports.
    from corral.bootstrap import start_rapi
    from corral.paths import Paths
    from corral.process.daemons import stop_daemon

    paths = Paths.from_env()
    node_ip = _primary_ip(str(paths.root), master)
    print(f"Stopping daemon '{_RAPI_DAEMON}' on {master}")
    stop_daemon(paths, _RAPI_DAEMON)
    try:
        print("Updating certificates and keys")
        _write(paths, pem, [cluster_name, master], node_ip)
    finally:
        print(f"Starting daemon '{_RAPI_DAEMON}' on {master}")
        start_rapi(paths, node_ip)


def _replace_domain_secret(opts: argparse.Namespace, secret: bytes | None) -> None:
    """Write the domain secret (None: a new random one) on the master, then
    send it to every node with OP_CLUSTER_REDIST_CONF."""
    client = common.get_client()
    # As for the certificate: masterd's answer makes sure this is the master.
    client.call("QueryConfigValues", ["master_node"])
    from corral.crypto.certs import make_domain_secret, write_pem
    from corral.paths import Paths

    print("Updating certificates and keys")
    # write_pem: atomically, mode 0600 (the file holds one line, not PEM).
    write_pem(Paths.from_env().cluster_domain_secret, secret or make_domain_secret())
    print("Copying the cluster domain secret to all nodes")
    op = {**common.common_op_fields(opts), "OP_ID": "OP_CLUSTER_REDIST_CONF"}
    common.poll_job(client, client.submit_job([op]))


def _write(paths: Paths, pem: bytes | None, names: list[str], node_ip: str) -> None:
    from corral.crypto.certs import write_pem, write_rapi_cert

    if pem is not None:
        write_pem(paths.rapi_pem, pem)
        return
    master_ip = common.read_ssconf(str(paths.root), "master_ip") or node_ip
    write_rapi_cert(paths, names, [master_ip, node_ip])


def _primary_ip(root: str, node: str) -> str:
    """The primary address of ``node``, from the ssconf files."""
    for line in (common.read_ssconf(root, "node_primary_ips") or "").splitlines():
        name, _, address = line.partition(" ")
        if name == node and address:
            return address
    raise errors.OpExecError(f"Cannot find the primary address of the master node {node}")
