"""One instance's metadata, as noded hands it to metad and to the config drive.

Everything a guest may learn about itself lives here, typed: the renderers in
corral.metad.trees only reshape it.  Private and secret OS parameters are
:class:`~corral.osdef.spec.Private` values and user-data is :class:`UserData`:
both redact themselves when printed.  Secret parameters are kept only while an
install runs (``installing``); a record without that flag drops them on arrival,
and nothing in this module writes anything anywhere.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, final

from corral import constants as C
from corral.osdef.spec import OsSpec, Visibility

# The name prefix of the communication NIC (Ganeti's instanceCommunicationNicPrefix).
COMMUNICATION_NIC_PREFIX = "ganeti:communication:"
# The address every guest asks for its metadata.
METADATA_ADDRESS = "169.254.169.254"


class RecordError(ValueError):
    """A record that does not describe an instance's metadata: says what is wrong."""


@final
class UserData:
    """An instance's user-data: bytes that may hold secrets, shown redacted."""

    __slots__ = ("_value",)

    def __init__(self, value: bytes) -> None:
        self._value = value

    def reveal(self) -> bytes:
        """The bytes themselves: for the guest and its config drive only."""
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __str__(self) -> str:
        return C.REDACTED

    def __repr__(self) -> str:
        return f"UserData({C.REDACTED!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UserData) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> NoReturn:
        raise TypeError("user-data cannot be pickled")


@dataclass(frozen=True, slots=True)
class Nic:
    """One NIC as the guest configures it; no ``ip`` means DHCP."""

    mac: str
    ip: str | None = None
    network: str | None = None  # CIDR, e.g. "10.0.0.0/24"; None: a /32 (routed NIC)
    gateway: str | None = None
    name: str | None = None

    @property
    def prefixlen(self) -> int:
        """The prefix length of the NIC's address (32 without a network)."""
        return ipaddress.ip_network(self.network, strict=False).prefixlen if self.network else 32

    @property
    def netmask(self) -> str:
        """The dotted netmask of :attr:`prefixlen` (OpenStack's form)."""
        return str(ipaddress.ip_network(f"0.0.0.0/{self.prefixlen}").netmask)

    @property
    def communication(self) -> bool:
        """Whether this is the instance's communication NIC (Ganeti's naming)."""
        return bool(self.name and self.name.startswith(COMMUNICATION_NIC_PREFIX))


@dataclass(frozen=True)
class InstanceMetadata:
    """What one instance may learn about itself."""

    name: str
    uuid: str
    hostname: str
    os: OsSpec
    nics: tuple[Nic, ...] = ()
    user_data: UserData = field(default_factory=lambda: UserData(b""))
    ssh_keys: tuple[str, ...] = ()
    # Node paths metad serves during an install: the OS definition's directory
    # (os/scripts/<name>), the personalization and install packages.
    os_dir: str | None = None
    package: str | None = None
    install_package: str | None = None
    installing: bool = False  # secret parameters are kept (and served) only then

    def __post_init__(self) -> None:
        if not self.installing and any(
            p.visibility is Visibility.SECRET for p in self.os.params.values()
        ):
            public = {k: p for k, p in self.os.params.items() if p.visibility != Visibility.SECRET}
            object.__setattr__(self, "os", OsSpec(self.os.name, public))

    @classmethod
    def of_instance(
        cls, name: str, uuid: str, spec: OsSpec, nics: tuple[Nic, ...]
    ) -> InstanceMetadata:
        """What the guest of instance ``name`` is told: its name as hostname, its
        OS parameters without the guest settings, which become its user-data and
        SSH keys (:mod:`corral.osdef.guest_settings`)."""
        from corral.osdef import guest_settings as G

        return cls(
            name=name,
            uuid=uuid,
            hostname=name,
            os=OsSpec(spec.name, G.without_settings(spec.params)),
            nics=nics,
            user_data=UserData(G.user_data(spec.params)),
            ssh_keys=G.ssh_keys(spec.params),
        )

    @property
    def instance_id(self) -> str:
        """An id that changes whenever what the guest is told changes (cloud-init
        then runs its per-instance steps again).  Secret parameters and the
        install flag are left out: they come and go with one job."""
        return "i-" + hashlib.sha256(_canonical(self)).hexdigest()[:17]

    def to_record(self) -> dict[str, Any]:
        """The model as JSON-able data for metad's control socket (values in clear:
        the socket is root's only)."""
        return {
            **_public_fields(self),
            "os": self.os.to_wire(),
            "user_data": base64.b64encode(self.user_data.reveal()).decode(),
            "installing": self.installing,
        }

    @classmethod
    def from_record(cls, record: object) -> InstanceMetadata:
        """The model a record describes; RecordError saying what is wrong."""
        if not isinstance(record, dict):
            raise RecordError("expected a JSON object")
        try:
            return _from_record(record)
        except (KeyError, TypeError, ValueError) as err:
            if isinstance(err, RecordError):
                raise
            raise RecordError(f"malformed record: {err}") from None


def _public_fields(meta: InstanceMetadata) -> dict[str, Any]:
    return {
        "name": meta.name,
        "uuid": meta.uuid,
        "hostname": meta.hostname,
        "nics": [
            {"mac": n.mac, "ip": n.ip, "network": n.network, "gateway": n.gateway, "name": n.name}
            for n in meta.nics
        ],
        "ssh_keys": list(meta.ssh_keys),
        "os_dir": meta.os_dir,
        "package": meta.package,
        "install_package": meta.install_package,
    }


def _canonical(meta: InstanceMetadata) -> bytes:
    params = {
        k: [p.reveal(), p.visibility.value]
        for k, p in meta.os.params.items()
        if p.visibility is not Visibility.SECRET
    }
    data = {
        **_public_fields(meta),
        "os": [meta.os.name, params],
        "user_data": hashlib.sha256(meta.user_data.reveal()).hexdigest(),
    }
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def _text(record: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:
    value = record.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise RecordError(f"{key!r} must be a non-empty string")
    return value


def _nic(entry: object) -> Nic:
    if not isinstance(entry, dict):
        raise RecordError("each NIC must be a JSON object")
    nic = Nic(
        mac=_text(entry, "mac"),
        ip=_text(entry, "ip", optional=True),
        network=_text(entry, "network", optional=True),
        gateway=_text(entry, "gateway", optional=True),
        name=_text(entry, "name", optional=True),
    )
    for value in (nic.ip, nic.gateway):
        if value is not None:
            ipaddress.IPv4Address(value)
    if nic.network is not None:
        ipaddress.IPv4Network(nic.network, strict=False)
    return nic


def _from_record(record: dict[str, Any]) -> InstanceMetadata:
    from corral import errors

    nics, keys = record.get("nics", []), record.get("ssh_keys", [])
    if not isinstance(nics, list) or not isinstance(keys, list):
        raise RecordError("'nics' and 'ssh_keys' must be lists")
    if not all(isinstance(k, str) and "\n" not in k for k in keys):
        raise RecordError("each SSH key must be one line of text")
    try:
        os_spec = OsSpec.from_wire(record["os"])
    except errors.OpExecError as err:
        raise RecordError(str(err)) from None
    return InstanceMetadata(
        name=_text(record, "name"),
        uuid=_text(record, "uuid"),
        hostname=_text(record, "hostname"),
        os=os_spec,
        nics=tuple(_nic(n) for n in nics),
        user_data=UserData(base64.b64decode(record.get("user_data") or "", validate=True)),
        ssh_keys=tuple(keys),
        os_dir=_text(record, "os_dir", optional=True),
        package=_text(record, "package", optional=True),
        install_package=_text(record, "install_package", optional=True),
        installing=record.get("installing") is True,
    )
