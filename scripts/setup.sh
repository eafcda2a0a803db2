#!/usr/bin/env bash
# Set up everything Corral needs on a fresh Debian machine: system packages,
# a virtualenv in .venv and the Python packages.  Safe to run again.
# With --tests, also what the test suite needs: the Debian Python modules that
# Ganeti 3.0.2's own tools import (the conformance suite runs them).
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
command -v python3 >/dev/null || need_pkgs+=(python3)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_pkgs+=(python3-venv)
command -v ip >/dev/null || need_pkgs+=(iproute2)
# the master IP's setup script (as Ganeti's): fping sees whether another machine
# has the address, arping tells the neighbours where it went
command -v fping >/dev/null || need_pkgs+=(fping)
command -v arping >/dev/null || need_pkgs+=(iputils-arping)
if [[ ${1:-} == --tests ]]; then
  command -v unshare >/dev/null || need_pkgs+=(util-linux)
  [[ -x /usr/bin/python3 ]] || need_pkgs+=(python3)
  ganeti_deps=(python3-simplejson python3-pyparsing python3-openssl python3-pyinotify
               python3-pycurl python3-paramiko python3-bitarray python3-psutil)
  /usr/bin/python3 -c 'import simplejson, pyparsing, OpenSSL, pyinotify, pycurl, paramiko, bitarray, psutil' \
    2>/dev/null || need_pkgs+=("${ganeti_deps[@]}")
  # real guests built at test time (tests/helpers/guest.py): ext2 images, the unpacked
  # grub-mkimage's libraries, debootstrap's needs for the Debian guest
  for pkg in e2fsprogs libdevmapper1.02.1 liblzma5 libselinux1 libudev1 wget gpgv \
             debian-archive-keyring udev mount; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg")
  done
  # Ganeti's QA suite runs these on the nodes (tests/qa): fping (env tests), socat
  # (interrupting gnt-debug delay)
  for pkg in fping socat; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg")
  done
  # the dashboard's browser test (selenium drives Debian's chromium-driver)
  [[ -x /usr/lib/chromium/chromium ]] || need_pkgs+=(chromium)
  [[ -x /usr/bin/chromedriver ]] || need_pkgs+=(chromium-driver)
fi
# the kvm hypervisor: QEMU and qemu-img, without the recommended GUI and audio stack
qemu_pkgs=()
command -v qemu-system-x86_64 >/dev/null || qemu_pkgs+=(qemu-system-x86)
command -v qemu-img >/dev/null || qemu_pkgs+=(qemu-utils)
# DHCP on instance communication taps (corral/node/netdev/dhcp.py)
[[ -x /usr/sbin/dnsmasq ]] || qemu_pkgs+=(dnsmasq-base)
# network rules for the users QEMU runs as (corral/node/netrules)
[[ -x /usr/sbin/nft ]] || qemu_pkgs+=(nftables)
if ((${#need_pkgs[@]} + ${#qemu_pkgs[@]})); then
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  echo "Installing Debian packages: ${need_pkgs[*]} ${qemu_pkgs[*]}"
  $SUDO apt-get update -qq
  if ((${#need_pkgs[@]})); then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
  fi
  if ((${#qemu_pkgs[@]})); then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      "${qemu_pkgs[@]}" >/dev/null
  fi
fi
# etcd, the replicated store of master candidates (corral/state/etcd): Corral starts
# its own members, so the package's system service must never run.  policy-rc.d keeps
# the package from starting it; then it is disabled (and masked under systemd).
if [[ ! -x /usr/bin/etcd ]]; then
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  echo "Installing Debian packages: etcd-server"
  own_policy=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    own_policy=1
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod 755 /usr/sbin/policy-rc.d
    trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq etcd-server >/dev/null
  if [[ -n $own_policy ]]; then
    $SUDO rm -f /usr/sbin/policy-rc.d
    trap - EXIT
  fi
fi
if [[ -d /run/systemd/system && $(systemctl is-enabled etcd.service 2>/dev/null) != masked ]]; then
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  $SUDO systemctl mask --now etcd.service >/dev/null
fi
if compgen -G '/etc/rc[2-5].d/S*etcd' >/dev/null; then  # sysvinit: the boot links
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  [[ -d /run/systemd/system ]] || $SUDO /etc/init.d/etcd stop >/dev/null 2>&1 || true
  $SUDO update-rc.d etcd disable >/dev/null
fi
# corral-rapi drops root to this system user (and group) once it has opened its files.
if ! getent passwd gnt-rapi >/dev/null; then
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  echo "Creating system user gnt-rapi"
  $SUDO useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin gnt-rapi
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
