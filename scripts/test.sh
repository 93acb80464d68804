#!/usr/bin/env bash
# Builds and runs the whole test suite in the dev preset, then under AddressSanitizer(+UBSan) and
# ThreadSanitizer. PRESETS="dev" scripts/test.sh runs a subset; JOBS=1 builds and tests with one job
# (default: one per CPU).
set -euo pipefail
usage="usage: scripts/test.sh   (no arguments; PRESETS=\"dev asan tsan\" by default, or a subset; JOBS=N, default the CPU count)"
if [[ $# -gt 0 ]]; then
  if [[ $1 == -h || $1 == --help ]]; then echo "$usage"; exit 0; fi
  echo "scripts/test.sh: unexpected argument '$1'" >&2
  echo "$usage" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
if ! [[ $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "scripts/test.sh: JOBS must be a positive number, got '${jobs}'" >&2
  exit 2
fi
scripts/install-deps.sh
for preset in ${PRESETS:-dev asan tsan}; do
  echo "=== tessera tests: preset ${preset} ==="
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}" -j "${jobs}"
  ctest --preset "${preset}" -j "${jobs}"
done
