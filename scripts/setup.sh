#!/usr/bin/env bash
# Set up everything Corral needs on a fresh Debian machine: system packages,
# a virtualenv in .venv and the Python packages.  Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
command -v python3 >/dev/null || need_pkgs+=(python3)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_pkgs+=(python3-venv)
command -v ip >/dev/null || need_pkgs+=(iproute2)
if ((${#need_pkgs[@]})); then
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  echo "Installing Debian packages: ${need_pkgs[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
fi
stamp=.venv/.corral-installed
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # compat mode: a plain path entry, which starts faster than an import hook
  .venv/bin/python -m pip install -q -e '.[dev]' --config-settings editable_mode=compat
  touch "$stamp"
fi
