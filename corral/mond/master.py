"""What mond needs of the master: whether this node is it, and masterd's metrics.

Whether this node is the master comes from its ssconf files (the master's
name, and the node's address among the primary IPs), as noded decides it
elsewhere: never guessed.  The metrics come from masterd over its luxi
socket (``CorralMetrics``): masterd only renders the text.
"""

from __future__ import annotations

import asyncio

from corral import errors
from corral.luxi import protocol
from corral.paths import Paths

# Seconds masterd gets to answer; the most text its answer may be.
TIMEOUT = 10.0
MAX_ANSWER = 64 * 1024 * 1024


def master_of(paths: Paths, address: str) -> tuple[bool, str | None]:
    """Whether this node (listening on ``address``) is the master by its
    ssconf files, and the master's name (None: no ssconf files).  Blocking."""
    try:
        master = paths.ssconf_file("master_node").read_text().strip()
        ips = paths.ssconf_file("node_primary_ips").read_text().splitlines()
    except OSError:
        return False, None
    return any(line.split()[:2] == [master, address] for line in ips), master


async def master_metrics(paths: Paths) -> str:
    """masterd's metrics text; GenericError (NoMasterError, ...) saying why not."""
    try:
        async with asyncio.timeout(TIMEOUT):
            reader, writer = await asyncio.open_unix_connection(
                str(paths.master_socket), limit=MAX_ANSWER
            )
            try:
                writer.write(protocol.encode_request("CorralMetrics", []))
                await writer.drain()
                data = await reader.readuntil(protocol.ETX)
            finally:
                writer.close()
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as err:
        raise errors.NoMasterError(f"Cannot ask the master daemon: {err}") from None
    except TimeoutError:
        raise errors.NoMasterError(f"The master daemon did not answer in {TIMEOUT:g} s") from None
    text = protocol.parse_response(data[:-1])
    if not isinstance(text, str):
        raise errors.ProgrammerError("CorralMetrics answered something else than text")
    return text
