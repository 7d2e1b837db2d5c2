#!/usr/bin/env bash
# Installs every Debian package kvedge's build, tests, benchmarks and ARM cross build need, and the
# server tests' npm packages (tests/server/node, pinned by its package-lock.json, `npm ci`; the build
# and the tests never download anything).
# Idempotent: prints nothing and exits 0 when everything is already present.
# Usage: scripts/install-deps.sh [--no-arm]   (run as root, or with sudo available)
set -euo pipefail

want_arm=1
[[ "${1:-}" == "--no-arm" ]] && want_arm=0

host_pkgs=(cmake g++ make pkg-config libhwy-dev libtbb-dev libmimalloc-dev libgtest-dev
           libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev clang gnuplot-nox ccache
           libpcre2-dev libutf8proc-dev libxxhash-dev libcpp-httplib-dev libedit-dev python3 dpkg-dev file tmux
           chromium)
arm_host_pkgs=(g++-aarch64-linux-gnu qemu-user)
arm_pkgs=(libhwy-dev:arm64 libtbb-dev:arm64 libmimalloc-dev:arm64 libgtest-dev:arm64 libpcre2-dev:arm64
          libcpp-httplib-dev:arm64 libedit-dev:arm64)

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

missing=()
is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in "${host_pkgs[@]}"; do is_installed "$p" || missing+=("$p"); done
# Node runs the server's client tests; any Node >= 20 will do (e.g. NodeSource's), else Debian's.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then missing+=(nodejs npm); fi
if [[ $want_arm -eq 1 ]]; then
  for p in "${arm_host_pkgs[@]}"; do is_installed "$p" || missing+=("$p"); done
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "install-deps: adding the arm64 architecture" >&2
    $SUDO dpkg --add-architecture arm64
    need_update=1
  fi
  for p in "${arm_pkgs[@]}"; do is_installed "$p" || missing+=("$p"); done
fi

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The server tests' npm packages (the official openai client, playwright-core driving Debian's
# chromium), installed into the repository's tests/server/node/node_modules; again after a lock change.
node_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/server/node
if [[ ! -f $node_dir/node_modules/.package-lock.json || $node_dir/package-lock.json -nt $node_dir/node_modules/.package-lock.json ]]; then
  node_major=$(node -p 'process.versions.node.split(".")[0]')
  if [[ $node_major -lt 20 ]]; then
    echo "install-deps: Node $(node --version) is older than 20: the server's client tests will be skipped" >&2
  else
    echo "install-deps: npm ci in $node_dir" >&2
    (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
fi
