#!/usr/bin/env bash
# The main job: installs what is missing, builds the bench preset (Release, -march=native) and runs
# the YCSB benchmark of the key-value store, tessera against the thread baseline and oneTBB, side
# by side: three rounds in which the implementations take turns, the table reporting each one's
# median (about 4-5 minutes on 2 cores). One round alone is at the mercy of the machine's noisy
# phases: on the 2-core VM a single round once put oneTBB ahead of tessera at 2 workers, which
# five rounds in turns did not repeat (tessera ahead in every round).
# Extra arguments go to `tessera-bench ycsb` (try --help) and override these defaults, e.g.
# `--repeat 1` for one round, or `--implementation all` to add tessera without prefetching.
# JOBS=N builds with N jobs (default: one per CPU). The table, the JSON and the figures are kept
# in results/<date-time>/, which the last line names.
set -euo pipefail
cd "$(dirname "$0")/.."
for arg in "$@"; do
  if [[ $arg == --json || $arg == --json=* ]]; then
    echo "scripts/run-benchmark.sh: --json is this script's own: the rows go to" \
      "results/<date-time>/results.json" >&2
    exit 2
  fi
  if [[ $arg == -h || $arg == --help ]]; then
    echo "usage: scripts/run-benchmark.sh [tessera-bench ycsb flags]"
    echo "Installs what is missing, builds the bench preset and runs tessera-bench ycsb"
    echo "--repeat 3 --implementation tessera,threads,tbb, then the flags given here."
    echo "JOBS=N builds with N jobs (default: one per CPU)."
    if [[ -x build/bench/bench/tessera-bench ]]; then
      echo
      exec build/bench/bench/tessera-bench ycsb --help
    fi
    echo "The flags are listed by 'build/bench/bench/tessera-bench ycsb --help' once it is built"
    echo "(by this script's first run, or: cmake --preset bench && cmake --build --preset bench)."
    exit 0
  fi
done
scripts/install-deps.sh
cmake --preset bench >/dev/null
jobs=${JOBS:-$(nproc)}
if ! [[ $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "scripts/run-benchmark.sh: JOBS must be a positive number, got '${jobs}'" >&2
  exit 2
fi
cmake --build --preset bench -j "${jobs}" --target tessera-bench tessera-fresh-pages
defaults=(--repeat 3 --implementation tessera,threads,tbb)
# The table, the JSON rows and the figures (scripts/plot.py) go into results/<UTC date-time>/
# (git-ignored).
out="results/$(date -u +%Y-%m-%dT%H-%M-%SZ)"
mkdir -p "$out"
echo "run-benchmark: tessera-bench ycsb ${defaults[*]} $* --json $out/results.json" >&2
build/bench/bench/tessera-bench ycsb "${defaults[@]}" "$@" --json "$out/results.json" |
  tee "$out/table.txt"
if ! .venv/bin/python scripts/plot.py "$out/results.json" --out "$out" >/dev/null; then
  echo "run-benchmark: table and JSON in $out/ (table.txt, results.json); scripts/plot.py failed" >&2
  exit 1
fi
echo "run-benchmark: table, JSON and figures in $out/ (table.txt, results.json, *.svg, *.png)"
