// The `ycsb` subcommand: registration, flags, and the loop over configurations.
//
// For every worker count, `--repeat` rounds in which the implementations take turns; a turn is a
// fresh tree, the load phase (timed), the checks, the run phase (timed), the checks, the tree
// freed. The table reports the median (or best) of each phase, with the ratio against `threads`.
#include "ycsb/ycsb.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/registry.h"
#include "kv/checker.h"
#include "tessera/runtime.h"
#include "ycsb/trace.h"

namespace tessera::bench::ycsb_bench {

namespace {

// The default size: a tree of ~250 MB, far larger than the last-level cache (the regime the
// runtime's prefetching is for; at 2 M records the tree nearly fits a 32 MiB L3 and the threads
// baseline's misses mostly hit). The whole default command (4 implementations, workers 1,2, one
// run each, load + run of 10 M operations) is expected to take about 2 minutes on the 2-core
// development machine (20 M records took 3m02s there).
constexpr std::int64_t default_records = 10'000'000;
constexpr std::int64_t default_operations = 10'000'000;
constexpr unsigned default_repeat = 1;

struct settings {
  workload_options workload;
  tessera_config tessera;  ///< workers and prefetch distance set per configuration
  bool check = true;
  bool show_progress = false;
  std::string write_load_file;  ///< non-empty: write the prepared phases as traces and stop
  std::string write_run_file;
};

[[noreturn]] void usage_error(const std::string& flag, const std::string& what) {
  throw usage_failure("tessera-bench: " + flag + ": " + what);
}

kv::tree_sync parse_sync(const std::string& name) {
  if (name == "latch") return kv::tree_sync::spinlock;
  if (name == "rwlatch") return kv::tree_sync::rwlatch;
  if (name == "optimistic") return kv::tree_sync::optimistic;
  if (name == "scheduling") return kv::tree_sync::scheduling;
  return kv::tree_sync::automatic;
}

settings read_settings(const run_context& ctx) {
  const flag_values& f = ctx.flags;
  settings s;
  s.workload.workload = f.text("workload")[0];
  if (f.text("distribution") != "auto")
    s.workload.distribution = ::ycsb::parse_distribution(f.text("distribution"));
  s.workload.records = static_cast<std::uint64_t>(f.integer("records"));
  s.workload.operations = static_cast<std::uint64_t>(f.integer("operations"));
  s.workload.seed = static_cast<std::uint64_t>(f.integer("seed"));
  s.workload.load_file = f.text("load-file");
  s.workload.run_file = f.text("run-file");
  if (!s.workload.load_file.empty() && s.workload.run_file.empty())
    usage_error("--load-file", "needs --run-file too (a generated run reads generated keys)");
  // A trace decides what the generator would: a flag for the generator beside it would be
  // ignored, so it is refused (the load is still generated with --run-file alone: --records and
  // --seed then shape it).
  if (!s.workload.run_file.empty()) {
    std::vector<const char*> ignored = {"operations", "workload", "distribution"};
    if (!s.workload.load_file.empty()) {
      ignored.push_back("records");
      ignored.push_back("seed");
    }
    for (const char* name : ignored) {
      if (f.given(name)) {
        usage_error("--" + std::string(name),
                    s.workload.load_file.empty()
                        ? "has no effect with --run-file (the run replays the trace)"
                        : "has no effect with --load-file and --run-file (both phases replay "
                          "traces)");
      }
    }
  }
  s.tessera.sync = parse_sync(f.text("sync"));
  s.tessera.prefetch_distance = static_cast<unsigned>(f.integer("prefetch-distance"));
  s.tessera.batch = static_cast<std::uint32_t>(f.integer("batch"));
  s.tessera.batches_per_worker = static_cast<unsigned>(f.integer("batches-per-worker"));
  s.tessera.coupled_bytes = static_cast<std::size_t>(f.integer("coupled-kib")) * 1024;
  s.tessera.visit_bytes = static_cast<std::size_t>(f.integer("visit-bytes"));
  {
    // "llc": kv::tree_options' default (the last-level cache); otherwise KiB.
    const std::string& leaf = f.text("coupled-leaf-kib");
    if (leaf != "llc") {
      std::size_t used = 0;
      unsigned long long kib = 0;
      try {
        kib = std::stoull(leaf, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != leaf.size() || leaf[0] == '-' || kib > (1ULL << 30))
        usage_error("--coupled-leaf-kib", "wants llc or a count of KiB from 0 to 1073741824");
      s.tessera.coupled_leaf_bytes = static_cast<std::size_t>(kib) * 1024;
    }
  }
  s.tessera.runtime = tessera_settings::from(f);
  s.check = f.boolean("check");
  s.write_load_file = f.text("write-load-file");
  s.write_run_file = f.text("write-run-file");
  if (s.write_load_file.empty() != s.write_run_file.empty())
    usage_error(s.write_load_file.empty() ? "--write-run-file" : "--write-load-file",
                "needs --write-load-file and --write-run-file together");
  const std::string& p = f.text("progress");
  s.show_progress = p == "yes" || (p == "auto" && isatty(STDERR_FILENO) == 1);
  return s;
}

workload_data prepare(const settings& s) {
  try {
    return prepare_workload(s.workload);
  } catch (const ::ycsb::trace_error& e) {
    const bool load = !s.workload.load_file.empty() && e.file() == s.workload.load_file;
    usage_error(load ? "--load-file" : "--run-file", e.what());
  } catch (const std::invalid_argument& e) {
    usage_error("--records", e.what());  // the generator's spec checks (e.g. latest needs 2)
  }
}

/// The tessera store at `workers` workers with the given prefetch distance.
std::unique_ptr<store> tessera_store(unsigned workers, const settings& s, unsigned distance) {
  tessera_config t = s.tessera;
  t.workers = workers;
  t.prefetch_distance = distance;
  return make_tessera_store(t);
}

/// The competitors, in the order they take their turns and are listed: each makes its store
/// for a worker count. Every implementation is pinned alike (--pin).
const implementation_table<std::unique_ptr<store> (*)(unsigned workers, const settings& s)>
    implementations{
        {"tessera",
         [](unsigned w, const settings& s) {
           return tessera_store(w, s, s.tessera.prefetch_distance);
         }},
        {"tessera-noprefetch",
         [](unsigned w, const settings& s) { return tessera_store(w, s, 0); }},
        {"threads",
         [](unsigned w, const settings& s) {
           return make_threads_store(w, s.tessera.batch, s.tessera.runtime.pin);
         }},
        {"tbb",
         [](unsigned w, const settings& s) {
           return make_tbb_store(w, s.tessera.batch, s.tessera.runtime.pin);
         }},
#if defined(TESSERA_YCSB_EXTERNAL)
        {"btreeolc",
         [](unsigned w, const settings& s) {
           return make_btreeolc_store(w, s.tessera.batch, s.tessera.runtime.pin);
         }},
        {"artolc",
         [](unsigned w, const settings& s) {
           return make_artolc_store(w, s.tessera.batch, s.tessera.runtime.pin);
         }},
#endif
    };

std::string mops(std::uint64_t ops, double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f Mops/s", seconds > 0 ? ops / seconds / 1e6 : 0.0);
  return buf;
}

/// CPU time used by the whole process so far (all threads), in seconds.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

/// One timed phase plus its checks; returns its sample or throws bench_failure.
sample run_phase(store& st, const phase_data& phase, const char* phase_name,
                 const std::string& impl, unsigned workers, const std::string& attempt,
                 const settings& s, const run_context& ctx) {
  const std::string where = ctx.label(impl, workers) + " " + phase_name;
  error_log errors;
  double seconds = 0;
  double cpu = 0;  // CPU seconds of the process during the phase: on a shared machine, what
                   // the phase cost without the time its threads waited for a CPU
  {
    progress meter(impl + " " + phase_name + "  w=" + std::to_string(workers) + attempt,
                   phase.ops.size(), workers, s.show_progress);
    meter.start();
    const double cpu_start = process_cpu_seconds();
    seconds = st.execute(phase, meter, errors);
    cpu = process_cpu_seconds() - cpu_start;
  }
  if (errors.count() > 0)
    throw bench_failure(where + ": " + std::to_string(errors.count()) +
                        " wrong answer(s); first: " + errors.first());
  std::string tree = "tree not checked";
  std::uint64_t keys = 0;
  if (st.root() == nullptr) {  // an external tree: checked by its own lookups, even --no-check
    if (const wrong_answer w = st.check_by_lookups(phase, keys)) {
      char what[256];
      w.describe(what, sizeof what);
      throw bench_failure(where + ": " + what);
    }
    tree = "every loaded key found by lookup, with its value";
  } else if (s.check) {
    const kv::check_result r = kv::check_tree(st.root());
    if (!r.ok) throw bench_failure(where + ": kv::check_tree: " + r.message);
    if (const wrong_answer w = content_error(st.root(), phase.updated_keys, phase.unsettled_keys,
                                               phase.settled_count)) {
      char what[256];
      w.describe(what, sizeof what);
      throw bench_failure(where + ": " + what);
    }
    keys = r.stats.keys;
    tree = "tree and values ok: height " + std::to_string(r.stats.height) + ", " +
           std::to_string(r.stats.leaves) + " leaves";
  } else {
    keys = st.size();
  }
  if (phase.keys_after && keys != *phase.keys_after)
    throw bench_failure(where + ": the tree holds " + std::to_string(keys) + " keys, expected " +
                        std::to_string(*phase.keys_after));
  std::fprintf(stderr,
               "tessera-bench: %s%s: %zu ops in %.3f s, %s (cpu %.3f s, %.1f ns of cpu per op); "
               "%llu keys, %s\n",
               where.c_str(), attempt.c_str(), phase.ops.size(), seconds,
               mops(phase.ops.size(), seconds).c_str(), cpu,
               phase.ops.empty() ? 0.0 : cpu * 1e9 / static_cast<double>(phase.ops.size()),
               static_cast<unsigned long long>(keys), tree.c_str());
  return sample{.ops = phase.ops.size(), .seconds = seconds};
}

/// Writes one phase as a trace (ycsb::write_trace's plain form); a file that cannot be written
/// is a usage error naming the flag.
void write_phase(const std::vector<::ycsb::operation>& ops, const std::string& path,
                 const char* flag) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out.is_open()) ::ycsb::write_trace(out, ops);
  if (out.is_open()) out.close();
  if (!out) usage_error(flag, "cannot write '" + path + "': " + std::strerror(errno));
}

void run(const run_context& ctx) {
  const settings s = read_settings(ctx);
  stopwatch preparing;
  const workload_data data = prepare(s);
  std::fprintf(
      stderr, "tessera-bench: ycsb: %s; %zu load + %zu run operations prepared in %.1f s\n",
      data.description.c_str(), data.load.ops.size(), data.run.ops.size(), preparing.seconds());
  if (!s.write_load_file.empty()) {  // traces for other systems (scripts/compare-external.sh)
    write_phase(data.load.ops, s.write_load_file, "--write-load-file");
    write_phase(data.run.ops, s.write_run_file, "--write-run-file");
    std::fprintf(stderr, "tessera-bench: ycsb: wrote '%s' and '%s'; nothing measured\n",
                 s.write_load_file.c_str(), s.write_run_file.c_str());
    return;
  }
  if (ctx.selected("tessera") || ctx.selected("tessera-noprefetch")) {
    const std::size_t leaf_bytes = kv::resolve_coupled_leaf_bytes(s.tessera.coupled_leaf_bytes);
    const std::string coupled =
        s.tessera.coupled_bytes == 0
            ? std::string("no level read coupled")
            : "a batch's levels above the leaves read coupled (a single descent's up to " +
                  std::to_string(s.tessera.coupled_bytes / 1024) +
                  " KiB), every level up to a tree of " + std::to_string(leaf_bytes / 1024) +
                  " KiB" + (s.tessera.coupled_leaf_bytes ? "" : " (the last-level cache)");
    std::fprintf(stderr,
                 "tessera-bench: ycsb: tessera: sync %s, prefetch distance %u%s, "
                 "batches of %u, %u in flight per worker, %s, %s\n",
                 ctx.flags.text("sync").c_str(), s.tessera.prefetch_distance,
                 s.tessera.runtime.adapt_distance && s.tessera.prefetch_distance != 0
                     ? " (each worker adapts it)"
                     : "",
                 s.tessera.batch,
                 s.tessera.batches_per_worker, coupled.c_str(),
                 s.tessera.runtime.pin ? "pinned" : "not pinned");
  }

  // Rows are added phase by phase at the end (also when a configuration fails), so that the
  // table reads load, then run, each with its workers and implementations together.
  struct result {
    unsigned workers;
    std::string impl;
    measurement load, run;
  };
  std::vector<result> results;
  std::map<std::string, std::uint64_t> run_sizes;
  auto add_rows = [&] {
    for (const std::string_view phase : {"load", "run"}) {
      for (const auto& r : results) {  // in the order run: by workers, then implementation
        ctx.report.add(row("ycsb", r.impl, r.workers, phase == "load" ? r.load : r.run)
                           .with("workload", data.workload)
                           .with("distribution", data.distribution)
                           .with("records", data.load.ops.size())
                           .with("phase", phase));
      }
    }
  };

  // Per worker count, the implementations take turns repetition by repetition (A B C A B C ...,
  // as in_turns does for spawn and fib), so that a noisy phase of a shared machine hits all of
  // them. Each turn builds its own tree in the load phase and frees it after the run phase: one
  // tree is alive at a time; the stores (runtimes, thread teams, arenas) stay alive throughout.
  const auto settle = std::chrono::milliseconds(20);  // the previous store's spinning threads park
  try {
    for (const unsigned w : ctx.workers) {
      std::vector<std::unique_ptr<store>> stores;
      std::vector<std::vector<sample>> loads(ctx.implementations.size());
      std::vector<std::vector<sample>> runs(ctx.implementations.size());
      // Rows of this worker count: also those measured before one failed.
      auto keep = [&] {
        for (std::size_t k = 0; k < stores.size(); ++k) {
          if (runs[k].empty()) continue;
          stores[k]->report_statistics(ctx.label(ctx.implementations[k], w));
          results.push_back({w, ctx.implementations[k], summarize(std::move(loads[k])),
                             summarize(std::move(runs[k]))});
        }
      };
      try {
        for (const auto& impl : ctx.implementations)
          stores.push_back(implementations.at(impl)(w, s));
        for (unsigned i = 0; i < ctx.repeat; ++i) {
          const std::string attempt =
              ctx.repeat > 1 ? " (" + std::to_string(i + 1) + "/" + std::to_string(ctx.repeat) + ")"
                             : "";
          for (std::size_t k = 0; k < stores.size(); ++k) {
            const std::string& impl = ctx.implementations[k];
            store& st = *stores[k];
            if (stores.size() > 1) std::this_thread::sleep_for(settle);
            st.create_tree();
            const sample load = run_phase(st, data.load, "load", impl, w, attempt, s, ctx);
            const sample run = run_phase(st, data.run, "run", impl, w, attempt, s, ctx);
            loads[k].push_back(load);
            runs[k].push_back(run);
            run_sizes[impl + " workers=" + std::to_string(w)] = st.size();
            st.destroy_tree();
          }
        }
      } catch (...) {
        keep();
        throw;
      }
      keep();
    }
  } catch (...) {
    add_rows();
    throw;
  }
  add_rows();

  if (!data.run.keys_after) {  // order-dependent trace: report what each implementation ended with
    for (const auto& [config, keys] : run_sizes)
      std::fprintf(stderr, "tessera-bench: ycsb: after the run, %s holds %llu keys\n",
                   config.c_str(), static_cast<unsigned long long>(keys));
  }
}

const registration ycsb_benchmark({
    .name = "ycsb",
    .help = "YCSB load + run phases on the B-link tree: tessera tasks vs OLC threads / oneTBB",
    .implementations = implementations.names(),
    .reference = "threads",
    .flags = tessera_settings::add_flags(
        {choice_flag("workload", "c", {"a", "b", "c", "d", "e", "f"},
                     "YCSB core workload (a: 50% update, c: read only, e: scans, ...)"),
         choice_flag("distribution", "auto", {"auto", "uniform", "zipfian", "latest"},
                     "request distribution; auto: the workload's own (latest for d, else zipfian)"),
         int_flag("records", default_records, "records inserted by the load phase", 1),
         int_flag("operations", default_operations, "operations of the run phase", 1),
         int_flag("seed", 0x5eed, "seed of the workload generator", 0),
         choice_flag("sync", "auto", {"auto", "latch", "rwlatch", "optimistic", "scheduling"},
                     "tessera: node synchronization (auto: from the node hints; latch: spinlock)"),
         int_flag("prefetch-distance", runtime_options{}.prefetch_distance,
                  "tessera: prefetch distance in tasks (tessera-noprefetch always uses 0)", 0,
                  runtime::max_prefetch_distance),
         int_flag("batch", 500, "requests handed out per batch (chunk) to a worker", 1, 1 << 16),
         int_flag("batches-per-worker", 2, "tessera: batches in flight per worker", 1, 64),
         int_flag("coupled-kib", static_cast<std::int64_t>(kv::tree_options{}.coupled_bytes / 1024),
                  "tessera: KiB of the tree's upper levels a single descent (a task's restart "
                  "from the root) reads in one run (coupled reads, "
                  "kv::tree_options::coupled_bytes; a batch reads every level above the leaves "
                  "so; 0: one run per node, batches too)",
                  0, 1 << 20),
         int_flag("visit-bytes", static_cast<std::int64_t>(kv::tree_options{}.visit_bytes),
                  "tessera: bytes of a node each visit annotates and so prefetches, from its start "
                  "(kv::tree_options::visit_bytes; 0: only the resource header line before the node)",
                  0, static_cast<std::int64_t>(sizeof(kv::node))),
         string_flag("coupled-leaf-kib", "llc",
                     "tessera: every level read coupled, and lookups read their leaf in the "
                     "submitting task, while the whole tree takes at most this many KiB "
                     "(kv::tree_options::coupled_leaf_bytes; llc: the last-level cache; 0: never)",
                     "KIB|llc"),
         string_flag("load-file", "", "replay this trace (INSERT lines) as the load phase", "FILE"),
         string_flag("run-file", "",
                     "replay this trace as the run phase (without --load-file: after loading "
                     "--records generated records)",
                     "FILE"),
         string_flag("write-load-file", "",
                     "write the load phase as a trace (INSERT lines) and, with "
                     "--write-run-file, the run phase, then stop without measuring",
                     "FILE"),
         string_flag("write-run-file", "", "write the run phase as a trace (see --write-load-file)",
                     "FILE"),
         bool_flag("check", true,
                   "after each phase, check the tree's structure (kv::check_tree) and what every "
                   "key holds"),
         choice_flag("progress", "auto", {"auto", "yes", "no"},
                     "progress line on stderr (auto: if stderr is a terminal)")}),
    .run = run,
    .default_repeat = default_repeat,
});

}  // namespace

}  // namespace tessera::bench::ycsb_bench
