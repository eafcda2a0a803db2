"""An instance's metadata rendered as the trees guests read over HTTP.

- Ganeti's ``/ganeti/latest/...`` (also ``/latest/...`` without the provider,
  as Ganeti's metad routes it): ``meta_data.json``, ``os/parameters.json`` in
  Ganeti's layout (``{"name": [value, "public"|"private"|"secret"]}``),
  ``os/scripts/<name>``, ``os/package``, ``os/os-install-package``.  Its
  ``read`` and ``write`` need metad's state and are the server's.
- NoCloud below ``/nocloud/`` (``ds=nocloud-net;s=http://169.254.169.254/nocloud/``),
  also what the ``cidata`` config drive holds.
- OpenStack below ``/openstack`` (cloud-init gives up unless ``/openstack`` answers).
- A minimal EC2 tree below ``/latest/``.

Every function here is pure: the model in, bytes (or a node file to stream) out.
"""

from __future__ import annotations

import functools
import ipaddress
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corral.metad.model import METADATA_ADDRESS, InstanceMetadata, Nic

TEXT = "text/plain; charset=utf-8"
JSON_TYPE = "application/json"
# The OS scripts an install may fetch (Ganeti's list).
OS_SCRIPTS = ("create", "export", "import", "rename", "verify")
# The OpenStack versions listed at /openstack: cloud-init falls back to "latest".
OPENSTACK_VERSIONS = ("latest",)
GANETI_PREFIXES = ("/ganeti/latest/", "/latest/")
NOCLOUD_FILES = ("meta-data", "user-data", "vendor-data", "network-config")


@dataclass(frozen=True, slots=True)
class Document:
    """A rendered answer."""

    body: bytes
    content_type: str = TEXT


@dataclass(frozen=True, slots=True)
class NodeFile:
    """A file on the node that the server streams (OS scripts, packages)."""

    path: str


Answer = Document | NodeFile
Renderer = Callable[[InstanceMetadata], Answer | None]


def _json(data: Any) -> Document:
    return Document(json.dumps(data, indent=1, sort_keys=True).encode() + b"\n", JSON_TYPE)


def _lines(*lines: str) -> Document:
    return Document("".join(f"{line}\n" for line in lines).encode())


def _yaml_scalar(text: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar: no quoting rules of our own.
    return json.dumps(text)


# Ganeti's tree


def ganeti_meta_data(meta: InstanceMetadata) -> dict[str, Any]:
    """Ganeti's ``meta_data.json`` (empty in Ganeti 3.0.2; here the instance's identity)."""
    return {
        "instance_id": meta.instance_id,
        "name": meta.name,
        "uuid": meta.uuid,
        "hostname": meta.hostname,
        "os": meta.os.name,
        "nics": [_nic_fields(nic) for nic in meta.nics],
        "public_keys": list(meta.ssh_keys),
    }


def _nic_fields(nic: Nic) -> dict[str, Any]:
    return {
        "mac": nic.mac,
        "ip": nic.ip,
        "network": nic.network,
        "gateway": nic.gateway,
        "name": nic.name,
    }


def os_parameters(meta: InstanceMetadata) -> dict[str, list[str]]:
    """``os/parameters.json`` in Ganeti's layout: each name to ``[value, visibility]``.
    Secret parameters are in the model (so here) only while an install runs."""
    return {key: [p.reveal(), p.visibility.value] for key, p in sorted(meta.os.params.items())}


def _file(path: str | None) -> NodeFile | None:
    return NodeFile(path) if path else None


def _script(meta: InstanceMetadata, name: str) -> NodeFile | None:
    if name not in OS_SCRIPTS or not meta.os_dir:
        return None
    return NodeFile(f"{meta.os_dir.rstrip('/')}/{name}")


_GANETI: dict[str, Renderer] = {
    "meta_data.json": lambda m: _json(ganeti_meta_data(m)),
    "os/parameters.json": lambda m: _json(os_parameters(m)),
    "os/package": lambda m: _file(m.package),
    "os/os-install-package": lambda m: _file(m.install_package),
}


# NoCloud


def nocloud_meta_data(meta: InstanceMetadata) -> bytes:
    """NoCloud's ``meta-data`` (YAML): instance id, hostname, SSH keys."""
    lines = [
        f"instance-id: {_yaml_scalar(meta.instance_id)}",
        f"local-hostname: {_yaml_scalar(meta.hostname)}",
    ]
    if meta.ssh_keys:
        lines.append("public-keys:")
        lines.extend(f"  - {_yaml_scalar(key)}" for key in meta.ssh_keys)
    return "".join(f"{line}\n" for line in lines).encode()


def network_config(meta: InstanceMetadata) -> dict[str, Any]:
    """Netplan-style network-config version 2, each NIC matched by its MAC address."""
    ethernets: dict[str, Any] = {}
    for index, nic in enumerate(meta.nics):
        entry: dict[str, Any] = {"match": {"macaddress": nic.mac.lower()}}
        if nic.ip is None:
            entry["dhcp4"] = True
        else:
            entry["dhcp4"] = False
            entry["addresses"] = [f"{nic.ip}/{nic.prefixlen}"]
            if nic.gateway:
                # Not a default route in "routes": cloud-init renders those for
                # ifupdown (Debian's images) as "route add", a command they lack.
                entry["gateway4"] = nic.gateway
            routes = []
            if nic.communication and not _on_link(nic, METADATA_ADDRESS):
                # The host side of a routed tap: reachable on the link, no gateway.
                routes.append({"to": f"{METADATA_ADDRESS}/32", "scope": "link"})
            if routes:
                entry["routes"] = routes
        ethernets[f"nic{index}"] = entry
    return {"version": 2, "ethernets": ethernets}


def _on_link(nic: Nic, address: str) -> bool:
    return ipaddress.ip_address(address) in ipaddress.ip_network(
        f"{nic.ip}/{nic.prefixlen}", strict=False
    )


def nocloud_files(meta: InstanceMetadata) -> dict[str, bytes]:
    """NoCloud's files by name: what ``/nocloud/`` serves and the config drive holds.
    ``vendor-data`` is always there (cloud-init retries a missing one for 11 s)."""
    return {
        "meta-data": nocloud_meta_data(meta),
        "user-data": meta.user_data.reveal(),
        "vendor-data": b"",
        # JSON is YAML: cloud-init reads it as it is.
        "network-config": json.dumps(network_config(meta), indent=1).encode() + b"\n",
    }


# OpenStack


def openstack_meta_data(meta: InstanceMetadata) -> dict[str, Any]:
    """OpenStack's ``meta_data.json`` (cloud-init takes ``uuid`` as the instance id)."""
    return {
        "uuid": meta.instance_id,
        "name": meta.name,
        "hostname": meta.hostname,
        "launch_index": 0,
        "availability_zone": None,
        "public_keys": {f"key-{i}": key for i, key in enumerate(meta.ssh_keys)},
        "meta": {},
    }


def openstack_network_data(meta: InstanceMetadata) -> dict[str, Any]:
    """OpenStack's ``network_data.json``: one link per NIC, static or DHCP."""
    links, networks = [], []
    for index, nic in enumerate(meta.nics):
        link = f"nic{index}"
        links.append({"id": link, "type": "phy", "ethernet_mac_address": nic.mac.lower()})
        network: dict[str, Any] = {"id": f"network{index}", "link": link}
        if nic.ip is None:
            network["type"] = "ipv4_dhcp"
        else:
            network.update(type="ipv4", ip_address=nic.ip, netmask=nic.netmask, routes=[])
            if nic.gateway:
                # cloud-init's own key (it takes "gateway" from a network as it
                # is), not the spec's default route: see network_config.
                network["gateway"] = nic.gateway
        networks.append(network)
    return {"links": links, "networks": networks, "services": []}


def _user_data(meta: InstanceMetadata) -> Document | None:
    # No user-data is a 404 for OpenStack and EC2 (cloud-init takes it so).
    return Document(meta.user_data.reveal(), "application/octet-stream") if meta.user_data else None


_OPENSTACK_FILES: dict[str, Renderer] = {
    "meta_data.json": lambda m: _json(openstack_meta_data(m)),
    "network_data.json": lambda m: _json(openstack_network_data(m)),
    "user_data": _user_data,
    "vendor_data.json": lambda m: _json({}),
}


# EC2


def _ec2_keys(meta: InstanceMetadata, rest: str) -> Answer | None:
    if not rest:
        return _lines(*(f"{i}=key-{i}" for i in range(len(meta.ssh_keys))))
    index, _, leaf = rest.partition("/")
    if not index.isdigit() or int(index) >= len(meta.ssh_keys):
        return None
    if not leaf:
        return _lines("openssh-key")
    return _lines(meta.ssh_keys[int(index)]) if leaf == "openssh-key" else None


_EC2: dict[str, Renderer] = {
    "meta-data": lambda m: _lines("instance-id", "local-hostname", "public-keys/"),
    "meta-data/instance-id": lambda m: Document(m.instance_id.encode()),
    "meta-data/local-hostname": lambda m: Document(m.hostname.encode()),
    "user-data": _user_data,
}


def _nocloud_file(name: str, meta: InstanceMetadata) -> Document:
    return Document(nocloud_files(meta)[name])


def _static() -> dict[str, Renderer]:
    table: dict[str, Renderer] = {}
    for prefix in GANETI_PREFIXES:
        table.update({prefix + key: fn for key, fn in _GANETI.items()})
    for name in NOCLOUD_FILES:
        table[f"/nocloud/{name}"] = functools.partial(_nocloud_file, name)
    table["/openstack"] = lambda m: _lines(*OPENSTACK_VERSIONS)
    for version in OPENSTACK_VERSIONS:
        table[f"/openstack/{version}"] = lambda m: _lines(*_OPENSTACK_FILES)
        table.update({f"/openstack/{version}/{k}": fn for k, fn in _OPENSTACK_FILES.items()})
    table.update({f"/latest/{key}": fn for key, fn in _EC2.items()})
    return table


_TABLE = _static()
_EC2_KEYS = "/latest/meta-data/public-keys"


def canonical(path: str) -> str:
    """``path`` as the trees name it (no trailing slash)."""
    return path.rstrip("/") or "/"


def lookup(meta: InstanceMetadata, path: str) -> Answer | None:
    """The answer to ``GET path`` for the instance ``meta``; None: not found."""
    path = canonical(path)
    renderer = _TABLE.get(path)
    if renderer is not None:
        return renderer(meta)
    if path == _EC2_KEYS or path.startswith(_EC2_KEYS + "/"):
        return _ec2_keys(meta, path[len(_EC2_KEYS) + 1 :])
    for prefix in GANETI_PREFIXES:
        if path.startswith(prefix + "os/scripts/"):
            return _script(meta, path[len(prefix + "os/scripts/") :])
    return None


def _paths(meta: InstanceMetadata) -> list[str]:
    """Every path of ``meta``'s trees, canonical (the keys and scripts included)."""
    keys = [f"{_EC2_KEYS}/{i}" for i in range(len(meta.ssh_keys))]
    scripts = [f"{p}os/scripts/{name}" for p in GANETI_PREFIXES for name in OS_SCRIPTS]
    return [*_TABLE, _EC2_KEYS, *keys, *(f"{key}/openssh-key" for key in keys), *scripts]


def tree(meta: InstanceMetadata) -> dict[str, Answer]:
    """All of ``meta``'s answers by canonical path, rendered once (by
    :func:`lookup`): what the server answers from until the next publish."""
    answers = {path: lookup(meta, path) for path in _paths(meta)}
    return {path: found for path, found in answers.items() if found is not None}
