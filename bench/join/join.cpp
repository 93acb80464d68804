// The `join` subcommand: registration, flags, the data, the loop over configurations, and the
// granularity sweep table (Fig. 9 of [MxTasks]).
#include "join/join.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/registry.h"
#include "join/tpch_cache.h"

namespace tessera::bench::join_bench {

sample checked(const char* implementation, const config& cfg, const ::join::join_result& got,
               double seconds) {
  if (got != cfg.expected)
    throw bench_failure(std::string(implementation) + ": " +
                        std::string(::join::to_string(cfg.kind)) + " answered " +
                        ::join::to_string(got) + ", DuckDB answered " +
                        ::join::to_string(cfg.expected));
  return sample{.ops = cfg.input.probe_keys.size(), .seconds = seconds};
}

namespace {

const implementation_table<measurement (*)(const config&)> implementations{
    {"tessera", run_tessera}, {"onetbb", run_onetbb}, {"duckdb", run_duckdb}};

double parse_scale_factor(const std::string& text) {
  char* end = nullptr;
  const double sf = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw usage_failure("tessera-bench: --scale-factor: not a number: '" + text + "'");
  try {
    ::join::check_scale_factor(sf);
  } catch (const std::invalid_argument& e) {
    throw usage_failure(std::string("tessera-bench: --scale-factor: ") + e.what());
  }
  return sf;
}

/// Million probe rows per second of a measurement.
double mrows(const measurement& m) {
  return m.seconds > 0 ? static_cast<double>(m.ops) / m.seconds / 1e6 : 0.0;
}

/// The sweep of one join: per records_per_task, each implementation's Mrows/s per worker count,
/// then tessera's ratios, and per column the slowest granularity over the fastest.
void print_sweep(const std::string& join_name, double sf, const std::vector<unsigned>& workers,
                 const std::vector<std::uint64_t>& records,
                 const std::map<std::pair<std::string, unsigned>, std::vector<measurement>>& by,
                 const std::map<unsigned, measurement>& duckdb) {
  std::printf("granularity sweep: %s, scale factor %g, million probe rows/s (Fig. 9 of "
              "[MxTasks])\n", join_name.c_str(), sf);
  std::vector<std::pair<std::string, unsigned>> columns;
  for (const unsigned w : workers)
    for (const char* impl : {"tessera", "onetbb"})
      if (by.contains({impl, w})) columns.emplace_back(impl, w);
  std::printf("%16s", "records_per_task");
  for (const auto& [impl, w] : columns) std::printf(" %10s@%-2u", impl.c_str(), w);
  for (const unsigned w : workers) {
    if (by.contains({"tessera", w}) && by.contains({"onetbb", w})) std::printf("   vs tbb@%-2u", w);
    if (by.contains({"tessera", w}) && duckdb.contains(w)) std::printf("  vs duck@%-2u", w);
  }
  std::printf("\n");
  for (std::size_t i = 0; i < records.size(); ++i) {
    std::printf("%16llu", static_cast<unsigned long long>(records[i]));
    for (const auto& c : columns) std::printf(" %13.1f", mrows(by.at(c)[i]));
    for (const unsigned w : workers) {
      if (!by.contains({"tessera", w})) continue;
      const double t = mrows(by.at({"tessera", w})[i]);
      if (by.contains({"onetbb", w}))
        std::printf(" %11.2fx", t / std::max(1e-12, mrows(by.at({"onetbb", w})[i])));
      if (duckdb.contains(w)) std::printf(" %11.2fx", t / std::max(1e-12, mrows(duckdb.at(w))));
    }
    std::printf("\n");
  }
  std::printf("%16s", "slowest/fastest");
  for (const auto& c : columns) {
    double lo = 1e300;
    double hi = 0;
    for (const measurement& m : by.at(c)) {
      lo = std::min(lo, m.seconds);
      hi = std::max(hi, m.seconds);
    }
    std::printf(" %12.2fx", lo > 0 ? hi / lo : 0.0);
  }
  std::printf("   (time of the slowest granularity over the fastest)\n");
  for (const auto& [w, m] : duckdb)
    std::printf("duckdb@%u (its own morsels, once per worker count): %.1f million rows/s\n", w,
                mrows(m));
  std::printf("\n");
}

void run(const run_context& ctx) {
  const double sf = parse_scale_factor(ctx.flags.text("scale-factor"));
  const std::vector<std::uint64_t>& records = ctx.flags.uint_list("records-per-task");
  try {
    ::join::require_memory_for(sf);
  } catch (const std::runtime_error& e) {
    throw bench_failure(e.what());
  }
  const auto dir = ::join::ensure_cache({.root = ctx.flags.text("cache-dir"),
                                         .scale_factor = sf,
                                         .python = TESSERA_JOIN_PYTHON,
                                         .export_script = TESSERA_JOIN_EXPORT_SCRIPT});
  const ::join::tpch_columns tables = ::join::load_tpch(dir);
  std::vector<std::string> tuned;  // the implementations with a records_per_task
  for (const std::string& impl : ctx.implementations)
    if (impl != "duckdb") tuned.push_back(impl);
  for (const std::string& join_name : ctx.flags.list("join")) {
    const ::join::join_kind kind = ::join::parse_join_kind(join_name);
    std::map<std::pair<std::string, unsigned>, std::vector<measurement>> by;
    std::map<unsigned, measurement> duckdb;
    for (const unsigned w : ctx.workers) {
      // Every granularity of every implementation takes turns with the others run by run
      // (in_turns), so that a stretch of interference on a shared machine is spread over the
      // sweep instead of reading as one granularity's slowness. DuckDB (no records per task of
      // ours) takes its turns beside them once. The configurations of one implementation keep
      // one dense table's memory between them (they never run at once).
      struct cell {
        std::string impl;
        std::size_t granularity;  ///< index into records
      };
      std::vector<cell> cells;
      for (std::size_t i = 0; i < records.size(); ++i)
        for (const std::string& impl : tuned) cells.push_back({impl, i});
      if (ctx.selected("duckdb")) cells.push_back({"duckdb", 0});
      std::map<std::string, ::join::run_memory> table_memory;
      for (const std::string& impl : tuned) table_memory[impl];
      const auto details = [&](std::size_t i) {
        return "join=" + join_name + " sf=" + ctx.flags.text("scale-factor") +
               " records_per_task=" + std::to_string(records[i]);
      };
      std::vector<measurement> results(cells.size());
      std::vector<std::function<void()>> jobs;
      jobs.reserve(cells.size());
      for (std::size_t c = 0; c < cells.size(); ++c) {
        jobs.emplace_back([&, c] {
          const cell& x = cells[c];
          const config cfg{.workers = w,
                           .records_per_task = static_cast<std::size_t>(records[x.granularity]),
                           .repeat = ctx.repeat,
                           .kind = kind,
                           .input = tables.input(kind),
                           .expected = ::join::reference_answer(dir, kind),
                           .cache = dir,
                           .label = ctx.label(x.impl, w, details(x.granularity)),
                           .tessera = tessera_settings::from(ctx.flags),
                           .table_memory = x.impl == "duckdb" ? nullptr : &table_memory.at(x.impl)};
          results[c] = implementations.at(x.impl)(cfg);
        });
      }
      in_turns(std::move(jobs));
      for (std::size_t c = 0; c < cells.size(); ++c) {
        const cell& x = cells[c];
        const bool own = x.impl == "duckdb";
        row r = row("join", x.impl, w, results[c])
                    .with("join", join_name)
                    .with("scale_factor", sf)
                    .with("records_per_task",
                          own ? std::int64_t{0} : static_cast<std::int64_t>(records[x.granularity]));
        if (own) {
          r.with_remark("DuckDB's own morsels; Python API, query time alone");
          duckdb[w] = results[c];
        } else {
          by[{x.impl, w}].push_back(results[c]);
        }
        ctx.report.add(std::move(r));
      }
    }
    if (records.size() > 1) print_sweep(join_name, sf, ctx.workers, records, by, duckdb);
  }
}

const registration join_benchmark({
    .name = "join",
    .help = "morsel-driven hash join on TPC-H (DuckDB's generator): tessera's task graph against "
            "DuckDB's own join and the same algorithm on oneTBB",
    .implementations = implementations.names(),
    .reference = "onetbb",
    .flags = tessera_settings::add_flags(
        {string_flag("scale-factor", "1",
                     "TPC-H scale factor (the cache is generated once per scale factor)", "SF"),
         choice_list_flag("join", "customer-orders", {"customer-orders", "orders-lineitem"},
                          "customer-orders (build customer, probe orders) and/or "
                          "orders-lineitem (build orders, probe lineitem)"),
         uint_list_flag("records-per-task", "128,256,512,1024,2048,4096,8192,16384,32768,65536",
                        "records per build and probe task (the morsel); several: a sweep table",
                        1, std::int64_t{1} << 32),
         string_flag("cache-dir", TESSERA_JOIN_CACHE_DIR,
                     "root of the TPC-H column cache (sf<N>/ under it)", "DIR")}),
    .run = run,
});

}  // namespace

}  // namespace tessera::bench::join_bench
