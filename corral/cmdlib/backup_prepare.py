"""OP_BACKUP_PREPARE: what the source cluster of an inter-cluster move hands
to the destination before it exports there (Ganeti's LUBackupPrepare).

For a remote export the primary node makes an X509 key and certificate for
this one move; the result carries the signed handshake, the key's signed
name and the signed certificate, which the destination cluster checks with
the shared cluster domain secret.  A local export needs nothing (None).
"""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.cmdlib.backup_common import check_node_online
from corral.cmdlib.instance_base import InstanceLU
from corral.crypto import rie
from corral.opcodes import backup as opb
from corral.rpc.calls_impexp import x509_cert_create


class LUBackupPrepare(InstanceLU):
    OPCODE = opb.OpBackupPrepare

    cds: bytes

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_INSTANCE] = [self.instance.name]

    async def check_prereq(self) -> None:
        await super().check_prereq()
        check_node_online(self.pnode)
        self.cds = rie.read_domain_secret(self.master.paths)

    async def exec(self) -> Any:
        if self.op.mode != C.EXPORT_MODE_REMOTE:
            return None
        node = self.pnode
        salt = rie.new_salt()
        self.feedback(f"Generating X509 certificate on {node.name}")
        name, cert_pem = await self.master.rpc.run(
            node,
            x509_cert_create(C.RIE_CERT_VALIDITY),
            f"Can't create X509 key and certificate on {node.name}",
        )
        return {
            "handshake": rie.compute_handshake(self.cds),
            "x509_key_name": rie.sign_key_name(self.cds, name, salt),
            "x509_ca": rie.sign_x509_cert(cert_pem, self.cds, salt),
        }
