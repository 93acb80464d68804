#!/usr/bin/env bash
# The main job: installs what is missing, builds the bench preset (Release, -march=native) and runs
# the YCSB benchmark of the key-value store, tessera against the thread baseline, side by side.
# Extra arguments go to `tessera-bench ycsb` (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset bench >/dev/null
cmake --build --preset bench -j "$(nproc)" --target tessera-bench
exec build/bench/bench/tessera-bench ycsb "$@"
