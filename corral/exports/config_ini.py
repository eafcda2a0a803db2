"""An export's ``config.ini``, in Ganeti 3.0.2's format (export version 0).

Written when an export is finalised and read when an instance is imported,
by Corral or by Ganeti: the file is an INI file as Python's ``configparser``
writes it (Ganeti writes it with the same module), with the sections
``export``, ``instance``, ``hypervisor``, ``backend``, ``os`` and
``os_private``.  Values are Ganeti's ``"%s"`` renderings (``None``, ``True``);
when read, the text ``none`` in any case means "no value", as Ganeti's reader
has it.

Private OS parameters are written in the clear, as Ganeti does: an import
needs them and the file is only readable by root (0600, in a 0700 directory).
Secret OS parameters are never stored anywhere, so never written.
"""

from __future__ import annotations

import configparser
import io
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral import params as P
from corral.osdef.spec import Visibility
from corral.services.params import (
    cluster_osparams,
    filled_beparams,
    filled_hvparams,
    filled_nicparams,
)
from corral.storage_names import DT_DISKLESS

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager
    from corral.objects import Instance

EXPORT_VERSION = 0
CONFIG_FILE = "config.ini"
SEC_EXPORT = "export"
SEC_INSTANCE = "instance"
SEC_HYPERVISOR = "hypervisor"
SEC_BACKEND = "backend"
SEC_OS = "os"
SEC_OS_PRIVATE = "os_private"
# How far Ganeti's reader looks for disks and NICs (its MAX_DISKS, MAX_NICS).
MAX_DISKS = 16
MAX_NICS = 8
# Cluster-wide hypervisor parameters (Ganeti's HVC_GLOBALS): an instance may not
# set them, so an export leaves them out or its import would be refused.
HV_GLOBALS = frozenset({"migration_bandwidth", "migration_mode", "migration_port", "xen_cmd"})
NIC_PARAMS = ("link", "mode", "vlan")  # in Ganeti's order of writing
VALUE_NONE = "none"


def _text(value: Any) -> str:
    """Ganeti's rendering of a value; ``%`` doubled, since the file is read with
    interpolation (Ganeti's own writer refuses such values instead)."""
    return str(value).replace("%", "%%")


def dump(
    cfg: ConfigManager,
    inst: Instance,
    source_node_name: str,
    disk_files: list[str],
    compression: str,
    timestamp: int | None = None,
) -> str:
    """The ``config.ini`` of an export of ``inst`` whose disk ``i`` was dumped to
    ``disk_files[i]`` (Ganeti 3.0.2 puts the primary node's UUID in ``source``
    and ``none`` in ``compression``: the dumps are stored uncompressed)."""
    if len(disk_files) != len(inst.disks):
        raise ValueError(f"{len(disk_files)} dump files for {len(inst.disks)} disks")
    cluster = cfg.cluster
    be = filled_beparams(cluster, inst)
    ini = _parser()
    ini[SEC_EXPORT] = {
        "version": str(EXPORT_VERSION),
        "timestamp": str(int(time.time() if timestamp is None else timestamp)),
        "source": _text(source_node_name),
        "os": _text(inst.os),
        "compression": _text(compression),
    }
    ini[SEC_INSTANCE] = _instance_section(cfg, inst, be, disk_files)
    hv = filled_hvparams(cluster, inst)
    ini[SEC_HYPERVISOR] = {k: _text(v) for k, v in hv.items() if k not in HV_GLOBALS}
    ini[SEC_BACKEND] = {k: _text(v) for k, v in be.items()}
    ini[SEC_OS] = {k: _text(v) for k, v in public_osparams(cfg, inst).items()}
    ini[SEC_OS_PRIVATE] = {k: _text(v) for k, v in inst.osparams_private.items()}
    out = io.StringIO()
    ini.write(out)
    return out.getvalue()


def public_osparams(cfg: ConfigManager, inst: Instance) -> dict[str, Any]:
    """The instance's public OS parameters over the cluster's for its OS: what
    Ganeti exports (the cluster's private defaults stay behind)."""
    return {**cluster_osparams(cfg.cluster, inst.os, Visibility.PUBLIC), **inst.osparams}


def _instance_section(
    cfg: ConfigManager, inst: Instance, be: dict[str, Any], disk_files: list[str]
) -> dict[str, str]:
    section = {
        "name": inst.name,
        "maxmem": str(be["maxmem"]),
        "minmem": str(be["minmem"]),
        # Deprecated in Ganeti, still written for older readers.
        "memory": str(be["maxmem"]),
        "vcpus": str(be["vcpus"]),
        "disk_template": inst.disk_template if inst.disks else DT_DISKLESS,
        "hypervisor": inst.hypervisor,
        "tags": " ".join(inst.tags),
    }
    for idx, nic in enumerate(inst.nics):
        nicparams = filled_nicparams(cfg.cluster, nic)
        section[f"nic{idx}_mac"] = nic.mac
        section[f"nic{idx}_ip"] = str(nic.ip)
        section[f"nic{idx}_network"] = str(nic.network)
        section[f"nic{idx}_name"] = str(nic.name)
        for param in NIC_PARAMS:
            section[f"nic{idx}_{param}"] = str(nicparams.get(param))
    section["nic_count"] = str(len(inst.nics))
    for idx, (disk, dump_file) in enumerate(zip(inst.disks, disk_files, strict=True)):
        section[f"disk{idx}_ivname"] = disk.iv_name
        section[f"disk{idx}_dump"] = dump_file
        section[f"disk{idx}_size"] = str(disk.size)
        section[f"disk{idx}_name"] = str(disk.name)
    section["disk_count"] = str(len(inst.disks))
    return {k: _text(v) for k, v in section.items()}


def _parser() -> configparser.ConfigParser:
    # Ganeti's SerializableConfigParser is a plain ConfigParser: same defaults
    # (strict, basic interpolation, lower-cased option names).
    return configparser.ConfigParser()


@dataclass
class ExportDisk:
    """One disk of an export: its dump file in the export directory, MiB."""

    ivname: str | None
    dump: str | None
    size: int
    name: str | None


@dataclass
class ExportNic:
    """One NIC of an export; ``params`` (link, mode, vlan) only without a network."""

    mac: str | None
    ip: str | None
    name: str | None
    network: str | None
    params: dict[str, str | None] = field(default_factory=dict)

    def spec(self) -> dict[str, Any]:
        """The NIC as an instance-creation opcode gives it (Ganeti's import)."""
        out: dict[str, Any] = {"mac": self.mac, "ip": self.ip, "name": self.name}
        if self.network:
            out["network"] = self.network
        else:
            out.update(self.params)
        return out


@dataclass
class ExportInfo:
    """A parsed ``config.ini``; parameter sections keep their text values."""

    version: int
    timestamp: int | None
    source: str | None
    os: str | None
    compression: str
    name: str | None
    disk_template: str | None
    hypervisor: str | None
    tags: list[str]
    nics: list[ExportNic]
    disks: list[ExportDisk]
    hvparams: dict[str, str]
    beparams: dict[str, str]
    osparams: dict[str, str]
    osparams_private: dict[str, str]


def _bad(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(f"Invalid export configuration: {message}", C.ECODE_INVAL)


class _Reader:
    """Ganeti's reading rules: ``none`` is no value, some options may be missing."""

    def __init__(self, ini: configparser.ConfigParser) -> None:
        self.ini = ini

    def get(self, section: str, option: str, *, required: bool = True) -> str | None:
        if not self.ini.has_option(section, option):
            if required:
                raise _bad(f"option '{option}' missing from section [{section}]")
            return None
        value = self.ini.get(section, option)
        return None if value.lower() == VALUE_NONE else value

    def integer(self, section: str, option: str) -> int:
        value = self.ini.get(section, option)
        try:
            return int(value)
        except ValueError:
            raise _bad(f"[{section}] {option} is not a number: {value!r}") from None

    def items(self, section: str) -> dict[str, str] | None:
        return dict(self.ini.items(section)) if self.ini.has_section(section) else None


def parse(text: str) -> ExportInfo:
    """The export described by ``text``; OpPrereqError when it is not a
    version-0 export configuration."""
    ini = _parser()
    try:
        ini.read_string(text)
        return _parse(_Reader(ini))
    except configparser.Error as err:
        raise _bad(str(err).splitlines()[0]) from None


def _parse(r: _Reader) -> ExportInfo:
    for section in (SEC_EXPORT, SEC_INSTANCE):
        if not r.ini.has_section(section):
            raise _bad(f"section [{section}] missing")
    version = r.get(SEC_EXPORT, "version")
    if version is None or not version.strip().lstrip("-").isdigit():
        raise _bad(f"export version {version!r} is not a number")
    if int(version) != EXPORT_VERSION:
        raise errors.OpPrereqError(
            f"Wrong export version {version} (wanted {EXPORT_VERSION})", C.ECODE_ENVIRON
        )
    timestamp = r.get(SEC_EXPORT, "timestamp", required=False)
    tags = r.get(SEC_INSTANCE, "tags", required=False)
    return ExportInfo(
        version=EXPORT_VERSION,
        timestamp=int(timestamp) if timestamp and timestamp.isdigit() else None,
        source=r.get(SEC_EXPORT, "source", required=False),
        os=r.get(SEC_EXPORT, "os", required=False),
        # Ganeti's exports store the dumps uncompressed and say "none".
        compression=r.get(SEC_EXPORT, "compression", required=False) or "none",
        name=r.get(SEC_INSTANCE, "name", required=False),
        disk_template=r.get(SEC_INSTANCE, "disk_template", required=False),
        hypervisor=r.get(SEC_INSTANCE, "hypervisor", required=False),
        tags=tags.split() if tags else [],
        nics=_nics(r),
        disks=_disks(r),
        hvparams=r.items(SEC_HYPERVISOR) or {},
        beparams=_beparams(r),
        osparams=r.items(SEC_OS) or {},
        osparams_private=r.items(SEC_OS_PRIVATE) or {},
    )


def _disks(r: _Reader) -> list[ExportDisk]:
    """As Ganeti: every ``disk<i>_size`` up to MAX_DISKS counts, and the i-th
    disk found takes its dump file from ``disk<i>_dump``."""
    found = [i for i in range(MAX_DISKS) if r.ini.has_option(SEC_INSTANCE, f"disk{i}_size")]
    disks = []
    for pos, idx in enumerate(found):
        size = r.integer(SEC_INSTANCE, f"disk{idx}_size")
        if size < 0:
            raise _bad(f"disk {idx} has a negative size")
        disks.append(
            ExportDisk(
                ivname=r.get(SEC_INSTANCE, f"disk{idx}_ivname", required=False),
                dump=r.get(SEC_INSTANCE, f"disk{pos}_dump", required=False),
                size=size,
                name=r.get(SEC_INSTANCE, f"disk{idx}_name", required=False),
            )
        )
    return disks


def _nics(r: _Reader) -> list[ExportNic]:
    """As Ganeti: NICs up to the first index without a MAC option."""
    nics = []
    for idx in range(MAX_NICS):
        if not r.ini.has_option(SEC_INSTANCE, f"nic{idx}_mac"):
            break
        network = r.get(SEC_INSTANCE, f"nic{idx}_network", required=False)
        params: dict[str, str | None] = {}
        if not network:
            for param in NIC_PARAMS:
                params[param] = r.get(SEC_INSTANCE, f"nic{idx}_{param}", required=param != "vlan")
        nics.append(
            ExportNic(
                mac=r.get(SEC_INSTANCE, f"nic{idx}_mac"),
                ip=r.get(SEC_INSTANCE, f"nic{idx}_ip", required=False),
                name=r.get(SEC_INSTANCE, f"nic{idx}_name", required=False),
                network=network,
                params=params,
            )
        )
    return nics


def _beparams(r: _Reader) -> dict[str, str]:
    """The [backend] section; exports older than it have the values in [instance]."""
    section = r.items(SEC_BACKEND)
    if section is not None:
        return section
    return {
        name: value
        for name in P.BE_TYPES
        if (value := r.get(SEC_INSTANCE, name, required=False)) is not None
    }
