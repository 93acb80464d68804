// bench/join/join.h — the morsel-driven hash join on TPC-H (apps/join) against DuckDB's own join
// of the same tables and the same algorithm on oneTBB.
//
// Every implementation joins the same columns, mapped from the column cache that DuckDB's
// generator filled (apps/join/scripts/tpch_export.py), and answers count(*) and the sum of the
// probe side's price; each answer is checked against DuckDB's (stored with the cache) before its
// time counts. What is timed is the join alone (bound, partition, build, probe, combine; the
// tables are made in the timed part by every implementation):
// - tessera: join::tessera_join, its task graph built once per configuration, run per sample;
// - onetbb: join::join_phases (the same steps) under tbb::parallel_for with the
//   simple_partitioner over morsels of R records, one task per partition's table, partial sums
//   in a tbb::combinable;
// - duckdb: DuckDB's hash join of the same query, through its Python API in a helper process
//   (bench/join/duckdb_join.py) that loaded the same columns into in-memory tables first,
//   `SET threads = W`, timed around the query alone. R does not apply to it.
// ops = probe-side rows.
//
//   join_bench::config cfg{.workers = 2, .records_per_task = 4096, ...};
//   measurement m = join_bench::run_onetbb(cfg);   // bench_failure on a wrong answer
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "common/tessera_settings.h"
#include "common/timing.h"
#include "join/dense_table.h"
#include "join/join_query.h"

namespace tessera::bench::join_bench {

struct config {
  unsigned workers = 1;
  std::size_t records_per_task = 4096;
  unsigned repeat = 3;
  ::join::join_kind kind = ::join::join_kind::customer_orders;
  ::join::join_input input;
  ::join::join_result expected;   ///< DuckDB's answer
  std::filesystem::path cache;    ///< the cache directory (the DuckDB helper loads from it)
  std::string label;              ///< for progress lines
  tessera_settings tessera;       ///< pin: every implementation; the rest: tessera
  /// The dense table's memory and scatter buffer kept between runs; shared by the
  /// configurations of one implementation that take turns (never two runs at once). nullptr:
  /// the run's own.
  ::join::run_memory* table_memory = nullptr;
};

/// sample{probe rows, seconds}, or bench_failure naming the implementation and both answers.
sample checked(const char* implementation, const config& cfg, const ::join::join_result& got,
               double seconds);

measurement run_tessera(const config& cfg);
measurement run_onetbb(const config& cfg);
measurement run_duckdb(const config& cfg);

}  // namespace tessera::bench::join_bench
