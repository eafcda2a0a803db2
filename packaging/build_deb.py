"""Build Corral's Debian package from the repository: ``corral_<version>-1_amd64.deb``.

    .venv/bin/python packaging/build_deb.py --out DIR

The equivalent of ``dpkg-buildpackage`` kept in the repository, without
debhelper: a tree staged as it will be installed, then ``dpkg-deb --build``.
Debian 12's Python packages are too old for Corral (pydantic 2, aiohttp
3.9), so the package bundles its libraries in a venv at its final path,
``/usr/lib/corral/venv``, made by Debian's ``python3 -m venv`` (its python
is a link to /usr/bin/python3, so it runs once installed): Corral's wheel
and its dependencies' cp311 wheels (the versions of the building venv, the
ones tested), byte-compiled by Debian's python3 for their final paths so that
removing the package leaves no bytecode behind.  The commands in /usr/sbin
run that venv's python: Corral starts its daemons with ``sys.executable``.
The manual pages and the bash completion are generated from the commands'
parsers (``corral.docgen``); the rest comes from ``packaging/debian/``.
"""

from __future__ import annotations

import argparse
import configparser
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = REPO / "packaging" / "debian"
# What the wheel is built from (as tests/integration/test_packages.py).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "corral")
DEBIAN_PYTHON = Path("/usr/bin/python3")
PYTHON_VERSION = "3.11"  # Debian 12's; control's Depends say so too
VENV = Path("/usr/lib/corral/venv")
SITE_PACKAGES = VENV / "lib" / f"python{PYTHON_VERSION}" / "site-packages"
SBIN = Path("/usr/sbin")
UNIT_DIR = Path("/lib/systemd/system")
# Ganeti's unit names, as links to Corral's units (systemctl start ganeti-noded).
UNIT_ALIASES = {
    "ganeti-noded.service": "corral-noded.service",
    "ganeti-luxid.service": "corral-masterd.service",
    "ganeti-wconfd.service": "corral-masterd.service",
    "ganeti-rapi.service": "corral-rapi.service",
}
COMPLETIONS = Path("/usr/share/bash-completion/completions")
# Installed from packaging/debian/: template → its path in the package.
DATA_FILES = {
    "ganeti.default": Path("/etc/default/ganeti"),
    "corral.logrotate": Path("/etc/logrotate.d/corral"),
    "corral.tmpfiles": Path("/usr/lib/tmpfiles.d/corral.conf"),
}
MAINTAINER_SCRIPTS = ("postinst", "prerm", "postrm")


def run(*command: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run ``command``; its output, or SystemExit with what it said."""
    done = subprocess.run(
        [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        said = done.stdout[-3000:] + done.stderr[-3000:]
        sys.exit(f"{' '.join(map(str, command))} failed:\n{said}")
    return done.stdout


def inside(stage: Path, path: Path) -> Path:
    """Where the package's ``path`` lies in the staged tree ``stage``."""
    return stage / path.relative_to("/")


def project_version() -> str:
    """Corral's version, from pyproject.toml."""
    with (REPO / "pyproject.toml").open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


def build_wheel(work: Path) -> Path:
    """Corral's wheel, built from a copy of its sources (no stray bytecode)."""
    source = work / "source"
    source.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(REPO / name, source / name, ignore=ignore)
        else:
            shutil.copy2(REPO / name, source / name)
    run(sys.executable, "-m", "build", "--wheel", "--outdir", work / "dist", source)
    (wheel,) = (work / "dist").glob("corral-*.whl")
    return wheel


def tested_versions(work: Path) -> Path:
    """A pip constraints file: the building venv's versions of everything."""
    frozen = run(sys.executable, "-m", "pip", "freeze", "--exclude-editable")
    pins = [line for line in frozen.splitlines() if "==" in line and not line.startswith("#")]
    path = work / "constraints.txt"
    path.write_text("\n".join(pins) + "\n")
    return path


def make_venv(stage: Path, wheel: Path, constraints: Path) -> Path:
    """The venv with Corral and its dependencies; its site-packages."""
    venv = inside(stage, VENV)
    run(DEBIAN_PYTHON, "-m", "venv", "--without-pip", venv)
    # The activation scripts and pyvenv.cfg's "command" name the staged path
    # (nothing activates a package's venv; python reads only "home").
    for script in (venv / "bin").glob("[Aa]ctivate*"):
        script.unlink()
    config = venv / "pyvenv.cfg"
    kept = [line for line in config.read_text().splitlines() if not line.startswith("command")]
    config.write_text("\n".join(kept) + "\n")
    site = inside(stage, SITE_PACKAGES)
    run(
        sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--only-binary=:all:",
        "--target", site, "-c", constraints, wheel,
    )  # fmt: skip
    # pip's scripts name the building venv's python: write_commands makes ours
    shutil.rmtree(site / "bin", ignore_errors=True)
    return site


def console_scripts(site: Path) -> dict[str, str]:
    """Corral's commands: name → ``module:function``."""
    (entry_points,) = site.glob("corral-*.dist-info/entry_points.txt")
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(entry_points)
    return {name: value.strip() for name, value in parser["console_scripts"].items()}


def write_commands(stage: Path, scripts: dict[str, str]) -> None:
    """A small script per command in /usr/sbin, run by the venv's python (so
    ``sys.executable``, which starts the daemons, is the venv's)."""
    sbin = inside(stage, SBIN)
    sbin.mkdir(parents=True, exist_ok=True)
    for name, target in scripts.items():
        module, function = target.split(":")
        path = sbin / name
        path.write_text(
            f"#!{VENV}/bin/python3\n"
            f"# Corral's {name} (packaging/build_deb.py)\n"
            f"import sys\n\nfrom {module} import {function}\n\nsys.exit({function}())\n"
        )
        path.chmod(0o755)


def write_docs(stage: Path, scripts: dict[str, str], work: Path) -> None:
    """Manual pages (gzipped) and the bash completion, generated by the staged
    venv's python from the commands' parsers; the licence as the copyright."""
    python = inside(stage, VENV) / "bin" / "python3"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    pages = work / "man"
    run(python, "-m", "corral.docgen", "man", pages, env=env)
    man8 = inside(stage, Path("/usr/share/man/man8"))
    man8.mkdir(parents=True)
    for page in sorted(pages.iterdir()):
        # mtime 0 and no name: the same pages make the same bytes
        with (
            (man8 / f"{page.name}.gz").open("wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz,
        ):
            gz.write(page.read_bytes())
    completions = inside(stage, COMPLETIONS)
    run(python, "-m", "corral.docgen", "completion", completions / "corral", env=env)
    for name in scripts:
        (completions / name).symlink_to("corral")
    doc = inside(stage, Path("/usr/share/doc/corral"))
    doc.mkdir(parents=True)
    shutil.copy(REPO / "LICENSE", doc / "copyright")


def write_system_files(stage: Path) -> None:
    """The units (and Ganeti's names for them), /etc/default/ganeti, logrotate, tmpfiles."""
    units = inside(stage, UNIT_DIR)
    units.mkdir(parents=True)
    for template in sorted((TEMPLATES / "units").iterdir()):
        shutil.copy(template, units / template.name)
    for alias, unit in UNIT_ALIASES.items():
        (units / alias).symlink_to(unit)
    for name, path in DATA_FILES.items():
        inside(stage, path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(TEMPLATES / name, inside(stage, path))


def byte_compile(stage: Path) -> None:
    """Bytecode by Debian's python3, naming the final paths in tracebacks."""
    site = inside(stage, SITE_PACKAGES)
    run(DEBIAN_PYTHON, "-m", "compileall", "-q", "-j", "0", "-d", SITE_PACKAGES, site)


def normalize_modes(stage: Path) -> None:
    """Directories 0755, files 0644 or 0755 (executable), whatever the wheels said."""
    for path in [stage, *stage.rglob("*")]:
        if path.is_symlink():
            continue
        if path.is_dir():
            path.chmod(0o755)
        else:
            path.chmod(0o755 if path.stat().st_mode & 0o111 else 0o644)


def write_control(stage: Path, version: str) -> None:
    """DEBIAN/: control (with the installed size), conffiles, maintainer scripts."""
    debian = stage / "DEBIAN"
    debian.mkdir(mode=0o755)
    size_kib = int(run("du", "-sk", "--apparent-size", stage).split()[0])
    control = (TEMPLATES / "control.in").read_text()
    control = control.replace("@VERSION@", version).replace("@INSTALLED_SIZE@", str(size_kib))
    (debian / "control").write_text(control)
    shutil.copy(TEMPLATES / "conffiles", debian / "conffiles")
    (debian / "conffiles").chmod(0o644)
    for script in MAINTAINER_SCRIPTS:
        shutil.copy(TEMPLATES / script, debian / script)
        (debian / script).chmod(0o755)


def build(out: Path) -> Path:
    """Build the package into ``out``; its path."""
    version = f"{project_version()}-1"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="corral-deb-") as tmp:
        work = Path(tmp)
        stage = work / "root"
        wheel = build_wheel(work)
        site = make_venv(stage, wheel, tested_versions(work))
        scripts = console_scripts(site)
        write_commands(stage, scripts)
        write_docs(stage, scripts, work)
        write_system_files(stage)
        byte_compile(stage)
        normalize_modes(stage)
        write_control(stage, version)
        deb = out / f"corral_{version}_amd64.deb"
        run("dpkg-deb", "--root-owner-group", "-Zxz", "--build", stage, deb)
    return deb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the .deb")
    opts = parser.parse_args(argv)
    deb = build(opts.out.resolve())
    print(f"{deb} ({deb.stat().st_size >> 10} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
