"""OP_CLUSTER_RENEW_CRYPTO, as Ganeti's LUClusterRenewCrypto: new node
certificates (:mod:`corral.services.node_certs`); SSH keys only where the
cluster manages SSH, which a Corral cluster never does (its nodes join
without SSH), so that part says so, as Ganeti's does."""

from __future__ import annotations

from collections.abc import Callable

from corral import constants as C
from corral import errors
from corral.cmdlib.base import ALL_SET, LogicalUnit
from corral.opcodes import cluster as opc
from corral.services import node_certs

# Ganeti's SSH_KEY_VALID_BITS: each key type's default size and the sizes it takes.
_KEY_BITS: dict[str, tuple[int, Callable[[int], bool]]] = {
    "dsa": (1024, lambda bits: bits == 1024),
    "rsa": (2048, lambda bits: bits >= 768),
    "ecdsa": (384, lambda bits: bits in (256, 384, 521)),
}


def ssh_key_bits(key_type: str, bits: int | None, old_type: str, old_bits: int) -> int:
    """Ganeti's DetermineKeyBits: the size to use; OpPrereqError if the type does not take it."""
    default, valid = _KEY_BITS[key_type]
    if bits is None:
        bits = old_bits if key_type == old_type else default
    if not valid(bits):
        raise errors.OpPrereqError(
            f"Invalid key type and bit size combination: {key_type} with {bits} bits",
            C.ECODE_INVAL,
        )
    return bits


class LUClusterRenewCrypto(LogicalUnit[opc.OpClusterRenewCrypto]):
    """Renews the nodes' certificates (and says why SSH keys are not)."""

    OPCODE = opc.OpClusterRenewCrypto
    REQ_BGL = False

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODE] = ALL_SET

    async def check_prereq(self) -> None:
        cluster = self.cfg.cluster
        key_type = self.op.ssh_key_type or cluster.ssh_key_type
        ssh_key_bits(key_type, self.op.ssh_key_bits, cluster.ssh_key_type, cluster.ssh_key_bits)

    async def exec(self) -> None:
        if self.op.node_certificates:
            self.feedback("Renewing Node SSL certificates")
            await node_certs.renew(self.master, self.feedback, self.warn)
        if self.op.renew_ssh_keys:
            # modify_ssh_setup is always false on Corral: its nodes join without SSH.
            self.feedback(
                "Cannot renew SSH keys if the cluster is configured to not modify the SSH setup."
            )
