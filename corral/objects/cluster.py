"""The cluster object: cluster-wide settings and defaults."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from corral import constants as C
from corral import hypervisors as H
from corral.ipolicy import initial_ipolicy
from corral.objects.base import ConfigObject
from corral.storage_names import DEFAULT_ENABLED


class Cluster(ConfigObject):
    """The cluster's settings: one row."""

    TABLE: ClassVar[str] = "cluster"

    master_node: str
    master_ip: str
    master_netdev: str = "lo"
    # Ganeti's default: the whole address (32 bits, 128 for IPv6; see bootstrap).
    master_netmask: int = 32
    # Whether noded runs the site's master IP script instead of Corral's.
    use_external_mip_script: bool = False
    noded_port: int = C.DEFAULT_NODED_PORT
    mac_prefix: str = C.DEFAULT_MAC_PREFIX
    file_storage_dir: str = ""
    # Ganeti's default; used once sharedfile is enabled.
    shared_file_storage_dir: str = "/srv/ganeti/shared-file-storage"
    enabled_hypervisors: list[str] = Field(default_factory=lambda: list(H.DEFAULT_ENABLED))
    enabled_disk_templates: list[str] = Field(default_factory=lambda: list(DEFAULT_ENABLED))
    hvparams: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # OS (full os+variant name) → hypervisor → parameters, between the cluster's
    # and the instance's own.
    os_hvp: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    beparams: dict[str, dict[str, Any]] = Field(default_factory=dict)
    nicparams: dict[str, dict[str, Any]] = Field(default_factory=dict)
    ndparams: dict[str, Any] = Field(default_factory=dict)
    osparams: dict[str, dict[str, Any]] = Field(default_factory=dict)
    osparams_private_cluster: dict[str, dict[str, Any]] = Field(default_factory=dict)
    candidate_pool_size: int = 10
    max_running_jobs: int = C.DEFAULT_MAX_RUNNING_JOBS
    max_tracked_jobs: int = C.DEFAULT_MAX_TRACKED_JOBS
    modify_etc_hosts: bool = False
    maintain_node_health: bool = False
    default_iallocator: str = ""
    default_iallocator_params: dict[str, Any] = Field(default_factory=dict)
    hidden_os: list[str] = Field(default_factory=list)
    blacklisted_os: list[str] = Field(default_factory=list)
    uid_pool: list[list[int]] = Field(default_factory=list)
    # Whether a guest's own shutdown is reported as USER_down (Ganeti's --user-shutdown).
    enabled_user_shutdown: bool = False
    # The network of instance communication NICs (Ganeti's; "" for none).
    instance_communication_network: str = ""
    # The disk image helper VMs boot to run untrusted OS scripts (Ganeti's
    # --install-image: an absolute path on the nodes or a URL; "" for none).
    install_image: str = ""
    # The instance policy, always complete (see corral.ipolicy); a configuration
    # written before Corral had one gets Ganeti's defaults.
    ipolicy: dict[str, Any] = Field(default_factory=dict)
    # Corral sets up no SSH between nodes (nodes join over TLS); the key type and
    # size are Ganeti's defaults, kept for its tools.
    modify_ssh_setup: bool = False
    ssh_key_type: str = "rsa"
    ssh_key_bits: int = 2048
    # Corral's own: the master candidates run etcd members, which follow them
    # (corral.services.etcd_members).  Off until the stores move to etcd.
    etcd_members: bool = False

    @model_validator(mode="after")
    def _complete_ipolicy(self) -> Cluster:
        if not self.ipolicy:
            self.ipolicy = initial_ipolicy({}, self.enabled_disk_templates)
        return self
