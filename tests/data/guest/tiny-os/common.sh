# Shared by the corral-tiny scripts, which run with the OS directory as cwd.
# The disk: GRUB's boot code in the MBR, GRUB's core.img up to 1 MiB, then
# partition 1: an ext2 file system, reached without loop devices or mounts
# (mke2fs and debugfs take the offset).
FS_OFFSET=1048576
MARKER_FILE=/corral-disk-marker

die() {
  echo "corral-tiny: $*" >&2
  exit 1
}

size_of() {
  if [ -b "$1" ]; then blockdev --getsize64 "$1"; else stat -c %s "$1"; fi
}

# debugfs's name for partition 1 of disk $1.
fs_spec() {
  echo "$1?offset=$FS_OFFSET"
}

# $1 as 4 little-endian bytes.
le32() {
  v=$1
  for _ in 1 2 3 4; do
    printf "\\$(printf %o $((v & 255)))"
    v=$((v >> 8))
  done
}

# GRUB's configuration for host name $1 (boot from the disk: no kernel_path).
grub_cfg() {
  printf 'linux /boot/vmlinuz console=ttyS0 corral.hostname=%s %s\n' "$1" "${OSP_KERNEL_ARGS:-}"
  printf 'initrd /boot/initrd.img\nboot\n'
}

need_disk() {
  [ "${DISK_COUNT:-0}" -ge 1 ] && [ -n "${DISK_0_PATH:-}" ] ||
    die "needs a disk with a path (DISK_0_PATH is not set)"
}
