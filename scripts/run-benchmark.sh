#!/usr/bin/env bash
# The main job: installs what is missing, builds the bench preset (Release, -march=native) and runs
# the YCSB benchmark of the key-value store, tessera against the thread baseline and oneTBB, side
# by side: three rounds in which the implementations take turns, the table reporting each one's
# median (about 4-5 minutes on 2 cores). One round alone is at the mercy of the machine's noisy
# phases: on the 2-core VM a single round once put oneTBB ahead of tessera at 2 workers, which
# five rounds in turns did not repeat (tessera ahead in every round).
# Extra arguments go to `tessera-bench ycsb` (try --help) and override these defaults, e.g.
# `--repeat 1` for one round, or `--implementation all` to add tessera without prefetching.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset bench >/dev/null
cmake --build --preset bench -j "$(nproc)" --target tessera-bench
defaults=(--repeat 3 --implementation tessera,threads,tbb)
echo "run-benchmark: tessera-bench ycsb ${defaults[*]} $*" >&2
exec build/bench/bench/tessera-bench ycsb "${defaults[@]}" "$@"
