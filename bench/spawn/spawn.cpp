// The `spawn` subcommand: registration, flags, and the loop over configurations.
#include "spawn/spawn.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/openmp_runtime.h"
#include "common/registry.h"

namespace tessera::bench::spawn {

std::string_view to_string(pattern p) noexcept {
  switch (p) {
    case pattern::chain: return "chain";
    case pattern::tree: return "tree";
    case pattern::roundrobin: return "roundrobin";
    case pattern::followup: return "followup";
  }
  return "?";
}

sample checked(const char* implementation, const config& cfg, std::uint64_t executed,
               double seconds) {
  if (executed != cfg.tasks)
    throw bench_failure(std::string(implementation) + " " + std::string(to_string(cfg.shape)) +
                        ": " + std::to_string(executed) + " tasks ran, expected " +
                        std::to_string(cfg.tasks));
  return sample{.ops = cfg.tasks, .seconds = seconds};
}

namespace {

pattern parse_pattern(const std::string& name) {
  if (name == "tree") return pattern::tree;
  if (name == "roundrobin") return pattern::roundrobin;
  if (name == "followup") return pattern::followup;
  return pattern::chain;
}

/// Why `impl` sits out `shape` at `workers` workers ("n/a: ..."), or nullptr if it runs it.
const char* sits_out(const std::string& impl, pattern shape, unsigned workers) {
  if (impl == "tessera") return nullptr;
  switch (shape) {
    case pattern::roundrobin: return "n/a: no way to place a task on a worker";
    case pattern::followup: return "n/a: a task cannot hand back its successor";
    default: break;
  }
  if (impl == "openmp" && shape == pattern::chain && workers == 1 && openmp_runs_tasks_at_once())
    return "n/a: this OpenMP runtime runs a task at once in a team of one thread: the chain "
           "would recurse as deep as it is long";
  return nullptr;
}

/// The competitors, in the order they run and are listed (each in its own file).
const implementation_table<measurement (*)(const config&)> implementations{
    {"tessera", run_tessera}, {"onetbb", run_onetbb}, {"openmp", run_openmp}, {"pool", run_pool}};

void run(const run_context& ctx) {
  const auto tasks = static_cast<std::uint64_t>(ctx.flags.integer("tasks"));
  for (const auto& pattern_name : ctx.flags.list("pattern")) {
    const pattern shape = parse_pattern(pattern_name);
    for (const unsigned w : ctx.workers) {
      // The implementations of one configuration take turns run by run (in_turns).
      std::vector<std::string> runs;
      for (const auto& impl : ctx.implementations)
        if (sits_out(impl, shape, w) == nullptr) runs.push_back(impl);
      const std::vector<measurement> results = measure_in_turns(runs, [&](const std::string& impl) {
        const config cfg{.workers = w,
                         .tasks = tasks,
                         .shape = shape,
                         .repeat = ctx.repeat,
                         .label = ctx.label(impl, w, "pattern=" + pattern_name),
                         .tessera = tessera_settings::from(ctx.flags)};
        return implementations.at(impl)(cfg);
      });
      for (const auto& impl : ctx.implementations) {
        const auto at = std::find(runs.begin(), runs.end(), impl);
        if (at == runs.end()) {
          ctx.report.add(row::skipped("spawn", impl, w, sits_out(impl, shape, w))
                             .with("pattern", pattern_name));
          continue;
        }
        row r("spawn", impl, w, results[static_cast<std::size_t>(at - runs.begin())]);
        r.with("pattern", pattern_name);
        if (impl == "openmp" && shape == pattern::tree)
          r.with_remark(w == 1 && openmp_runs_tasks_at_once()
                            ? "the OpenMP runtime runs every task at once in a team of one thread"
                            : "a full task queue makes OpenMP run a new task inline (libgomp: "
                              "64 x threads tasks)");
        ctx.report.add(std::move(r));
      }
    }
  }
}

const registration spawn_benchmark({
    .name = "spawn",
    .help = "millions of empty tasks (chain, tree, roundrobin, followup): per-task overhead",
    .implementations = implementations.names(),
    .reference = "onetbb",
    .flags = tessera_settings::add_flags(
        {int_flag("tasks", 4'000'000, "empty tasks per run (ops)", 1),
         choice_list_flag("pattern", "all", {"chain", "tree", "roundrobin", "followup"},
                          "task graph shapes to run")}),
    .run = run,
});

}  // namespace

}  // namespace tessera::bench::spawn
