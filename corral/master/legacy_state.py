"""State files of an older Corral, moved into masterd's durable state at start.

Before the key-value port, the drain flag, the watcher's pause, the join
tokens and the records of operations under way were files in the data
directory.  A cluster upgraded in place keeps them: each is copied into the
durable state, then removed (a crash in between copies it again).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from corral.cmdlib import intents
from corral.paths import Paths
from corral.services import join_tokens
from corral.services.durable import DRAINED, WATCHER_PAUSE, DurableState

log = logging.getLogger(__name__)


def _read(paths: Paths) -> tuple[dict[str, Any], list[Path]]:
    """What the old files hold, as durable state keys, and the files."""
    values: dict[str, Any] = {}
    found: list[Path] = []
    drain = paths.queue_drain_file
    if drain.exists():
        values[DRAINED] = True
        found.append(drain)
    pause = paths.watcher_pause_file
    if pause.exists():
        text = pause.read_text().strip()
        if text.isdigit():
            values[WATCHER_PAUSE] = int(text)
        found.append(pause)
    tokens = paths.data_dir / "join-tokens.json"
    if tokens.exists():
        for token_id, entry in json.loads(tokens.read_text()).items():
            values[join_tokens.PREFIX + token_id] = entry
        found += [tokens, tokens.with_name(tokens.name + ".lock")]
    for record in sorted((paths.data_dir / "instance-intents").glob("*.json")):
        values[intents.PREFIX + record.stem] = json.loads(record.read_text())
        found.append(record)
    return values, found


async def move_into(state: DurableState, paths: Paths) -> None:
    """Copy the old files' state into ``state``, then remove the files."""
    values, found = await asyncio.to_thread(_read, paths)
    for key, value in values.items():
        await state.put(key, value)
    if found:
        log.info("Moved %d state files of an older Corral into the durable state", len(found))
        await asyncio.to_thread(_remove, found)


def _remove(files: list[Path]) -> None:
    for path in files:
        path.unlink(missing_ok=True)
    for directory in {path.parent for path in files if path.suffix == ".json"}:
        if directory.name == "instance-intents" and not any(directory.iterdir()):
            directory.rmdir()
