#!/usr/bin/env bash
# Builds and runs the whole test suite in the dev preset, then under AddressSanitizer(+UBSan) and
# ThreadSanitizer. PRESETS="dev" scripts/test.sh runs a subset.
set -euo pipefail
usage="usage: scripts/test.sh   (no arguments; PRESETS=\"dev asan tsan\" by default, or a subset)"
if [[ $# -gt 0 ]]; then
  if [[ $1 == -h || $1 == --help ]]; then echo "$usage"; exit 0; fi
  echo "scripts/test.sh: unexpected argument '$1'" >&2
  echo "$usage" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
for preset in ${PRESETS:-dev asan tsan}; do
  echo "=== tessera tests: preset ${preset} ==="
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}" -j "${jobs}"
  ctest --preset "${preset}" -j "${jobs}"
done
