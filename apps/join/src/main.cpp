// tessera-join: runs a TPC-H join (customer-orders or orders-lineitem) with the morsel-driven
// hash join on tessera, on the column cache of a scale factor (generated first if missing), and
// checks the answer against DuckDB's stored with the cache.
//
//   tessera-join --scale-factor 1 --join orders-lineitem --workers 2 --records-per-task 4096
//
// Exit status: 0 the answers matched, 1 an error (a damaged cache, too little memory, a wrong
// answer), 2 a bad command line.
#include <chrono>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "join/join_query.h"
#include "join/tessera_join.h"
#include "join/tpch_cache.h"
#include "tessera/runtime.h"

namespace {

struct options {
  double scale_factor = 1;
  std::string join = "customer-orders";
  unsigned workers = 0;
  std::size_t records_per_task = 4096;
  unsigned repeat = 3;
  std::string cache_dir = TESSERA_JOIN_CACHE_DIR;
  std::string python = TESSERA_JOIN_PYTHON;
  bool generate = true;
};

int run(const options& o) {
  const std::vector<join::join_kind> kinds =
      o.join == "both"
          ? std::vector<join::join_kind>{join::join_kind::customer_orders,
                                         join::join_kind::orders_lineitem}
          : std::vector<join::join_kind>{join::parse_join_kind(o.join)};
  join::require_memory_for(o.scale_factor);
  const auto dir = join::ensure_cache({.root = o.cache_dir,
                                       .scale_factor = o.scale_factor,
                                       .python = o.python,
                                       .export_script = TESSERA_JOIN_EXPORT_SCRIPT,
                                       .generate = o.generate});
  const join::tpch_columns tables = join::load_tpch(dir);
  tessera::runtime_options ro;
  if (o.workers > 0) ro.workers = o.workers;
  tessera::runtime rt(ro);
  int status = 0;
  for (const join::join_kind kind : kinds) {
    const join::join_result want = join::reference_answer(dir, kind);
    join::tessera_join j(rt, tables.input(kind), o.records_per_task);
    for (unsigned i = 0; i < o.repeat; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const join::join_result got = j.run();
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const bool ok = got == want;
      std::printf("%s sf=%g workers=%u records_per_task=%zu: %s in %.4f s (%.3g probe rows/s)%s\n",
                  std::string(join::to_string(kind)).c_str(), o.scale_factor, rt.workers(),
                  o.records_per_task, join::to_string(got).c_str(), seconds,
                  static_cast<double>(tables.probe_rows(kind)) / seconds,
                  ok ? ", matches DuckDB" : "");
      if (!ok) {
        std::fprintf(stderr, "tessera-join: %s: WRONG ANSWER: %s, DuckDB says %s\n",
                     std::string(join::to_string(kind)).c_str(), join::to_string(got).c_str(),
                     join::to_string(want).c_str());
        status = 1;
      }
    }
  }
  return status;
}

int parse_and_run(int argc, char** argv) {
  options o;
  CLI::App app{"tessera-join: the morsel-driven hash join on TPC-H (DuckDB's generator), checked "
               "against DuckDB's answer",
               "tessera-join"};
  app.add_option("--scale-factor", o.scale_factor, "TPC-H scale factor (0 < sf <= 1000)")
      ->capture_default_str();
  app.add_option("--join", o.join, "customer-orders, orders-lineitem or both")
      ->capture_default_str();
  app.add_option("--workers", o.workers, "tessera workers (0: one per CPU)")
      ->capture_default_str()
      ->check(CLI::Range(0U, 1024U));
  app.add_option("--records-per-task", o.records_per_task, "rows per build and probe task")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 32));
  app.add_option("--repeat", o.repeat, "runs of each join")
      ->capture_default_str()
      ->check(CLI::Range(1U, 1000000U));
  app.add_option("--cache-dir", o.cache_dir, "root of the column cache (sf<N>/ under it)")
      ->capture_default_str();
  app.add_option("--python", o.python, "Python with duckdb (generates a missing cache)")
      ->capture_default_str();
  app.add_flag("!--no-generate", o.generate, "a missing cache is an error, not generated");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (o.join != "both") (void)join::parse_join_kind(o.join);
    join::check_scale_factor(o.scale_factor);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "tessera-join: %s\n", e.what());
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-join: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return parse_and_run(argc, argv);
  } catch (const std::exception& e) {  // CLI11's set-up, an allocation
    std::fprintf(stderr, "tessera-join: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "tessera-join: unknown exception\n");
  }
  return 1;
}
