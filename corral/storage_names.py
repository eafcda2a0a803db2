"""The names of Ganeti's disk templates: the only place they are spelled out.

Stdlib only and free of slow imports, so the gnt-* commands may import it;
what each template means for Corral is in :mod:`corral.storage.templates`.
"""

DT_DISKLESS = "diskless"
DT_FILE = "file"
DT_SHARED_FILE = "sharedfile"
DT_BLOCK = "blockdev"
DT_PLAIN = "plain"
DT_DRBD = "drbd"
DT_EXT = "ext"
DT_RBD = "rbd"
DT_GLUSTER = "gluster"
# Corral's own: every disk on two nodes, mirrored by QEMU (see
# corral.storage.mirrored).  Ganeti's tools know only Ganeti's names: "drbd",
# its internally mirrored template, asks for it (GANETI_ALIASES).
DT_MIRRORED = "mirrored"

# Ganeti 3.0.2's disk templates (constants.DISK_TEMPLATES), in the order its
# messages list them.
GANETI_DISK_TEMPLATES = (
    DT_SHARED_FILE,
    DT_DISKLESS,
    DT_PLAIN,
    DT_BLOCK,
    DT_EXT,
    DT_RBD,
    DT_DRBD,
    DT_FILE,
    DT_GLUSTER,
)

# The templates Corral knows: Ganeti's and its own.
DISK_TEMPLATE_NAMES = (*GANETI_DISK_TEMPLATES, DT_MIRRORED)
# A Ganeti name Corral serves with a template of its own: what Ganeti's tools
# and RAPI clients send (they cannot name Corral's) is taken as Corral's.
GANETI_ALIASES = {DT_DRBD: DT_MIRRORED}


def canonical_template(name: str) -> str:
    """The template Corral serves for ``name`` (``drbd`` → ``mirrored``)."""
    return GANETI_ALIASES.get(name, name)


# The templates a cluster enables when init is given none (Corral's default:
# Ganeti's would be drbd and plain, which this machine cannot serve).
DEFAULT_ENABLED = (DT_FILE, DT_DISKLESS)

# Ganeti's file drivers (constants.FILE_DRIVER) and the driver of adopted block
# devices (constants.BLOCKDEV_DRIVER_MANUAL): the first item of a logical_id.
FILE_DRIVERS = ("loop", "blktap", "blktap2")
BLOCKDEV_DRIVER_MANUAL = "manual"

# Ganeti's ADOPTABLE_BLOCKDEV_ROOT: adopted devices are named below it.
ADOPTABLE_BLOCKDEV_ROOT = "/dev/disk/"

# Ganeti's storage types (constants.ST_*): what holds a template's disks, the
# first half of a storage unit (the second is its key: a directory, a volume group).
ST_FILE = "file"
ST_SHARED_FILE = "sharedfile"
ST_BLOCK = "blockdev"
ST_DISKLESS = "diskless"
ST_LVM_VG = "lvm-vg"
ST_LVM_PV = "lvm-pv"
ST_RADOS = "rados"
ST_EXT = "ext"
ST_GLUSTER = "gluster"

# The storage type of each of Ganeti's templates (its MAP_DISK_TEMPLATE_STORAGE_TYPE).
STORAGE_TYPES = {
    DT_SHARED_FILE: ST_SHARED_FILE,
    DT_DISKLESS: ST_DISKLESS,
    DT_PLAIN: ST_LVM_VG,
    DT_BLOCK: ST_BLOCK,
    DT_EXT: ST_EXT,
    DT_RBD: ST_RADOS,
    DT_DRBD: ST_LVM_VG,
    DT_FILE: ST_FILE,
    DT_GLUSTER: ST_GLUSTER,
    DT_MIRRORED: ST_FILE,  # each copy is a file in its node's file storage directory
}
