"""A sample instance's metadata for corral-metad's tests, with a private and a
secret parameter and private user-data whose values are easy to search for."""

from __future__ import annotations

from corral.metad.model import InstanceMetadata, Nic, UserData
from corral.osdef.spec import OsParam, OsSpec, Visibility

PRIVATE_VALUE = "private-value-7f3a"
SECRET_VALUE = "secret-value-c91e"
USER_DATA = b"#cloud-config\nruncmd: [echo user-data-marker-5d2b]\n"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly test@corral"


def sample(
    name: str = "inst1.example.com",
    *,
    installing: bool = False,
    ip: str = "10.20.0.5",
    comm_ip: str = "169.254.1.5",
    **extra: object,
) -> InstanceMetadata:
    """An instance with a public, a private and a secret OS parameter, two NICs
    (a static one and the communication NIC), user-data and an SSH key."""
    params = {
        "release": OsParam.of("bookworm", Visibility.PUBLIC),
        "token": OsParam.of(PRIVATE_VALUE, Visibility.PRIVATE),
        "password": OsParam.of(SECRET_VALUE, Visibility.SECRET),
    }
    nics = (
        Nic("AA:00:00:00:00:01", ip, "10.20.0.0/24", "10.20.0.1", "main"),
        Nic("aa:00:00:00:00:02", comm_ip, None, None, f"ganeti:communication:{name}"),
    )
    return InstanceMetadata(
        name=name,
        uuid="5e0b2c4e-0000-4000-8000-000000000001",
        hostname=name.split(".")[0],
        os=OsSpec("debootstrap+default", params),
        nics=nics,
        user_data=UserData(USER_DATA),
        ssh_keys=(SSH_KEY,),
        installing=installing,
        **extra,  # type: ignore[arg-type]
    )
