"""noded's client of corral-metad's control socket (see corral.metad.server)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from corral import errors
from corral.metad.model import InstanceMetadata
from corral.paths import Paths

TIMEOUT = aiohttp.ClientTimeout(total=10)


class MetadError(errors.GenericError):
    """metad refused a call or could not be reached; the message says why."""


async def _call(paths: Paths, method: str, path: str, body: Any = None) -> Any:
    connector = aiohttp.UnixConnector(path=str(paths.metad_socket))
    try:
        async with (
            aiohttp.ClientSession(connector=connector, timeout=TIMEOUT) as session,
            session.request(method, f"http://metad{path}", json=body) as resp,
        ):
            text = await resp.text()
    except (aiohttp.ClientError, TimeoutError) as err:
        reason = str(err) or type(err).__name__
        raise MetadError(f"corral-metad at {paths.metad_socket}: {reason}") from None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise MetadError(f"corral-metad answered {resp.status}: {text.strip()[:200]}")
    if resp.status != 200:
        raise MetadError(str(data.get("error") or f"HTTP {resp.status}"))
    return data


async def publish(paths: Paths, record: dict[str, Any]) -> None:
    """Publish an instance's metadata: ``record`` is ``{"tap": <its communication
    tap>, "ip": <its address on it>, "metadata": InstanceMetadata.to_record()}``."""
    meta = record.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str):
        raise MetadError("The record has no instance name")
    await _call(paths, "PUT", f"/instances/{name}", record)


def record_of(meta: InstanceMetadata, tap: str, ip: str) -> dict[str, Any]:
    """The record :func:`publish` takes for ``meta`` reached from ``ip`` on ``tap``."""
    return {"tap": tap, "ip": ip, "metadata": meta.to_record()}


async def withdraw(paths: Paths, instance_name: str) -> None:
    """Withdraw an instance's metadata (and its secrets); no error if not published."""
    await _call(paths, "DELETE", f"/instances/{instance_name}")


async def progress(paths: Paths, instance_name: str) -> list[str]:
    """The progress lines the instance's install wrote since the last call."""
    data = await _call(paths, "GET", f"/instances/{instance_name}/progress")
    return [str(line) for line in data.get("lines", [])]
