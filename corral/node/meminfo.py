"""The host's memory, as the node reports it (node_info) and the fake
hypervisor uses it."""

from __future__ import annotations

from pathlib import Path


def read_meminfo(path: Path = Path("/proc/meminfo")) -> dict[str, int]:
    """/proc/meminfo as ``{key: KiB}``."""
    values: dict[str, int] = {}
    for line in path.read_text().splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            values[key] = int(fields[0])
    return values


def memory_info() -> dict[str, int]:
    """Total, free and dom0-used memory in MiB.

    Page cache counts as free, as Ganeti counts it: the kernel gives it back
    when an instance needs the memory.
    """
    mem = read_meminfo()
    total = mem["MemTotal"] // 1024
    free = (mem["MemFree"] + mem.get("Buffers", 0) + mem.get("Cached", 0)) // 1024
    return {"memory_total": total, "memory_free": free, "memory_dom0": total - free}
