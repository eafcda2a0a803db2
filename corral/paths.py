"""Every filesystem path Corral uses, derived from one root directory.

Production uses ``/``; tests, the demo and benchmarks use a temporary directory
(``CORRAL_ROOT``), so several nodes can run side by side on one machine.  The
layout below ``root`` follows Ganeti's defaults so that hooks and OS scripts
written for Ganeti find what they expect.
"""

from __future__ import annotations

import os
import posixpath

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from pathlib import Path

ROOT_ENV = "CORRAL_ROOT"
OS_SEARCH_PATH_ENV = "CORRAL_OS_SEARCH_PATH"
DEFAULT_OS_SEARCH_PATH = (
    "/srv/ganeti/os",
    "/usr/local/lib/ganeti/os",
    "/usr/lib/ganeti/os",
    "/usr/share/ganeti/os",
)
# Where ExtStorage providers are looked for (Debian's Ganeti ES_SEARCH_PATH), first match wins.
ES_SEARCH_PATH = (
    "/srv/ganeti/extstorage",
    "/usr/local/lib/ganeti/extstorage",
    "/usr/lib/ganeti/extstorage",
    "/usr/share/ganeti/extstorage",
)
# Where iallocator scripts are looked for (Ganeti's IALLOCATOR_SEARCH_PATH), first match wins.
IALLOCATOR_SEARCH_PATH = ("/usr/local/lib/ganeti/iallocators", "/usr/lib/ganeti/iallocators")

# Production locations: the layout below every root, and how paths cross the wire.
DATA_DIR = "/var/lib/ganeti"
RUN_DIR = "/var/run/ganeti"
LOG_DIR = "/var/log/ganeti"
CONF_DIR = "/etc/ganeti"
CONFIG_DB = f"{DATA_DIR}/config.db"
# Where the master's stores live once in etcd (on every master candidate).
STORE_HOME = f"{DATA_DIR}/store-home.json"
MASTER_SOCKET = f"{RUN_DIR}/socket/ganeti-query"


def ssconf_name(key: str) -> str:
    """The production path of the ssconf file ``key``."""
    return f"{DATA_DIR}/ssconf_{key}"


def os_search_names() -> list[str]:
    """Where OS definitions are looked for (production paths), first match wins.

    ``CORRAL_OS_SEARCH_PATH`` (colon-separated) replaces the default, which is
    the search path of Debian's Ganeti packages.
    """
    configured = os.environ.get(OS_SEARCH_PATH_ENV)
    names = configured.split(":") if configured else DEFAULT_OS_SEARCH_PATH
    return [name for name in names if name]


def root_from_env() -> str:
    """The absolute root named by ``CORRAL_ROOT`` (default ``/``)."""
    return os.path.abspath(os.environ.get(ROOT_ENV) or "/")


def below(root: str, production: str) -> str:
    """The production path ``production`` below ``root``, as a string.

    For the gnt-* commands, which stay clear of pathlib (~4 ms of start-up).
    """
    return os.path.join(root, production.lstrip("/"))


class Paths:
    """All paths below one root directory."""

    # A plain class, not a dataclass: the gnt-* commands import this module and
    # dataclasses costs them ~10 ms of start-up.
    __slots__ = ("root",)

    def __init__(self, root: Path) -> None:
        self.root = root

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Paths) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def __repr__(self) -> str:
        return f"Paths({str(self.root)!r})"

    @classmethod
    def from_env(cls) -> Paths:
        """Paths for the root named by ``CORRAL_ROOT`` (default ``/``)."""
        from pathlib import Path  # here: the gnt-* commands import this module

        return cls(Path(root_from_env()))

    def _under(self, production: str) -> Path:
        return self.root / production.lstrip("/")

    # Top-level directories
    @property
    def data_dir(self) -> Path:
        return self._under(DATA_DIR)

    @property
    def run_dir(self) -> Path:
        return self._under(RUN_DIR)

    @property
    def log_dir(self) -> Path:
        return self._under(LOG_DIR)

    @property
    def conf_dir(self) -> Path:
        return self._under(CONF_DIR)

    @property
    def daemon_defaults(self) -> Path:
        """The daemons' extra options (Ganeti's ``/etc/default/ganeti``)."""
        return self._under("/etc/default/ganeti")

    @property
    def hooks_dir(self) -> Path:
        return self.conf_dir / "hooks"

    @property
    def os_search_path(self) -> list[Path]:
        """:func:`os_search_names` below the root."""
        return [self.from_wire(name) for name in os_search_names()]

    @property
    def es_search_path(self) -> list[Path]:
        """:data:`ES_SEARCH_PATH` below the root."""
        return [self.from_wire(name) for name in ES_SEARCH_PATH]

    @property
    def iallocator_search_path(self) -> list[Path]:
        """:data:`IALLOCATOR_SEARCH_PATH` below the root."""
        return [self.from_wire(name) for name in IALLOCATOR_SEARCH_PATH]

    @property
    def os_media_dir(self) -> Path:
        """Where OS images (qcow2 from a URL) and personalization packages are
        kept while they are written, and never longer."""
        return self.data_dir / "os-media"

    @property
    def file_storage_dir(self) -> Path:
        return self._under("/srv/ganeti/file-storage")

    @property
    def shared_file_storage_dir(self) -> Path:
        """Ganeti's default shared file storage directory (sharedfile disks)."""
        return self._under("/srv/ganeti/shared-file-storage")

    @property
    def export_dir(self) -> Path:
        return self._under("/srv/ganeti/export")

    # Files in the data directory
    @property
    def state_db(self) -> Path:
        """The master's small durable state and its mastership (SQLite)."""
        return self.data_dir / "state.db"

    @property
    def store_home(self) -> Path:
        """Where the master's stores live once they left SQLite (corral.state.home)."""
        return self._under(STORE_HOME)

    @property
    def config_db(self) -> Path:
        return self._under(CONFIG_DB)

    @property
    def fence_token(self) -> Path:
        """noded's newest fence token of the cluster's masters (corral.node.fencing)."""
        return self.data_dir / "fence-token"

    @property
    def queue_dir(self) -> Path:
        return self.data_dir / "queue"

    @property
    def queue_db(self) -> Path:
        return self.queue_dir / "queue.db"

    @property
    def watcher_pause_file(self) -> Path:
        return self.data_dir / "watcher.pause"

    @property
    def watcher_pause_seen(self) -> Path:
        """The last watcher pause masterd gave this node (an epoch time): it
        holds while masterd cannot be asked.  Not Ganeti's watcher.pause: an
        older Corral's file of that name is moved into masterd's state."""
        return self.data_dir / "watcher.pause-seen"

    @property
    def queue_drain_file(self) -> Path:
        return self.queue_dir / "drain"

    @property
    def ca_cert(self) -> Path:
        return self.data_dir / "cluster-ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.data_dir / "cluster-ca.key"

    @property
    def server_pem(self) -> Path:
        """noded's certificate and key, signed by the cluster CA."""
        return self.data_dir / "server.pem"

    @property
    def client_pem(self) -> Path:
        """masterd's client certificate and key, signed by the cluster CA."""
        return self.data_dir / "client.pem"

    @property
    def rapi_pem(self) -> Path:
        """corral-rapi's certificate and key (self-signed, as Ganeti's)."""
        return self.data_dir / "rapi.pem"

    @property
    def config_data(self) -> Path:
        """Ganeti's ``config.data``: masterd's read-only JSON export of the
        configuration, kept on master candidates (confd serves it)."""
        return self.data_dir / "config.data"

    @property
    def confd_hmac_key(self) -> Path:
        """The key confd's messages are signed with (Ganeti's ``hmac.key``)."""
        return self.data_dir / "hmac.key"

    @property
    def candidate_files(self) -> tuple[Path, ...]:
        """The files only master candidates keep (the RAPI key and the
        configuration: a node that may become master needs them; the others
        never see them)."""
        return (self.rapi_pem, self.config_data)

    @property
    def rapi_users_dir(self) -> Path:
        return self.data_dir / "rapi"

    @property
    def rapi_users_file(self) -> Path:
        return self.rapi_users_dir / "users"

    @property
    def cluster_domain_secret(self) -> Path:
        return self.data_dir / "cluster-domain-secret"

    def ssconf_file(self, key: str) -> Path:
        return self._under(ssconf_name(key))

    # Run-time files
    @property
    def socket_dir(self) -> Path:
        return self.run_dir / "socket"

    @property
    def uid_pool_dir(self) -> Path:
        return self.run_dir / "uid-pool"

    @property
    def metad_socket(self) -> Path:
        """corral-metad's control socket, fed by noded (Ganeti's METAD_SOCKET)."""
        return self.socket_dir / "ganeti-metad"

    @property
    def confd_endpoint(self) -> Path:
        """Where this node's confd listens (``ADDRESS PORT``), while it does."""
        return self.run_dir / "confd-endpoint"

    @property
    def master_socket(self) -> Path:
        return self._under(MASTER_SOCKET)

    def pid_file(self, daemon: str) -> Path:
        return self.run_dir / f"{daemon}.pid"

    def daemon_log(self, daemon: str) -> Path:
        return self.log_dir / f"{daemon}.log"

    @property
    def hooks_log_dir(self) -> Path:
        return self.log_dir / "hooks"

    # Paths as they cross the wire: each node has its own root, so RPC arguments
    # name files by their production path ("/var/lib/ganeti/..."), which every
    # node maps below its own root.
    def to_wire(self, path: Path) -> str:
        """The production path of ``path`` (a path below this root)."""
        return "/" + path.absolute().relative_to(self.root).as_posix()

    def from_wire(self, name: str) -> Path:
        """The local path below this root of a production path from the wire."""
        if not name.startswith("/"):
            raise ValueError(f"Not an absolute path: {name!r}")
        # normpath drops "..", so the result cannot leave the root.
        return self.root / posixpath.normpath(name).lstrip("/")

    def cluster_dirs(self) -> list[Path]:
        """Directories ``gnt-cluster init`` creates."""
        return [
            self.data_dir,
            self.queue_dir,
            self.run_dir,
            self.socket_dir,
            self.log_dir,
            self.hooks_dir,
            self.os_search_path[0],
            self.file_storage_dir,
            self.export_dir,
        ]
