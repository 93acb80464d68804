#!/usr/bin/env bash
# Installs what tessera needs on Debian 12 (run as root). Installs only what is missing.
set -euo pipefail
if [[ $# -gt 0 ]]; then
  if [[ $1 == -h || $1 == --help ]]; then
    echo "usage: scripts/install-deps.sh   (no arguments; as root on Debian 12: apt-get installs the missing packages, pip the Python ones into .venv/)"
    exit 0
  fi
  echo "install-deps: unexpected argument '$1' (it takes none; see --help)" >&2
  exit 2
fi
pkgs=(g++ clang clang-tidy cmake ninja-build pkg-config libhwloc-dev libnuma-dev libgtest-dev libtbb-dev libjemalloc-dev libmimalloc-dev libcli11-dev python3-venv redis-tools redis-server liburing-dev libconcurrentqueue-dev nutcracker)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all packages present"
fi

# Python packages (requirements.txt: DuckDB and its TPC-H generator for apps/join; redis-py for
# the server's integration test, apps/server) in .venv/ at the
# repository root, made with Debian's python3; reinstalled only when requirements.txt changed.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.requirements.txt"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "install-deps: creating $venv"
  /usr/bin/python3 -m venv "$venv"
fi
if ! cmp -s "$root/requirements.txt" "$stamp"; then
  echo "install-deps: installing requirements.txt into $venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/requirements.txt"
  cp "$root/requirements.txt" "$stamp"
else
  echo "install-deps: python packages present"
fi
