"""Examples shipped inside the package (so that a wheel or the Debian package
has them): ``os/demo``, a tiny OS definition; ``corral-examples`` installs it."""

from pathlib import Path

OS_DIR = Path(__file__).with_name("os")
