#!/usr/bin/env bash
# scripts/compare-external.sh — YCSB on the same operation files for tessera, our `threads`
# baseline, index-microbench's BTreeOLC and ART-OLC, and the original MxTasks prototype
# (`blinktree_benchmark`), in alternating rounds; prints one table of M ops/s and ratios.
#
#   scripts/compare-external.sh [--index-microbench DIR] [--mxtasking DIR] [--workload c]
#       [--records 10000000] [--operations 10000000] [--workers 1,2] [--rounds 3]
#       [--work build/compare-external] [--build DIR] [--no-mxtasks] [--prefetch-distance 4]
#       [--glibc-huge-pages]
#
# Their sources are not part of this repository and are never committed: give checkouts of
# https://github.com/wangziqi2016/index-microbench and https://github.com/jmuehlig/mxtasking, or
# leave the flags out on a machine with network access and they are cloned into the work folder.
# What runs:
#   1. tessera-bench (bench preset) configured with TESSERA_INDEX_MICROBENCH_DIR, which adds the
#      implementations `btreeolc` and `artolc` (bench/ycsb/external.cpp) to `tessera-bench ycsb`.
#   2. blinktree_benchmark built from a copy of the MxTasks source (clang, its own CMake), with
#      one change to that copy: its lookups count found and missing keys, printed after each
#      phase, so that its run is checked like ours (every read must find its key).
#   3. `tessera-bench ycsb --write-load-file/--write-run-file` writes the operation files once;
#      every system then replays them: round after round, per worker count, one tessera-bench
#      process (tessera, threads, btreeolc, artolc in turns, each answer checked) and one
#      blinktree_benchmark process (--prefetch-distance, its tree check on).
# tessera's nodes are on transparent huge pages (runtime_options::resources); the others' are
# malloc's, on 4 KiB pages unless glibc is told otherwise: --glibc-huge-pages runs tessera-bench
# under GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.arena_max=1, which puts the threads
# baseline's, BTreeOLC's and ART-OLC's nodes on huge pages too (one malloc arena, so that worker
# threads allocate from the heap glibc advises). MxTasks maps its memory itself and stays on 4 KiB.
# A process's first 2 MiB pages can cost far more than 4 KiB ones on a VM whose hypervisor takes
# back free memory; every tessera load here is its process's first. The script ends by measuring
# both page sizes' first touch with tessera-fresh-pages, after a 15 s idle wait.
# The table holds every round's M ops/s (load | run), the median, and the ratios of medians;
# the load average before each round goes with it. Needs cmake, a C++20 GCC, clang (for MxTasks),
# libnuma-dev, oneTBB (scripts/install-deps.sh installs them) and python3.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
imb="" mxt="" workload=c records=10000000 operations=10000000 workers=1,2 rounds=3
work="$repo/build/compare-external" with_mx=1 distance=4 build="" tunables=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --index-microbench) imb=$2; shift 2 ;;
    --mxtasking) mxt=$2; shift 2 ;;
    --workload) workload=$2; shift 2 ;;
    --records) records=$2; shift 2 ;;
    --operations) operations=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --no-mxtasks) with_mx=0; shift ;;
    --prefetch-distance) distance=$2; shift 2 ;;
    --glibc-huge-pages) tunables=glibc.malloc.hugetlb=1:glibc.malloc.arena_max=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set/!p}' "$0"; exit 0 ;;
    *) echo "compare-external.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
done
case "$workload" in a|b|c|f) ;; *)
  echo "compare-external.sh: --workload must be a, b, c or f (the external trees run no scans, inserts after the load or removes)" >&2
  exit 2 ;;
esac
mkdir -p "$work"
work=$(cd "$work" && pwd)
log() { echo "compare-external.sh: $*" >&2; }

fetch() {  # fetch NAME URL -> prints the source dir
  local dir="$work/src/$1"
  if [[ ! -d "$dir" ]]; then
    log "cloning $2 into $dir"
    git clone --quiet --depth 1 "$2" "$dir" >&2
  fi
  echo "$dir"
}
[[ -n "$imb" ]] || imb=$(fetch index-microbench https://github.com/wangziqi2016/index-microbench)
imb=$(cd "$imb" && pwd)
if [[ $with_mx -eq 1 && -z "$mxt" ]]; then
  mxt=$(fetch mxtasking https://github.com/jmuehlig/mxtasking)
fi

# 1. tessera-bench with the external competitors.
# --build DIR: an existing build folder (reconfigured with the flag), else a fresh bench preset.
[[ -n "$build" ]] || build="$work/tessera-bench"
log "building tessera-bench in $build"
if [[ -f "$build/CMakeCache.txt" ]]; then
  cmake "$build" -DTESSERA_INDEX_MICROBENCH_DIR="$imb" >"$work/cmake.log" 2>&1
else
  (cd "$repo" && cmake --preset bench -B "$build" -DTESSERA_INDEX_MICROBENCH_DIR="$imb") >"$work/cmake.log" 2>&1
fi || { cat "$work/cmake.log" >&2; exit 1; }
cmake --build "$build" --target tessera-bench tessera-fresh-pages -j"$(nproc)" >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log" >&2; exit 1; }
bench="$build/bench/tessera-bench"
fresh_pages="$build/bench/tessera-fresh-pages"

# 2. The MxTasks prototype, from a copy whose lookups count what they find.
mxbin=""
if [[ $with_mx -eq 1 ]]; then
  mxsrc="$work/mxtasking-checked"  # made once per work folder; make rebuilds what changed
  patched=1
  [[ -d "$mxsrc" ]] || { cp -r "$(cd "$mxt" && pwd)" "$mxsrc" && patched=0; }
  if [[ $patched -eq 1 ]] || python3 - "$mxsrc" <<'EOF'
import sys, pathlib
root = pathlib.Path(sys.argv[1]) / "src/application/blinktree_benchmark"
rs = root / "request_scheduler.h"
s = rs.read_text()
found = "    void found(const std::uint16_t core_id, const std::uint64_t /*key*/, const std::int64_t /*value*/) noexcept\n    {\n"
missing = "    void missing(const std::uint16_t core_id, const std::uint64_t /*key*/) noexcept { task_finished(core_id); }"
if found not in s or missing not in s or "class RequestContainer" not in s:
    sys.exit("request_scheduler.h is not the version this script knows")
s = s.replace("class RequestContainer", "inline std::atomic<std::uint64_t> checked_found{0}, checked_missing{0};\nclass RequestContainer", 1)
s = s.replace(found, found + "        checked_found.fetch_add(1, std::memory_order_relaxed);\n", 1)
s = s.replace(missing, "    void missing(const std::uint16_t core_id, const std::uint64_t /*key*/) noexcept { checked_missing.fetch_add(1, std::memory_order_relaxed); task_finished(core_id); }", 1)
if "#include <atomic>" not in s:
    s = "#include <atomic>\n" + s
rs.write_text(s)
bm = root / "benchmark.cpp"
b = bm.read_text()
anchor = "        std::cout << result << std::endl;\n"
if anchor not in b:
    sys.exit("benchmark.cpp is not the version this script knows")
b = b.replace(anchor, anchor + '        std::cout << "checked: found " << checked_found.exchange(0) << " missing " << checked_missing.exchange(0) << std::endl;\n', 1)
bm.write_text(b)
EOF
  then
    mkdir -p "$work/mxtasking-build"
    if (cd "$work/mxtasking-build" && cmake "$mxsrc" -DCMAKE_BUILD_TYPE=Release >cmake.log 2>&1 &&
        make -j"$(nproc)" blinktree_benchmark >build.log 2>&1); then
      mxbin="$work/mxtasking-build/bin/blinktree_benchmark"
    else
      log "MxTasks did not build (see $work/mxtasking-build/build.log); running without it"
    fi
  else
    rm -rf "$mxsrc"
    log "could not add the answer check to MxTasks; running without it"
  fi
fi

# 3. The operation files, written once.
loadf="$work/load_${workload}_${records}.txt"
runf="$work/run_${workload}_${records}_${operations}.txt"
if [[ ! -s "$loadf" || ! -s "$runf" ]]; then
  "$bench" ycsb --workload "$workload" --records "$records" --operations "$operations" \
    --write-load-file "$loadf" --write-run-file "$runf" >/dev/null
fi

results="$work/results-$(date -u +%Y%m%dT%H%M%SZ).tsv"
printf 'round\tworkers\timplementation\tphase\tmops\tloadavg\n' >"$results"
IFS=, read -r -a worker_list <<<"$workers"
for ((round = 1; round <= rounds; ++round)); do
  for w in "${worker_list[@]}"; do
    la=$(cut -d' ' -f1 /proc/loadavg)
    log "round $round/$rounds, $w worker(s), load average $la"
    json="$work/round.jsonl"
    rm -f "$json"
    env ${tunables:+GLIBC_TUNABLES=$tunables} "$bench" ycsb \
      --implementation tessera,threads,btreeolc,artolc --load-file "$loadf" \
      --run-file "$runf" --workers "$w" --repeat 1 --json "$json" >"$work/last-tessera-bench.txt"
    python3 - "$json" "$round" "$w" "$la" >>"$results" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"{sys.argv[2]}\t{sys.argv[3]}\t{r['implementation']}\t{r['phase']}\t{r['ops_per_second'] / 1e6:.3f}\t{sys.argv[4]}")
EOF
    if [[ -n "$mxbin" ]]; then
      out="$work/last-mxtasks.txt"
      (cd "$work" && "$mxbin" "$w" -i 1 -pd "$distance" -f "$loadf" "$runf") >"$out" 2>&1 ||
        { cat "$out" >&2; log "blinktree_benchmark failed"; exit 1; }
      python3 - "$out" "$round" "$w" "$la" "$runf" >>"$results" <<'EOF'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
reads = sum(1 for l in open(sys.argv[5]) if l.startswith("READ"))
phases = {}
for i, l in enumerate(lines):
    m = re.match(r"^(\d+)\t(\d+)\t([01])\t(\d+) ms\t([0-9.e+]+) op/s", l)
    if not m:
        continue
    check = re.match(r"^checked: found (\d+) missing (\d+)", lines[i + 1] if i + 1 < len(lines) else "")
    if not check:
        sys.exit("blinktree_benchmark: no 'checked:' line after a result")
    found, missing = int(check.group(1)), int(check.group(2))
    if m.group(3) == "1" and (missing != 0 or found != reads):
        sys.exit(f"blinktree_benchmark: run phase found {found} of {reads} read keys, {missing} missing")
    phases["load" if m.group(3) == "0" else "run"] = float(m.group(5)) / 1e6
if set(phases) != {"load", "run"}:
    sys.exit("blinktree_benchmark: expected a load and a run result")
for phase, mops in phases.items():
    print(f"{sys.argv[2]}\t{sys.argv[3]}\tmxtasks\t{phase}\t{mops:.3f}\t{sys.argv[4]}")
EOF
    fi
  done
done

python3 - "$results" <<'EOF'
import collections, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
data = collections.defaultdict(list)
loads = collections.defaultdict(list)
for rnd, w, impl, phase, mops, la in rows:
    data[(int(w), phase, impl)].append(float(mops))
    loads[int(w)].append(la)
order = ["tessera", "threads", "btreeolc", "artolc", "mxtasks"]
print(f"results: {sys.argv[1]}")
print(f"{'workers':>7}  {'phase':5}  {'implementation':14}  {'M ops/s per round':30}  {'median':>7}  {'vs threads':>10}  {'tessera vs it':>13}")
for w in sorted({k[0] for k in data}):
    for phase in ("load", "run"):
        med = {i: statistics.median(data[(w, phase, i)]) for i in order if (w, phase, i) in data}
        for i in order:
            if i not in med:
                continue
            per = " ".join(f"{x:.2f}" for x in data[(w, phase, i)])
            vs = f"{med[i] / med['threads']:.2f}x" if "threads" in med else "-"
            tv = f"{med['tessera'] / med[i]:.2f}x" if "tessera" in med else "-"
            print(f"{w:>7}  {phase:5}  {i:14}  {per:30}  {med[i]:7.2f}  {vs:>10}  {tv:>13}")
    print(f"{'':7}  load averages before the rounds: {' '.join(dict.fromkeys(loads[w]))}")
EOF
if [[ -n "$tunables" ]]; then others="huge pages (GLIBC_TUNABLES=$tunables)"; else others="4 KiB pages (malloc's default)"; fi
echo "memory: tessera's nodes in its allocator's chunks, advised for transparent huge pages (THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown)); threads, btreeolc, artolc on $others; mxtasks on 4 KiB pages (its own mappings)"
log "what fresh memory costs here, after a 15 s idle wait (each tessera load above was its process's first: its nodes paid the 2 MiB pages' rate; malloc's nodes, unless --glibc-huge-pages, and the prototype's the 4 KiB pages')"
"$fresh_pages" --mib 256 --idle-seconds 15
