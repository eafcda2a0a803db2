"""Finding and validating OS definitions in the OS search path.

An OS is a directory named after it.  It is valid when it shares an API
version with Corral (10, 15, 20; the highest common one is used) and has the
files that version requires: executable ``create``, ``export``, ``import``,
``rename``; ``verify`` and ``parameters.list`` from API 20.  ``variants.list``
(API 15+) and ``os_version`` are optional.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUPPORTED_API_VERSIONS = (10, 15, 20)
API_FILE = "ganeti_api_version"
VARIANTS_FILE = "variants.list"
PARAMETERS_FILE = "parameters.list"
VERSION_FILE = "os_version"
SCRIPTS = ("create", "export", "import", "rename")
VERIFY_SCRIPT = "verify"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class InvalidOS(Exception):
    """The OS directory is not a usable OS definition; the message says why."""


@dataclass
class OSDefinition:
    """A valid OS definition found on a node."""

    name: str
    path: Path
    api_versions: list[int]
    variants: list[str] = field(default_factory=list)
    parameters: list[tuple[str, str]] = field(default_factory=list)
    os_version: str = ""
    # Untrusted OSes (create_untrusted only) are recognised but not installable here.
    trusted: bool = True

    @property
    def api_version(self) -> int:
        """The highest API version both sides support."""
        return max(v for v in self.api_versions if v in SUPPORTED_API_VERSIONS)

    def script(self, name: str) -> Path:
        return self.path / name

    def to_wire(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "api_versions": self.api_versions,
            "variants": self.variants,
            "parameters": [list(p) for p in self.parameters],
            "os_version": self.os_version,
            "trusted": self.trusted,
        }


def split_name(full_name: str) -> tuple[str, str | None]:
    """``"debian+minimal"`` → ``("debian", "minimal")``; no variant → None."""
    if "+" in full_name:
        name, variant = full_name.split("+", 1)
        return name, variant
    return full_name, None


def _read_lines(path: Path) -> list[str]:
    """Non-empty lines without ``#`` comments."""
    lines = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def _api_versions(os_dir: Path) -> list[int]:
    api_file = os_dir / API_FILE
    if not api_file.is_file():
        raise InvalidOS(f"'{API_FILE}' file is missing")
    versions = []
    for line in _read_lines(api_file):
        try:
            versions.append(int(line))
        except ValueError:
            raise InvalidOS(f"'{API_FILE}' holds '{line}', which is not a version number") from None
    if not versions:
        raise InvalidOS(f"'{API_FILE}' is empty")
    if not set(versions) & set(SUPPORTED_API_VERSIONS):
        raise InvalidOS(
            f"API version mismatch: the OS supports {versions}, Corral supports"
            f" {list(SUPPORTED_API_VERSIONS)}"
        )
    return versions


def _check_script(os_dir: Path, name: str) -> None:
    path = os_dir / name
    try:
        st = path.stat()
    except OSError:
        raise InvalidOS(f"script '{name}' is missing") from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidOS(f"script '{name}' is not a regular file")
    if not st.st_mode & stat.S_IXUSR:
        raise InvalidOS(f"script '{name}' is not executable")


def _parameters(os_dir: Path) -> list[tuple[str, str]]:
    params_file = os_dir / PARAMETERS_FILE
    if not params_file.is_file():
        raise InvalidOS(f"'{PARAMETERS_FILE}' file is missing (required by API 20)")
    params = []
    for number, raw in enumerate(params_file.read_text(errors="replace").splitlines(), 1):
        line = raw.strip()
        if not line:
            raise InvalidOS(f"'{PARAMETERS_FILE}' line {number} is empty")
        parts = line.split(None, 1)
        params.append((parts[0].lower(), parts[1] if len(parts) > 1 else ""))
    return params


def load_os(os_dir: Path) -> OSDefinition:
    """Validate one OS directory; raises InvalidOS with the reason."""
    if not os_dir.is_dir():
        raise InvalidOS(f"'{os_dir}' is not a directory")
    versions = _api_versions(os_dir)
    api = max(v for v in versions if v in SUPPORTED_API_VERSIONS)
    trusted = (os_dir / "create").exists() or not (os_dir / "create_untrusted").exists()
    for script in SCRIPTS:
        _check_script(os_dir, script if script != "create" or trusted else "create_untrusted")
    variants: list[str] = []
    params: list[tuple[str, str]] = []
    if api >= 15 and (os_dir / VARIANTS_FILE).is_file():
        variants = _read_lines(os_dir / VARIANTS_FILE)
    if api >= 20:
        _check_script(os_dir, VERIFY_SCRIPT)
        params = _parameters(os_dir)
    os_version = ""
    if (os_dir / VERSION_FILE).is_file():
        lines = (os_dir / VERSION_FILE).read_text(errors="replace").splitlines()
        os_version = lines[0].strip() if lines else ""
    return OSDefinition(os_dir.name, os_dir, versions, variants, params, os_version, trusted)


def find_os(search_path: list[Path], name: str) -> OSDefinition:
    """The first directory named ``name`` in the search path, validated."""
    if not _NAME_RE.match(name):
        raise InvalidOS(f"'{name}' is not a valid OS name")
    for base in search_path:
        candidate = base / name
        if candidate.is_dir():
            return load_os(candidate)
    raise InvalidOS(f"OS dir not found in search path {':'.join(map(str, search_path))}")


def diagnose(search_path: list[Path]) -> list[dict[str, Any]]:
    """Every OS in the search path: valid ones with details, invalid with the reason.

    The first directory holding a name wins, as for ``find_os``.
    """
    seen: dict[str, dict[str, Any]] = {}
    out = []
    for base in search_path:
        try:
            names = sorted(os.listdir(base))
        except OSError:
            continue
        for name in names:
            if not (base / name).is_dir():
                continue
            if name in seen:
                seen[name]["shadowed"].append(_shadowed(base / name))
                continue
            try:
                out.append({"valid": True, "error": "", **load_os(base / name).to_wire()})
            except (InvalidOS, OSError) as err:
                out.append(
                    {
                        "name": name,
                        "path": str(base / name),
                        "valid": False,
                        "error": str(err),
                        "api_versions": [],
                        "variants": [],
                        "parameters": [],
                        "os_version": "",
                        "trusted": True,
                    }
                )
            out[-1]["shadowed"] = []
            seen[name] = out[-1]
    return out


def _shadowed(os_dir: Path) -> list[Any]:
    """``[path, valid, error]`` of a directory hidden by an earlier one of that name."""
    try:
        load_os(os_dir)
    except (InvalidOS, OSError) as err:
        return [str(os_dir), False, str(err)]
    return [str(os_dir), True, ""]
