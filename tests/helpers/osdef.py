"""OS definitions for tests: directories of real shell scripts."""

from __future__ import annotations

from pathlib import Path

from corral.paths import Paths

OK_SCRIPT = "#!/bin/sh\nexit 0\n"


def make_os(
    paths: Paths,
    name: str,
    *,
    api_versions: tuple[int, ...] = (20,),
    variants: tuple[str, ...] | None = ("default",),
    parameters: dict[str, str] | None = None,
    scripts: dict[str, str] | None = None,
    os_version: str | None = None,
) -> Path:
    """An OS definition under the root's first OS directory.

    ``scripts`` overrides the default scripts (which succeed); ``variants``
    None writes no variants.list; ``parameters`` maps name → description.
    """
    os_dir = paths.os_search_path[0] / name
    os_dir.mkdir(parents=True, exist_ok=True)
    (os_dir / "ganeti_api_version").write_text("".join(f"{v}\n" for v in api_versions))
    if variants is not None:
        (os_dir / "variants.list").write_text("".join(f"{v}\n" for v in variants))
    if max(api_versions) >= 20:
        params = parameters or {}
        (os_dir / "parameters.list").write_text(
            "".join(f"{key} {doc}\n" for key, doc in params.items())
        )
    if os_version is not None:
        (os_dir / "os_version").write_text(os_version + "\n")
    for script in ("create", "export", "import", "rename", "verify"):
        path = os_dir / script
        path.write_text((scripts or {}).get(script, OK_SCRIPT))
        path.chmod(0o755)
    return os_dir
