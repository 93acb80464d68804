#!/usr/bin/env bash
# Builds and runs the whole test suite in the dev preset, then under AddressSanitizer(+UBSan) and
# ThreadSanitizer. PRESETS="dev" scripts/test.sh runs a subset.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
for preset in ${PRESETS:-dev asan tsan}; do
  echo "=== tessera tests: preset ${preset} ==="
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}" -j "${jobs}"
  ctest --preset "${preset}" -j "${jobs}"
done
