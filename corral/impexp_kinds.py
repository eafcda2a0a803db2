"""The ends of an import/export stream, as the node calls ``import_start`` and
``export_start`` name them; declared once for the master and the nodes.

Stdlib only: the commands may import it.
"""

from typing import Final

DISK: Final = "disk"  # an instance's disk, read or written raw
SCRIPT: Final = "script"  # the OS export script's output / import script's input
FILE: Final = "file"  # a dump file of an export
ZERO: Final = "zero"  # zeros (benchmarks and tests)
DISCARD: Final = "discard"  # dropped (benchmarks and tests)

SOURCES: Final = (DISK, SCRIPT, FILE, ZERO)
DESTINATIONS: Final = (DISK, SCRIPT, FILE, DISCARD)
