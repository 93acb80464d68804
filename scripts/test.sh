#!/usr/bin/env bash
# Builds and runs the whole test suite in the dev preset, then under AddressSanitizer(+UBSan) and
# ThreadSanitizer, then runs clang-tidy (`tidy`). PRESETS="dev" scripts/test.sh runs a subset;
# JOBS=1 builds and tests with one job (default: one per CPU).
#
# The presets overlap: a preset's tests run while the next preset builds (or clang-tidy runs),
# since tests leave the CPUs idle part of the time (sockets, sleeps, one-thread phases) and a
# build fills them. A preset's test output is printed when its tests end; the script fails at
# the end if any preset's tests failed, and at once if a build fails.
#
# `tidy` configures the clang preset (configure only: clang-tidy needs its compile_commands.json,
# no objects) and runs clang-tidy (.clang-tidy) over the library's and the apps' sources
# (src/**/*.cpp, apps/*/src/*.cpp, and the headers they include); any finding fails. The clang
# build and its tests (-Wthread-safety as errors) are the `clang` preset, not run by default:
# PRESETS=clang scripts/test.sh.
set -euo pipefail
usage="usage: scripts/test.sh   (no arguments; PRESETS=\"dev asan tsan tidy\" by default, or a subset, or clang; JOBS=N, default the CPU count)"
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

run_tidy() {
  cmake --preset clang >/dev/null
  # The sources the clang preset compiles, from its compilation database: a file CMake does not
  # build is not checked with guessed flags.
  local root files
  root=$(printf '%s' "$PWD" | sed 's/[][\.*^$+?(){}|]/\\&/g')
  mapfile -t files < <(sed -n 's/^ *"file": "\(.*\)",\{0,1\}$/\1/p' build/clang/compile_commands.json |
                       grep -E "^${root}/(src/.+|apps/[^/]+/src/[^/]+)\.cpp$" | sort -u)
  if ((${#files[@]} == 0)); then
    echo "scripts/test.sh: no library or app sources in build/clang/compile_commands.json" >&2
    return 1
  fi
  echo "clang-tidy: ${#files[@]} files, ${jobs} at a time"
  # WarningsAsErrors (.clang-tidy): a finding makes clang-tidy, and so xargs, fail. Its count of
  # the warnings it suppressed in system headers is left out.
  printf '%s\n' "${files[@]}" |
    xargs -P "${jobs}" -n 1 clang-tidy -p build/clang --quiet 2>&1 |
    { grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$' || true; }
}

# The tests in flight in the background: their preset, process and output file.
testing_preset=""
testing_pid=""
testing_log=""
failed=()
logs=$(mktemp -d)
trap 'if [[ -n $testing_pid ]]; then kill "$testing_pid" 2>/dev/null || true; fi; rm -rf "$logs"' EXIT

# Waits for the tests in flight, prints their output and records a failure.
finish_tests() {
  [[ -n $testing_pid ]] || return 0
  local status=0
  wait "$testing_pid" || status=$?
  echo "=== tessera tests: preset ${testing_preset}: tests ==="
  cat "$testing_log"
  if ((status != 0)); then failed+=("ctest --preset ${testing_preset}"); fi
  testing_pid=""
}

scripts/install-deps.sh
for preset in ${PRESETS:-dev asan tsan tidy}; do
  if [[ $preset == tidy ]]; then
    echo "=== tessera tests: clang-tidy ==="
    run_tidy || failed+=("clang-tidy")
    continue
  fi
  echo "=== tessera tests: preset ${preset}: build ==="
  cmake --preset "${preset}" >/dev/null
  if ! cmake --build --preset "${preset}" -j "${jobs}"; then
    finish_tests
    echo "scripts/test.sh: the ${preset} build failed" >&2
    exit 1
  fi
  finish_tests
  echo "=== tessera tests: preset ${preset}: tests start (output when they end) ==="
  testing_preset=$preset
  testing_log="$logs/${preset}.log"
  ctest --preset "${preset}" -j "${jobs}" >"$testing_log" 2>&1 &
  testing_pid=$!
done
finish_tests
if ((${#failed[@]})); then
  echo "scripts/test.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "scripts/test.sh: every preset passed (${PRESETS:-dev asan tsan tidy})"
