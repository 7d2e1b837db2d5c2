#!/usr/bin/env bash
# Installs every Debian package kvedge's build, tests, benchmarks and ARM cross build need.
# Idempotent: prints nothing and exits 0 when everything is already present.
# Usage: scripts/install-deps.sh [--no-arm]   (run as root, or with sudo available)
set -euo pipefail

want_arm=1
[[ "${1:-}" == "--no-arm" ]] && want_arm=0

host_pkgs=(cmake g++ make pkg-config libhwy-dev libtbb-dev libmimalloc-dev libgtest-dev
           libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev clang gnuplot-nox ccache
           libpcre2-dev libutf8proc-dev libxxhash-dev libcpp-httplib-dev libedit-dev python3 dpkg-dev file tmux)
arm_host_pkgs=(g++-aarch64-linux-gnu qemu-user)
arm_pkgs=(libhwy-dev:arm64 libtbb-dev:arm64 libmimalloc-dev:arm64 libgtest-dev:arm64 libpcre2-dev:arm64
          libedit-dev:arm64)

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

missing=()
is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in "${host_pkgs[@]}"; do is_installed "$p" || missing+=("$p"); done
if [[ $want_arm -eq 1 ]]; then
  for p in "${arm_host_pkgs[@]}"; do is_installed "$p" || missing+=("$p"); done
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "install-deps: adding the arm64 architecture" >&2
    $SUDO dpkg --add-architecture arm64
    need_update=1
  fi
  for p in "${arm_pkgs[@]}"; do is_installed "$p" || missing+=("$p"); done
fi

if [[ ${#missing[@]} -eq 0 ]]; then exit 0; fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
