"""Creating and destroying a cluster in a root (``gnt-cluster init/destroy``).

Initialisation is all or nothing: if any step fails, what was created is
removed again and the daemons that were started are stopped.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shlex
import shutil
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import diskparams, errors, uidpool
from corral import hypervisors as H
from corral.master_network import FULL_NETMASK, valid_netmask
from corral.osdef import media
from corral.paths import Paths
from corral.storage_names import DEFAULT_ENABLED

if TYPE_CHECKING:
    from corral.storage.templates import StorageDirs

NODED = "corral-noded"
MASTERD = "corral-masterd"
RAPI = "corral-rapi"
METAD = "corral-metad"  # started by noded on demand (corral.node.metad_feed)
_HOSTNAME_RE = re.compile(
    r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$", re.IGNORECASE
)


@dataclass
class InitOptions:
    cluster_name: str
    node_name: str
    node_ip: str | None = None
    master_ip: str | None = None
    secondary_ip: str | None = None
    # The IP version of the nodes' and the master's addresses (4 or 6).
    primary_ip_version: int = 4
    noded_port: int = C.DEFAULT_NODED_PORT
    mac_prefix: str = C.DEFAULT_MAC_PREFIX
    master_netdev: str = "lo"
    # None: the whole address (Ganeti's default, by the IP version).
    master_netmask: int | None = None
    use_external_mip_script: bool = False
    enabled_hypervisors: list[str] = field(default_factory=lambda: list(H.DEFAULT_ENABLED))
    enabled_disk_templates: list[str] = field(default_factory=lambda: list(DEFAULT_ENABLED))
    file_storage_dir: str | None = None
    shared_file_storage_dir: str | None = None
    candidate_pool_size: int = 10
    max_running_jobs: int = C.DEFAULT_MAX_RUNNING_JOBS
    beparams: dict[str, Any] = field(default_factory=dict)
    nicparams: dict[str, Any] = field(default_factory=dict)
    hvparams: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The instance policy asked for; what it lacks comes from Ganeti's defaults.
    ipolicy: dict[str, Any] = field(default_factory=dict)
    # ``[lower, higher]`` uid ranges for security_model=pool.
    uid_pool: list[list[int]] = field(default_factory=list)
    # Whether a guest's own shutdown is reported as USER_down (--user-shutdown).
    enabled_user_shutdown: bool = False
    # -D: accepted at Ganeti's defaults only (see corral.diskparams).
    diskparams: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The image helper VMs boot (--install-image: an absolute path or a URL).
    install_image: str = ""


def check_hostname(name: str, what: str) -> None:
    if not _HOSTNAME_RE.match(name) or len(name) > 253:
        raise errors.OpPrereqError(f"Invalid {what} '{name}': not a valid host name", C.ECODE_INVAL)


def resolve(name: str) -> str:
    """The IPv4 address of a host name, or a ResolverError."""
    try:
        return socket.gethostbyname(name)
    except OSError:
        raise errors.OpPrereqError(
            f"Cannot resolve '{name}'; give its address with --node-ip (and --master-ip)",
            C.ECODE_RESOLVER,
        ) from None


def check_ip(value: str, what: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise errors.OpPrereqError(
            f"Invalid {what} '{value}': not an IP address", C.ECODE_INVAL
        ) from None


def daemon_command(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", f"corral.daemons.{module}", *args]


def _check_ip_versions(opts: InitOptions) -> None:
    """Ganeti's rules: the node's address of the primary IP version; the
    secondary one IPv4 (given, when the primary one is IPv6)."""
    version = opts.primary_ip_version
    if version not in (4, 6):
        raise errors.OpPrereqError(f"Invalid primary ip version: {version}.", C.ECODE_INVAL)
    assert opts.node_ip is not None
    if ipaddress.ip_address(opts.node_ip).version != version:
        raise errors.OpPrereqError(
            f"This host's IP ({opts.node_ip}) is not a valid IPv{version} address.",
            C.ECODE_INVAL,
        )
    assert opts.master_ip is not None
    if ipaddress.ip_address(opts.master_ip).version != version:
        raise errors.OpPrereqError(
            f"The master address ({opts.master_ip}) is not a valid IPv{version} address.",
            C.ECODE_INVAL,
        )
    if opts.secondary_ip is None:
        if version == 6:
            raise errors.OpPrereqError(
                "When using a IPv6 primary address, a valid IPv4 address must be given as"
                " secondary",
                C.ECODE_INVAL,
            )
        opts.secondary_ip = opts.node_ip
    if ipaddress.ip_address(opts.secondary_ip).version != 4:
        raise errors.OpPrereqError(
            f"Secondary IP address ({opts.secondary_ip}) has to be a valid IPv4 address.",
            C.ECODE_INVAL,
        )


def _check_master_netmask(opts: InitOptions) -> None:
    """Ganeti's: a given netmask fits the IP version; none, the whole address."""
    version = opts.primary_ip_version
    if opts.master_netmask is None:
        opts.master_netmask = FULL_NETMASK[version]
    elif not valid_netmask(opts.master_netmask, version):
        raise errors.OpPrereqError(
            f"CIDR netmask ({opts.master_netmask}) not valid for IPv{version} ",
            C.ECODE_INVAL,
        )


def _validate(opts: InitOptions) -> None:
    if opts.candidate_pool_size < 1:  # the opcode parameter's rule (a positive int)
        raise errors.OpPrereqError(
            f"Invalid candidate pool size {opts.candidate_pool_size}: at least one master"
            " candidate is needed",
            C.ECODE_INVAL,
        )
    check_hostname(opts.cluster_name, "cluster name")
    check_hostname(opts.node_name, "node name")
    if opts.install_image:
        media.check_image(opts.install_image, "Install image must be an absolute path or a URL")
    opts.node_ip = (
        check_ip(opts.node_ip, "node address") if opts.node_ip else resolve(opts.node_name)
    )
    if opts.master_ip:
        opts.master_ip = check_ip(opts.master_ip, "master address")
    else:
        family = socket.AF_INET6 if opts.primary_ip_version == 6 else socket.AF_INET
        try:
            found = socket.getaddrinfo(opts.cluster_name, None, family)
            opts.master_ip = str(found[0][4][0])
        except OSError:
            opts.master_ip = opts.node_ip
    opts.secondary_ip = (
        check_ip(opts.secondary_ip, "secondary address") if opts.secondary_ip else None
    )
    _check_ip_versions(opts)
    _check_master_netmask(opts)
    if not 0 < opts.noded_port < 65536:
        raise errors.OpPrereqError(f"Invalid port {opts.noded_port}", C.ECODE_INVAL)
    if not re.match(r"^[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$", opts.mac_prefix):
        raise errors.OpPrereqError(
            f"Invalid MAC address prefix '{opts.mac_prefix}': use three lower-case hex octets"
            " such as aa:00:00",
            C.ECODE_INVAL,
        )
    from corral import capabilities

    capabilities.check_init_names(opts.enabled_hypervisors, opts.enabled_disk_templates)
    uidpool.check(opts.uid_pool)
    _check_ipolicy(opts)
    diskparams.check_init(opts.diskparams)


def _check_node_capabilities(paths: Paths, opts: InitOptions) -> None:
    """This node must serve what the cluster enables (as the master checks
    every node at ``gnt-cluster modify``); asked directly, noded is not running."""
    from corral import capabilities
    from corral.node.capabilities import report
    from corral.storage import templates

    dirs = _storage_dirs(paths, opts)
    for template in map(templates.DISK_TEMPLATES.get, opts.enabled_disk_templates):
        unit = None if template is None else template.capacity_unit(dirs)
        if template is not None and template.file_based and unit is not None:
            # As Ganeti: a storage directory that does not exist yet is made.
            paths.from_wire(unit.key).mkdir(mode=0o750, parents=True, exist_ok=True)
    capabilities.check_reports(
        {opts.node_name: report(paths, templates.capacity_units(dirs))},
        opts.enabled_hypervisors,
        opts.enabled_disk_templates,
    )


def _storage_dirs(paths: Paths, opts: InitOptions) -> StorageDirs:
    """The cluster's storage directories: given, else Ganeti's defaults."""
    from corral.storage.templates import StorageDirs

    return StorageDirs(
        opts.file_storage_dir or paths.to_wire(paths.file_storage_dir),
        opts.shared_file_storage_dir or paths.to_wire(paths.shared_file_storage_dir),
    )


def _check_ipolicy(opts: InitOptions) -> None:
    from corral import ipolicy

    try:
        ipolicy.check_syntax(
            ipolicy.initial_ipolicy(opts.ipolicy, opts.enabled_disk_templates), True
        )
    except errors.ConfigurationError as err:
        raise errors.OpPrereqError(
            f"Invalid instance policy: {err.message}", C.ECODE_INVAL
        ) from None


def _write_config(paths: Paths, opts: InitOptions) -> None:
    # pydantic is needed only here, so it is imported here.
    from corral import params as P
    from corral.config.manager import initial_change
    from corral.ipolicy import initial_ipolicy
    from corral.objects import Cluster, Node, NodeGroup
    from corral.state.sqlite.config import SqliteConfigStore

    assert opts.node_ip and opts.master_ip and opts.secondary_ip and opts.master_netmask
    group = NodeGroup(name=C.DEFAULT_NODEGROUP)
    node = Node(
        name=opts.node_name,
        primary_ip=opts.node_ip,
        secondary_ip=opts.secondary_ip,
        group=group.uuid,
    )
    cluster = Cluster(
        name=opts.cluster_name,
        master_node=node.uuid,
        master_ip=opts.master_ip,
        master_netdev=opts.master_netdev,
        master_netmask=opts.master_netmask,
        use_external_mip_script=opts.use_external_mip_script,
        noded_port=opts.noded_port,
        mac_prefix=opts.mac_prefix,
        file_storage_dir=_storage_dirs(paths, opts).file_storage_dir,
        shared_file_storage_dir=_storage_dirs(paths, opts).shared_file_storage_dir,
        enabled_hypervisors=opts.enabled_hypervisors,
        enabled_disk_templates=opts.enabled_disk_templates,
        candidate_pool_size=opts.candidate_pool_size,
        max_running_jobs=opts.max_running_jobs,
        beparams={"default": P.fill(P.BE_DEFAULTS, P.check_beparams(opts.beparams))},
        nicparams={
            "default": P.fill(P.NIC_DEFAULTS, P.check_params(opts.nicparams, P.NIC_TYPES, "NIC"))
        },
        hvparams={
            hv: P.fill(P.HV_DEFAULTS.get(hv, {}), P.check_hvparams(hv, opts.hvparams.get(hv, {})))
            for hv in opts.enabled_hypervisors
        },
        ipolicy=initial_ipolicy(opts.ipolicy, opts.enabled_disk_templates),
        uid_pool=opts.uid_pool,
        enabled_user_shutdown=opts.enabled_user_shutdown,
        install_image=opts.install_image,
    )
    SqliteConfigStore.create(paths.config_db, initial_change([cluster, group, node]))


def created_files(paths: Paths) -> list[Path]:
    """What init creates and destroy removes (hooks, OS dirs and logs stay)."""
    databases = (paths.config_db, paths.state_db)
    return [
        *(db.with_name(db.name + suffix) for db in databases for suffix in ("", "-wal", "-shm")),
        paths.queue_dir,
        paths.ca_cert,
        paths.ca_key,
        paths.server_pem,
        paths.client_pem,
        paths.rapi_pem,
        paths.cluster_domain_secret,
        paths.confd_hmac_key,
        paths.config_data,
        paths.fence_token,  # the next cluster's masters count their own
        *paths.data_dir.glob("ssconf_*"),
        paths.master_socket,
    ]


def remove_cluster_files(paths: Paths) -> None:
    for path in created_files(paths):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def daemon_args(paths: Paths, daemon: str) -> list[str]:
    """Extra options of ``daemon`` from ``etc/default/ganeti``, as Ganeti's
    daemon-util takes them (``NODED_ARGS="--idle-timeout 30"``, ``MASTERD_ARGS``)."""
    wanted = f"{daemon.upper()}_ARGS"
    try:
        text = paths.daemon_defaults.read_text()
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.removeprefix("export ").strip() == wanted:
            # As the shell: the value unquoted, then split into words.
            return " ".join(shlex.split(value, comments=True)).split()
    return []


def start_daemons(paths: Paths, node_ip: str, port: int) -> None:
    """noded first (masterd asks it), then masterd, then corral-rapi (which
    finds the ssconf files masterd wrote: the master IP it listens on too);
    through systemd where it is in charge (:mod:`corral.process.systemd`)."""
    from corral.process import systemd
    from corral.process.daemons import start_daemon

    if systemd.in_charge(paths):
        systemd.start(paths, NODED, ["--bind", node_ip, "--port", str(port)])
        systemd.start(paths, MASTERD, [])
        systemd.start(paths, RAPI, ["--bind", node_ip])
        return
    env = {"CORRAL_ROOT": str(paths.root)}
    noded = ["--bind", node_ip, "--port", str(port), *daemon_args(paths, "noded")]
    start_daemon(daemon_command("noded", *noded), env)
    start_daemon(daemon_command("masterd", *daemon_args(paths, "masterd")), env)
    start_daemon(rapi_command(paths, node_ip), env)


def start_rapi(paths: Paths, node_ip: str) -> None:
    from corral.process import systemd
    from corral.process.daemons import start_daemon

    if systemd.in_charge(paths):
        systemd.start(paths, RAPI, ["--bind", node_ip])
        return
    start_daemon(rapi_command(paths, node_ip), {"CORRAL_ROOT": str(paths.root)})


def rapi_command(paths: Paths, node_ip: str) -> list[str]:
    """corral-rapi, on the master node's address unless RAPI_ARGS say otherwise."""
    return daemon_command("rapi", "--bind", node_ip, *daemon_args(paths, "rapi"))


def stop_daemons(paths: Paths) -> None:
    """Stop this node's daemons, RAPI first (metad has no unit: noded starts it)."""
    from corral.process import systemd

    by_systemd = systemd.in_charge(paths)
    for daemon in (RAPI, MASTERD, NODED, METAD):
        _stop(paths, daemon, by_systemd=by_systemd and daemon != METAD)


def stop_rapi(paths: Paths) -> None:
    from corral.process import systemd

    _stop(paths, RAPI, by_systemd=systemd.in_charge(paths))


def _stop(paths: Paths, daemon: str, *, by_systemd: bool) -> None:
    """Stop ``daemon``: its unit if ``by_systemd``, then by its pid file
    (a copy started by hand, or any daemon where systemd is not in charge)."""
    from corral.process import systemd
    from corral.process.daemons import stop_daemon

    if by_systemd:
        systemd.stop(daemon)
    stop_daemon(paths, daemon)


def create_cluster(paths: Paths, opts: InitOptions) -> None:
    """Create the cluster's configuration, directories and crypto in
    ``paths.root`` (everything ``init`` does but starting the daemons)."""
    if paths.config_db.exists():
        raise errors.OpPrereqError(
            f"Cluster is already initialised (configuration {paths.config_db} exists)",
            C.ECODE_STATE,
        )
    _validate(opts)
    for directory in paths.cluster_dirs():
        directory.mkdir(parents=True, exist_ok=True)
    os.chmod(paths.data_dir, 0o700)
    _check_node_capabilities(paths, opts)
    try:
        from corral.crypto.certs import create_cluster_crypto

        assert opts.node_ip and opts.master_ip
        create_cluster_crypto(
            paths, opts.cluster_name, opts.node_name, opts.node_ip, opts.master_ip
        )
        _write_config(paths, opts)
    except BaseException:
        remove_cluster_files(paths)
        raise


def init_cluster(paths: Paths, opts: InitOptions) -> None:
    """Create the cluster in ``paths.root`` and start its daemons."""
    create_cluster(paths, opts)
    try:
        assert opts.node_ip
        start_daemons(paths, opts.node_ip, opts.noded_port)
    except BaseException:
        stop_daemons(paths)
        remove_cluster_files(paths)
        raise


def destroy_cluster_files(paths: Paths) -> None:
    """After OP_CLUSTER_DESTROY: stop the daemons and remove the cluster's files."""
    stop_daemons(paths)
    remove_cluster_files(paths)
