#!/usr/bin/env bash
# Installs what tessera needs on Debian 12 (run as root). Installs only what is missing.
set -euo pipefail
pkgs=(g++ clang clang-tidy cmake ninja-build pkg-config libhwloc-dev libnuma-dev libgtest-dev libtbb-dev libjemalloc-dev libmimalloc-dev libcli11-dev)
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
