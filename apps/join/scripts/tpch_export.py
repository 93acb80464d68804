#!/usr/bin/env python3
"""Generates TPC-H with DuckDB's own generator (its tpch extension, `CALL dbgen(sf=...)`) and
exports the columns the joins read into the column cache <cache-dir>/sf<N>/, once: a cache that
is there is reused as it is. Also writes reference.txt, DuckDB's answer to both joins on the
generated tables ("<join> <count> <sum in cents>" per line).

    .venv/bin/python apps/join/scripts/tpch_export.py --scale-factor 1 --cache-dir build/tpch-cache

Prints the cache directory on stdout. Several runs at once wait for each other (a lock file in
the cache directory); a run that stops half-way leaves no half cache behind (it writes into a
temporary directory and renames it).
"""
import argparse
import decimal
import fcntl
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tpch_common as tc  # noqa: E402


def export(scale_factor, final_dir, threads):
    work = final_dir + ".tmp-%d" % os.getpid()
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # On disk, so that DuckDB may spill the larger scale factors instead of holding them whole.
    con = tc.connect(os.path.join(work, "generate.duckdb"))
    con.execute("SET threads = %d" % threads)
    con.execute("SET preserve_insertion_order = true")
    start = time.time()
    con.execute("CALL dbgen(sf = %r)" % scale_factor)
    print("tpch_export: dbgen(sf=%g) took %.1f s" % (scale_factor, time.time() - start),
          file=sys.stderr)
    for table, column, expression in tc.COLUMNS:
        values = con.execute("SELECT %s FROM %s" % (expression, table)).fetchnumpy()
        tc.write_column(tc.column_file(work, table, column), values[next(iter(values))])
    with open(os.path.join(work, "reference.txt"), "w") as f:
        queries = {
            "customer-orders": "SELECT count(*), sum(o_totalprice) FROM customer JOIN orders "
                               "ON c_custkey = o_custkey",
            "orders-lineitem": "SELECT count(*), sum(l_extendedprice) FROM orders JOIN lineitem "
                               "ON o_orderkey = l_orderkey",
        }
        for join, query in queries.items():
            count, total = con.execute(query).fetchone()
            cents = int((decimal.Decimal(total or 0) * 100).to_integral_value())
            f.write("%s %d %d\n" % (join, count, cents))
    con.close()
    os.remove(os.path.join(work, "generate.duckdb"))
    for leftover in os.listdir(work):
        if leftover.startswith("generate.duckdb"):
            os.remove(os.path.join(work, leftover))
    os.rename(work, final_dir)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale-factor", type=float, default=1.0)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    if not args.scale_factor > 0:
        raise SystemExit("tpch_export: --scale-factor must be positive, got %g" % args.scale_factor)
    os.makedirs(args.cache_dir, exist_ok=True)
    final_dir = os.path.join(args.cache_dir, tc.scale_dir_name(args.scale_factor))
    with open(os.path.join(args.cache_dir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(final_dir, "reference.txt")):
            shutil.rmtree(final_dir, ignore_errors=True)
            export(args.scale_factor, final_dir, args.threads)
    print(final_dir)


if __name__ == "__main__":
    main()
