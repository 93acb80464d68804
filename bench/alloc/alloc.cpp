// The `alloc` subcommand: registration, flags, and the loop over configurations.
#include "alloc/alloc.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/registry.h"

namespace tessera::bench::alloc {

namespace {

void run(const run_context& ctx) {
  const auto ops = static_cast<std::uint64_t>(ctx.flags.integer("ops"));
  const auto window = static_cast<unsigned>(ctx.flags.integer("window"));
  for (const auto& pattern_name : ctx.flags.list("pattern")) {
    const pattern shape = pattern_name == "window" ? pattern::window : pattern::crossthread;
    for (const auto& size_name : ctx.flags.list("sizes")) {
      const auto bytes = static_cast<unsigned>(std::stoul(size_name));
      for (const unsigned w : ctx.workers) {
        // Who sits out this configuration, and why; the others take turns run by run
        // (measure_in_turns), so that a slow phase of a shared machine falls on all of them.
        std::vector<std::string> runs;
        std::map<std::string, library> libraries;
        std::map<std::string, std::string> sitting_out;
        for (const auto& impl : ctx.implementations) {
          if (shape == pattern::crossthread && w < 2) {
            sitting_out[impl] = "needs 2+ workers";
            continue;
          }
          if (impl != "tessera" && impl != "tessera-system") {
            library lib = load_library(impl);
            if (!lib.unavailable.empty()) {
              sitting_out[impl] = lib.unavailable;
              continue;
            }
            libraries[impl] = std::move(lib);
          }
          runs.push_back(impl);
        }
        const std::vector<measurement> results =
            measure_in_turns(runs, [&](const std::string& impl) {
              const config cfg{
                  .workers = w,
                  .ops = ops,
                  .bytes = bytes,
                  .window = window,
                  .shape = shape,
                  .repeat = ctx.repeat,
                  .label = ctx.label(impl, w, "pattern=" + pattern_name + " size=" + size_name),
                  .tessera = tessera_settings::from(ctx.flags)};
              if (impl == "tessera") return run_tessera(cfg, false);
              if (impl == "tessera-system") return run_tessera(cfg, true);
              return run_library(cfg, libraries.at(impl));
            });
        for (const auto& impl : ctx.implementations) {
          const auto at = std::find(runs.begin(), runs.end(), impl);
          row r = at == runs.end()
                      ? row::skipped("alloc", impl, w, sitting_out.at(impl))
                      : row("alloc", impl, w, results[static_cast<std::size_t>(at - runs.begin())]);
          ctx.report.add(std::move(r)
                             .with("pattern", pattern_name)
                             .with("size", bytes)
                             .with("window", window));
        }
      }
    }
  }
}

const registration alloc_benchmark({
    .name = "alloc",
    .help =
        "one task-sized allocation + free: tessera's task allocator vs malloc, jemalloc, mimalloc",
    .implementations = {"tessera", "tessera-system", "malloc", "jemalloc", "mimalloc"},
    .reference = "malloc",
    .flags = tessera_settings::add_flags(
        {int_flag("ops", 4'000'000, "alloc+free pairs per worker per run", 1),
         choice_list_flag("sizes", "64,128", {"64", "128", "256", "512"}, "object sizes in bytes"),
         int_flag("window", 64,
                  "live objects per round (window) / objects per batch "
                  "(crossthread)",
                  1, 1 << 20),
         choice_list_flag("pattern", "all", {"window", "crossthread"},
                          "window: alloc N then free N on one worker; crossthread: freed "
                          "by the next worker")}),
    .run = run,
    .prepare_process = prepare_process,
});

}  // namespace

}  // namespace tessera::bench::alloc
