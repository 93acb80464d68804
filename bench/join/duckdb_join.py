#!/usr/bin/env python3
"""tessera-bench join's DuckDB competitor: loads the columns of one join from the column cache
(the same files the other implementations map) into in-memory DuckDB tables, then runs the join
query once per line "run" read on stdin and answers "<seconds> <count> <sum>" on stdout, the
time taken around the query alone. "quit" or the end of stdin ends it.

    duckdb_join.py --cache DIR --join orders-lineitem --threads 2 [--cpus 0,1]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "apps",
                                "join", "scripts"))
import tpch_common as tc  # noqa: E402

TABLES = {
    "customer-orders": [("customer", ["c_custkey"]), ("orders", ["o_custkey", "o_totalprice"])],
    "orders-lineitem": [("orders", ["o_orderkey"]),
                        ("lineitem", ["l_orderkey", "l_extendedprice"])],
}
QUERIES = {
    "customer-orders": "SELECT count(*), sum(o_totalprice) FROM customer JOIN orders "
                       "ON c_custkey = o_custkey",
    "orders-lineitem": "SELECT count(*), sum(l_extendedprice) FROM orders JOIN lineitem "
                       "ON o_orderkey = l_orderkey",
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", required=True)
    parser.add_argument("--join", required=True, choices=sorted(QUERIES))
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--cpus", default="")
    args = parser.parse_args()
    if args.cpus:  # before DuckDB starts a thread: its threads inherit the mask
        os.sched_setaffinity(0, [int(c) for c in args.cpus.split(",")])
    import duckdb
    con = duckdb.connect(":memory:")
    for table, columns in TABLES[args.join]:
        source = {c: tc.read_column(tc.column_file(args.cache, table, c)) for c in columns}
        con.register("source", source)
        con.execute("CREATE TABLE %s AS SELECT * FROM source" % table)
        con.unregister("source")
        del source
    con.execute("SET threads = %d" % args.threads)
    query = QUERIES[args.join]
    print("ready duckdb %s" % duckdb.__version__, flush=True)
    for line in sys.stdin:
        if line.strip() != "run":
            break
        start = time.perf_counter()
        count, total = con.execute(query).fetchone()
        seconds = time.perf_counter() - start
        print("%.9f %d %d" % (seconds, count, total or 0), flush=True)


if __name__ == "__main__":
    main()
