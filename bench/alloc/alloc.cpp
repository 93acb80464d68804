// The `alloc` subcommand: registration, flags, and the loop over configurations.
#include "alloc/alloc.h"

#include <string>

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
        for (const auto& impl : ctx.implementations) {
          auto skip = [&](std::string why) {
            ctx.report.add(row::skipped("alloc", impl, w, std::move(why))
                               .with("pattern", pattern_name)
                               .with("size", bytes)
                               .with("window", window));
          };
          if (shape == pattern::crossthread && w < 2) {
            skip("needs 2+ workers");
            continue;
          }
          library lib;
          if (impl != "tessera" && impl != "tessera-system") {
            lib = load_library(impl);
            if (!lib.unavailable.empty()) {
              skip(lib.unavailable);
              continue;
            }
          }
          config cfg{.workers = w,
                     .ops = ops,
                     .bytes = bytes,
                     .window = window,
                     .shape = shape,
                     .repeat = ctx.repeat,
                     .label = ctx.label(impl, w, "pattern=" + pattern_name + " size=" + size_name),
                     .tessera = tessera_settings::from(ctx.flags)};
          const measurement m = impl == "tessera"          ? run_tessera(cfg, false)
                                : impl == "tessera-system" ? run_tessera(cfg, true)
                                                           : run_library(cfg, lib);
          ctx.report.add(row("alloc", impl, w, m)
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
