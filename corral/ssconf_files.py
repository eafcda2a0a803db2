"""What an ssconf file is called and holds, as Ganeti's: the master writes its
own (:mod:`corral.services.ssconf`), noded the ones the master sends."""

from __future__ import annotations

import re

# Ganeti's keys are lower-case words; ``hvparams_xen-pvm`` has a hyphen.
KEY_RE = re.compile(r"^[a-z0-9_-]+$")


def file_data(value: str) -> bytes:
    """A file's content for ``value`` (its lines joined by newlines): a newline
    at the end unless the value is empty (Ganeti's SimpleStore.WriteFiles)."""
    return (value + "\n" if value else "").encode("utf-8")
