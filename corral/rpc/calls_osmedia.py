"""Node calls for design-os's media: OS images written onto disk 0 and
personalization packages unpacked over it (:mod:`corral.node.osmedia`)."""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict

from corral import constants as C
from corral.rpc.declare import CHANGES, READS, node_call
from corral.rpc.wire import DiskWire, InstanceWire


class ImageProbe(TypedDict):
    """An image's format (raw, qcow2) and the bytes it fills on a disk."""

    format: str
    size: int


class ImageWritten(TypedDict):
    """A finished image write: the image's size and the data bytes written
    (the rest were holes, left as holes)."""

    size: int
    written: int


class PackageWire(TypedDict):
    """A personalization package's URL and basic-auth credentials (secret:
    only on this mutual-TLS wire, never stored or logged)."""

    url: str
    user: NotRequired[str]
    password: NotRequired[str]


@node_call(C.RPC_TMO_FAST, effect=READS)
def os_image_probe(image: str) -> ImageProbe:
    """The format and size of an image (a path on the node or an http(s) URL)."""


@node_call(C.RPC_TMO_1DAY, effect=CHANGES)
def blockdev_image(disk: DiskWire, image: str, token: str) -> ImageWritten:
    """Write an image onto a disk, sparse (Ganeti's call); ``token`` names the
    write for blockdev_image_progress."""


@node_call(C.RPC_TMO_URGENT, effect=READS)
def blockdev_image_progress(token: str) -> list[int] | None:
    """``[bytes done, bytes in all]`` of a running blockdev_image (None: not running)."""


@node_call(C.RPC_TMO_FAST, effect=READS)
def os_package_probe(source: PackageWire) -> None:
    """Check that a personalization package can be fetched and is gzip-compressed."""


@node_call(C.RPC_TMO_SLOW, effect=CHANGES)
def instance_os_package(disk: DiskWire, source: PackageWire) -> dict[str, int]:
    """Fetch a personalization package and unpack it over a disk's filesystem;
    its member and byte counts."""


class HelperStatus(TypedDict):
    """A helper VM: whether it still runs, and the progress lines its install
    reported since the last call (each handed out once)."""

    running: bool
    lines: list[str]


@node_call(C.RPC_TMO_SLOW, effect=CHANGES)
def helper_vm_start(
    inst: InstanceWire, image: str, package: PackageWire | None, reinstall: bool
) -> None:
    """Start an instance's helper VM (design-os's ``install`` mode): its disks
    and NICs, booted read-only from ``image``; its OS scripts (``inst`` carries
    its OS spec, secret parameters included) and ``package`` served by metad."""


# CHANGES: each progress line is handed out once (a deposed master must not take them).
@node_call(C.RPC_TMO_URGENT, effect=CHANGES)
def helper_vm_status(name: str) -> HelperStatus:
    """Whether the instance's helper VM runs, and its new progress lines."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def helper_vm_stop(name: str) -> None:
    """Kill the instance's helper VM if it runs; withdraw its data; remove its files."""
