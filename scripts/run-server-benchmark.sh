#!/usr/bin/env bash
# tessera-kv-server against redis-server (Debian's 7.0, alone and with io-threads 2), one after
# the other on the same CPUs with the same settings (no persistence, 127.0.0.1), each driven by
# redis-benchmark -t set,get,incr,mset -c 50 -r 1000000 -n N, with -P 16 and without
# pipelining. Prints a table of requests/s and p50/p99 latency side by side, with ratios, and one
# of each server's CPU time per request (user + system, all threads) beside the client's busy
# share of its CPU (near 100 %: the client set the rate, and the CPU column compares the servers).
#
#   scripts/run-server-benchmark.sh                 # N = 1000000 pipelined, 200000 not
#   N=200000 NP_N=50000 ROUNDS=3 scripts/run-server-benchmark.sh
#   AOF=1 scripts/run-server-benchmark.sh           # durability: SET with the log, below
#
# AOF=1: SET only, tessera-kv-server without the log, with --appendonly yes --appendfsync
# everysec and always, and redis-server with appendonly yes + appendfsync everysec and always,
# each log in a fresh directory under AOF_DIR (default: a temp directory under build/, on the
# repository's disk). Defaults N=200000, NP_N=50000. Prints everysec / log off and always /
# redis-server always. BASE_BUILD_DIR=DIR (a build directory of another commit, configured like
# build/server-bench and containing apps/server/tessera-kv-server) adds that binary under
# `always` to every round, in turn with the others, and prints this build's always / its.
# AOF_SERVERS="tessera-always redis-always base-always" runs only the servers named (of tessera,
# tessera-everysec, tessera-always, redis-everysec, redis-always, base-always).
#
# Pinning: with 3 or more CPUs the client runs alone on the last CPU and every server on the
# others (taskset); with 2 CPUs, PIN=apart (the default) gives the server CPU 0 and the client
# CPU 1, PIN=shared lets servers and client share both CPUs (tessera then has 2 workers, Redis 2
# I/O threads). SERVER_CPUS=K gives the servers CPUs 0..K-1 and the client all the others, with
# one redis-benchmark thread (--threads) per client CPU: how a many-core machine is measured
# (e.g. SERVER_CPUS=8 on 16 CPUs). tessera-kv-server gets one worker per server CPU and the
# I/O-threaded redis-server IO_THREADS (default: one per server CPU, at least 2). CLIENTS (50)
# sets redis-benchmark's -c. Each number is the median of ROUNDS runs (default 3), servers in
# turns. SERVER_BIN=PATH runs that tessera-kv-server binary and skips installing and building
# (a machine with the packages but no toolchain).
set -euo pipefail
if [[ $# -gt 0 ]]; then
  # Settings are environment variables (above); the script takes no arguments.
  if [[ $1 == -h || $1 == --help ]]; then sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0; fi
  echo "run-server-benchmark: unexpected argument '$1' (settings are variables: N=... ROUNDS=... PIN=... AOF=1; see --help)" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
AOF=${AOF:-}
if [[ -n $AOF ]]; then
  N=${N:-200000}
  NP_N=${NP_N:-50000}
  TESTS=set
fi
N=${N:-1000000}
NP_N=${NP_N:-200000}
ROUNDS=${ROUNDS:-3}
TESTS=${TESTS:-set,get,incr,mset}
PIN=${PIN:-apart}
build=${BUILD_DIR:-build/server-bench}

[[ -n ${SERVER_BIN:-} ]] || scripts/install-deps.sh >/dev/null
for tool in redis-server redis-benchmark redis-cli taskset; do
  command -v "$tool" >/dev/null || { echo "run-server-benchmark: $tool missing" >&2; exit 1; }
done
# Configured once; built every time (nothing to do when up to date), so that the figures are
# never those of a binary older than the sources.
if [[ -n ${SERVER_BIN:-} ]]; then
  [[ -x $SERVER_BIN ]] || { echo "run-server-benchmark: SERVER_BIN=$SERVER_BIN is not an executable" >&2; exit 1; }
  server_bin=$SERVER_BIN
else
  if [[ ! -f $build/build.ninja ]]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_NATIVE=ON \
      -DTESSERA_BUILD_TESTS=OFF -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON >/dev/null
  fi
  cmake --build "$build" --target tessera-kv-server >/dev/null
  server_bin=$build/apps/server/tessera-kv-server
fi
base_build=${BASE_BUILD_DIR:-}
if [[ -n $base_build ]]; then
  [[ -n $AOF ]] || { echo "run-server-benchmark: BASE_BUILD_DIR needs AOF=1" >&2; exit 1; }
  [[ -f $base_build/build.ninja ]] ||
    { echo "run-server-benchmark: $base_build is not a configured build directory" >&2; exit 1; }
  cmake --build "$base_build" --target tessera-kv-server >/dev/null
  base_bin=$base_build/apps/server/tessera-kv-server
fi

ncpu=$(nproc)
last=$((ncpu - 1))
client_threads=1
if [[ -n ${SERVER_CPUS:-} ]]; then
  [[ $SERVER_CPUS =~ ^[1-9][0-9]*$ ]] && ((SERVER_CPUS < ncpu)) ||
    { echo "run-server-benchmark: SERVER_CPUS=$SERVER_CPUS must be 1..$((ncpu - 1)) (the client needs a CPU of its own)" >&2; exit 2; }
  nserver=$SERVER_CPUS; server_cpus="0-$((nserver - 1))"; client_cpus="$nserver-$last"
  client_threads=$((ncpu - nserver))
  pin_note="servers pinned to CPUs $server_cpus, client to CPUs $client_cpus ($client_threads redis-benchmark threads)"
elif ((ncpu >= 3)); then
  server_cpus="0-$((ncpu - 2))"; client_cpus="$last"; nserver=$((ncpu - 1))
  pin_note="client pinned to CPU $last, servers to CPUs $server_cpus"
elif [[ $PIN == shared ]]; then
  server_cpus="0-$last"; client_cpus="0-$last"; nserver=$ncpu
  pin_note="client and servers share CPUs 0-$last"
  pin_note+=" (2 CPUs: too few to pin apart and keep 2 for the server)"
else
  server_cpus="0"; client_cpus="$last"; nserver=1
  pin_note="server pinned to CPU 0, client to CPU $last (PIN=shared to share both)"
fi
workers=$nserver
io_threads=${IO_THREADS:-$((nserver > 2 ? nserver : 2))}
clients=${CLIENTS:-50}
threads_flag=()
((client_threads > 1)) && threads_flag=(--threads "$client_threads")

# A port below Linux's ephemeral range (32768-60999 by default: a client's own connection may hold
# one there) that nothing listens on, chosen again before each server starts.
pick_port() {
  local p
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; return 0; fi
  done
  echo "run-server-benchmark: no free port found in 20000-31999" >&2; exit 1
}
port=
out=$(mktemp -d)
mkdir -p build
aof_root=${AOF_DIR:-$(mktemp -d "$root/build/server-bench-aof.XXXXXX")}
trap 'rm -rf "$out" "$aof_root"; [[ -n ${pid:-} ]] && kill "$pid" 2>/dev/null || true' EXIT

start_server() {  # name -> sets pid
  local dir="$aof_root/$1"
  rm -rf "$dir" && mkdir -p "$dir"
  pick_port
  case $1 in
    tessera)
      taskset -c "$server_cpus" "$server_bin" --port "$port" --workers "$workers" \
        >"$out/server.log" 2>&1 & ;;
    tessera-everysec|tessera-always)
      taskset -c "$server_cpus" "$server_bin" --port "$port" --workers "$workers" \
        --appendonly yes --appendfsync "${1#tessera-}" --dir "$dir" >"$out/server.log" 2>&1 & ;;
    base-always)
      taskset -c "$server_cpus" "${base_bin:?base-always needs BASE_BUILD_DIR}" --port "$port" \
        --workers "$workers" --appendonly yes --appendfsync always --dir "$dir" \
        >"$out/server.log" 2>&1 & ;;
    redis-everysec|redis-always)
      taskset -c "$server_cpus" redis-server --port "$port" --bind 127.0.0.1 --save "" \
        --appendonly yes --appendfsync "${1#redis-}" --dir "$dir" --daemonize no \
        --logfile "$out/server.log" & ;;
    redis)
      taskset -c "$server_cpus" redis-server --port "$port" --bind 127.0.0.1 --save "" \
        --appendonly no --daemonize no --logfile "$out/server.log" & ;;
    redis-io)
      taskset -c "$server_cpus" redis-server --port "$port" --bind 127.0.0.1 --save "" \
        --appendonly no --daemonize no --io-threads "$io_threads" --io-threads-do-reads yes \
        --logfile "$out/server.log" & ;;
  esac
  pid=$!
  for _ in $(seq 100); do
    # the server must still be running: another process answering on the port is not it
    kill -0 "$pid" 2>/dev/null || break
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "run-server-benchmark: $1 did not start" >&2; cat "$out/server.log" >&2; exit 1
}

clk_tck=$(getconf CLK_TCK)
server_ticks() {  # the server's user + system time so far, in clock ticks (every thread)
  awk '{print $14 + $15}' "/proc/$pid/stat"
}

stop_server() {
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  pid=
}

servers=(redis redis-io tessera)
[[ -n $AOF ]] && servers=(tessera tessera-everysec tessera-always redis-everysec redis-always)
[[ -n $base_build ]] && servers+=(base-always)
# AOF_SERVERS="tessera-always redis-always base-always": only those, in that order.
[[ -n $AOF && -n ${AOF_SERVERS:-} ]] && read -ra servers <<<"$AOF_SERVERS"
echo "run-server-benchmark: $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p')); $pin_note"
redis_version=$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')
echo "run-server-benchmark: tessera-kv-server --workers $workers;" \
  "redis-server $redis_version; io-threads $io_threads"
for round in $(seq "$ROUNDS"); do
  for s in "${servers[@]}"; do
    for mode in P16 P1; do
      start_server "$s"
      if [[ $mode == P16 ]]; then n=$N; pipe=16; else n=$NP_N; pipe=1; fi
      # One redis-benchmark per test, in TESTS' order on the same server (as one run of
      # `-t set,get,...` would), so that the server's CPU time (user + system, all its threads,
      # /proc/PID/stat) and the client's busy share can be read around each test.
      IFS=, read -ra test_list <<<"$TESTS"
      for t in "${test_list[@]}"; do
        before=$(server_ticks)
        TIMEFORMAT='%R %U %S'
        { time taskset -c "$client_cpus" redis-benchmark -p "$port" -t "$t" -P "$pipe" -c "$clients" "${threads_flag[@]}" \
            -r 1000000 -n "$n" --csv >"$out/bench.csv" 2>/dev/null; } 2>"$out/time.txt"
        after=$(server_ticks)
        read -r real user sys <"$out/time.txt"
        tail -n +2 "$out/bench.csv" | tr -d '"' |
          awk -F, -v s="$s" -v m="$mode" -v r="$round" -v n="$n" -v hz="$clk_tck" \
            -v ticks=$((after - before)) -v real="$real" -v cu="$user" -v cs="$sys" \
            -v cpus="$client_threads" \
            '{gsub(/ /, "_", $1); print s, m, r, $1, $2, $5, $7, ticks / hz / n * 1e6, (cu + cs) / real / cpus}' \
          >>"$out/results.txt"
      done
      stop_server
    done
  done
done

# Medians over rounds, then the table.
cp "$out/results.txt" "${RESULTS:-/tmp/run-server-benchmark.txt}"
if [[ -n $AOF ]]; then
  echo "run-server-benchmark: logs under $aof_root (on $(df "$aof_root" | awk 'NR==2 {print $1}'))"
  python3 - "$out/results.txt" "$ROUNDS" <<'EOF'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    s, m, r, test, rps, p50, p99 = line.split()[:7]
    rows[(s, m)].append((float(rps), float(p50), float(p99)))
def med(s, m, i):
    xs = rows.get((s, m))
    return statistics.median(x[i] for x in xs) if xs else float("nan")
print(f"\nSET, medians of {sys.argv[2]} rounds; rps = requests/s, p50/p99 in ms")
names = ("tessera", "tessera-everysec", "tessera-always", "redis-everysec", "redis-always")
heads = ("tessera log off", "tessera everysec", "tessera always", "redis everysec",
         "redis always")
print("| mode | " + " | ".join(f"{h} rps (p50/p99)" for h in heads) +
      " | everysec / off | always / redis always | everysec / redis everysec |")
print("|" + "---|" * (len(heads) + 4))
for m in ("P16", "P1"):
    cells = ["-P 16" if m == "P16" else "no pipelining"]
    for s in names:
        cells.append(f"{med(s, m, 0):,.0f} ({med(s, m, 1):.2f}/{med(s, m, 2):.2f})")
    cells.append(f"{med('tessera-everysec', m, 0) / med('tessera', m, 0):.2f}x")
    cells.append(f"{med('tessera-always', m, 0) / med('redis-always', m, 0):.2f}x")
    cells.append(f"{med('tessera-everysec', m, 0) / med('redis-everysec', m, 0):.2f}x")
    print("| " + " | ".join(cells) + " |")
if any(s == "base-always" for s, _ in rows):
    print(f"\nalways, this build / the base build (BASE_BUILD_DIR), "
          f"medians of {sys.argv[2]} rounds")
    print("| mode | this build rps | base build rps | this / base | base / redis always |")
    print("|---|---|---|---|---|")
    for m in ("P16", "P1"):
        new, old = med("tessera-always", m, 0), med("base-always", m, 0)
        print(f"| {'-P 16' if m == 'P16' else 'no pipelining'} | {new:,.0f} | {old:,.0f} | "
              f"{new / old:.2f}x | {old / med('redis-always', m, 0):.2f}x |")
    print("\nper round, always / redis always (this build, base build):")
    by_round = collections.defaultdict(dict)
    for line in open(sys.argv[1]):
        s, m, r, test, rps, p50, p99 = line.split()[:7]
        by_round[(m, r)][s] = float(rps)
    for (m, r), d in sorted(by_round.items()):
        if "redis-always" in d and "tessera-always" in d and "base-always" in d:
            print(f"  {m} round {r}: {d['tessera-always'] / d['redis-always']:.2f}x, "
                  f"{d['base-always'] / d['redis-always']:.2f}x")
EOF
  exit 0
fi
python3 - "$out/results.txt" "$ROUNDS" "$io_threads" <<'EOF'
import collections, statistics, sys
io = f"redis io{sys.argv[3]}"
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    s, m, r, test, rps, p50, p99, cpu, busy = line.split()
    rows[(s, m, test)].append(tuple(map(float, (rps, p50, p99, cpu, busy))))
def med(xs, i):
    return statistics.median(x[i] for x in xs)
tests = []
for (s, m, t) in rows:
    if (m, t) not in tests:
        tests.append((m, t))
print(f"\nmedians of {sys.argv[2]} rounds; rps = requests/s, p50/p99 in ms; best = the faster "
      "redis-server configuration")
hdr = ("mode", "test", "redis rps", "p50", "p99", f"{io} rps", "p50", "p99",
       "tessera rps", "p50", "p99", "vs best", "p99 vs best")
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
cpu_rows = []
for m, t in sorted(tests, key=lambda x: (x[0] != "P16", x[1])):
    cells = [("-P 16" if m == "P16" else "no pipelining"), t]
    cpu_cells = list(cells)
    best = None
    for s in ("redis", "redis-io", "tessera"):
        xs = rows.get((s, m, t))
        if not xs:
            cells += ["-", "-", "-"]
            cpu_cells += ["-", "-"]
            continue
        rps, p50, p99, cpu, busy = (med(xs, i) for i in range(5))
        cells += [f"{rps:,.0f}", f"{p50:.3f}", f"{p99:.3f}"]
        cpu_cells += [f"{cpu:.2f}", f"{busy:.0%}"]
        if s != "tessera" and (best is None or rps > best[0]):
            best = (rps, p99, cpu)
        if s == "tessera" and best:
            cells += [f"{rps / best[0]:.2f}x", f"{p99 / best[1]:.2f}x" if best[1] else "-"]
            cpu_cells += [f"{best[2] / cpu:.2f}x" if cpu else "-"]
    print("| " + " | ".join(cells) + " |")
    cpu_rows.append(cpu_cells)
# The server's CPU time per request shows what each server costs even where the client sets the
# rate (a client busy ~100 % of its CPU cannot ask faster; the rps ratio then understates the
# difference between the servers).
print("\nCPU per request: the server's user + system time (all its threads) in µs, and the "
      "client's busy share of its CPUs (near 100 %: the client, not the server, set the rate)")
hdr = ("mode", "test", "redis µs/req", "client busy", f"{io} µs/req", "client busy",
       "tessera µs/req", "client busy", "best redis / tessera")
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
for cells in cpu_rows:
    print("| " + " | ".join(cells) + " |")
EOF
