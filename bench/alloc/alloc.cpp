// The `alloc` subcommand: registration, flags, and the loop over configurations.
#include "alloc/alloc.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/registry.h"

namespace tessera::bench::alloc {

namespace {

/// An allocator under test: how to load it (nullptr: tessera's own, nothing to load) and how to
/// run it once loaded.
struct allocator {
  library (*load)() = nullptr;
  measurement (*run)(const config& cfg, const library& lib) = nullptr;
};

/// The competitors, in the order they run and are listed.
const implementation_table<allocator> implementations{
    {"tessera", {nullptr, [](const config& c, const library&) { return run_tessera(c, false); }}},
    {"tessera-system",
     {nullptr, [](const config& c, const library&) { return run_tessera(c, true); }}},
    {"malloc", {load_malloc, run_library}},
    {"jemalloc", {load_jemalloc, run_library}},
    {"mimalloc", {load_mimalloc, run_library}},
};

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
          if (const auto load = implementations.at(impl).load; load != nullptr) {
            library lib = load();
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
              const auto lib = libraries.find(impl);
              return implementations.at(impl).run(
                  cfg, lib == libraries.end() ? library{} : lib->second);
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
    .implementations = implementations.names(),
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
