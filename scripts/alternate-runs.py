#!/usr/bin/env python3
"""Two or more tessera-bench builds or settings measured in turns, for a noisy, shared machine.

  scripts/alternate-runs.py ROUNDS 'LABEL=[VAR=value ...] BINARY [flags]' ... -- SUBCOMMAND [flags]

Each round runs every variant once (`BINARY SUBCOMMAND [variant flags] [common flags] --json`),
in reverse order every other round, so that each meets the machine's slow and fast phases
alike. Per result row (benchmark, workers, and what names a row: implementation, pattern or
phase, mix, access, shape, join, granularity, ...) it prints each variant's median
operations per second and the median over rounds of its per-round ratio against the first
variant, with the ratios of every round. For `ycsb` it adds `<phase>-cpu` rows: operations per
CPU-second of the process (its `cpu` figure), which a machine whose other users take the CPUs
away disturbs less than the wall-clock time. Example (tracing off before/after, on after):

  b=build/trace-bench/bench/tessera-bench
  scripts/alternate-runs.py 7 "before=/tmp/old-build/tessera-bench" "off=$b" \\
      "on=$b --trace /tmp/t.json" \\
      -- ycsb --records 500000 --operations 3000000 --workers 1,2 --implementation tessera \\
         --progress no --check no
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


# The fields of a result row that name it (besides benchmark and workers), in this order.
ROW_FIELDS = ("implementation", "pattern", "phase", "workload", "distribution", "records", "mix",
              "access", "shape", "nodes", "join", "scale_factor", "records_per_task")


def row_name(row):
    """What tells this row from the others of one run, e.g. "tessera/run" or "auto/100/0/hot"."""
    parts = [str(row[f]) for f in ROW_FIELDS if f in row]
    return "/".join(parts) if parts else "-"


def main():
    args = sys.argv[1:]
    if len(args) < 4 or "--" not in args or not args[0].isdigit():
        sys.exit(__doc__)
    rounds = int(args[0])
    sep = args.index("--")
    variants = [a.split("=", 1) for a in args[1:sep]]
    common = args[sep + 1:]
    reference = variants[0][0]
    results = {}  # (label, benchmark, row name, workers) -> [ops/s per round]
    cpu_line = re.compile(
        r"(\S+) workers=(\d+) (\w+): (\d+) ops in [\d.]+ s, .*?cpu ([\d.]+) s")
    for r in range(rounds):
        for label, command in (variants if r % 2 == 0 else variants[::-1]):
            words = command.split()
            env = dict(os.environ)
            while "=" in words[0]:
                name, value = words.pop(0).split("=", 1)
                env[name] = value
            fd, path = tempfile.mkstemp(suffix=".json")
            os.close(fd)
            os.remove(path)
            run = subprocess.run([words[0]] + common[:1] + words[1:] + common[1:] +
                                 ["--json", path], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True, env=env, check=False)
            if run.returncode != 0:
                sys.exit(f"alternate-runs: {label} failed ({run.returncode}):\n{run.stderr}")
            with open(path, encoding="utf-8") as f:
                for line in f:
                    row = json.loads(line)
                    key = (label, row["benchmark"], row_name(row), row["workers"])
                    results.setdefault(key, []).append(row["ops_per_second"])
            os.remove(path)
            for m in cpu_line.finditer(run.stderr):
                key = (label, common[0], f"{m[1]}/{m[3]}-cpu", int(m[2]))
                results.setdefault(key, []).append(int(m[4]) / float(m[5]))
        print(f"alternate-runs: round {r + 1} of {rounds} done, load average "
              f"{os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    width = max([12] + [len(k[2]) for k in results])
    print(f"{'variant':<12} {'benchmark':<9} {'row':<{width}} {'workers':>7} {'Mops/s':>8} "
          f"{'vs ' + reference:>10}  per round")
    for label, _ in variants:
        for key in sorted({k[1:] for k in results}):
            values = results.get((label,) + key, [])
            base = results.get((reference,) + key, [])
            if not values or not base:
                continue
            ratios = [a / b for a, b in zip(values, base)]
            print(f"{label:<12} {key[0]:<9} {key[1]:<{width}} {key[2]:>7} "
                  f"{statistics.median(values) / 1e6:>8.3f} {statistics.median(ratios):>10.3f}  "
                  + " ".join(f"{x:.2f}" for x in ratios))


if __name__ == "__main__":
    main()
