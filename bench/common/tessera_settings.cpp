#include "common/tessera_settings.h"

#include <chrono>
#include <cstdio>

#include "tessera/runtime.h"

namespace tessera::bench {

tessera_settings tessera_settings::from(const flag_values& flags) {
  tessera_settings s;
  s.pin = flags.boolean("pin");
  s.statistics = flags.boolean("runtime-stats");
  s.spin_us = flags.integer("spin-us");
  s.resource_memory = flags.text("resource-memory");
  s.adapt_distance = flags.boolean("adapt-distance");
  return s;
}

std::vector<flag_definition> tessera_settings::add_flags(std::vector<flag_definition> own) {
  own.push_back(
      bool_flag("pin", true,
                "pin worker i of every implementation (tessera's and the competitors') "
                "to tessera's CPU for worker i (the process's CPUs, one per core before SMT "
                "siblings)"));
  own.push_back(int_flag("spin-us", runtime_options{}.spin_before_park.count(),
                         "tessera: microseconds an idle worker spins before it parks", 0,
                         10'000'000));
  own.push_back(choice_flag(
      "resource-memory", "pool", {"pool", "heap"},
      "tessera: where resources (a tree's nodes) live: pool (the task allocator's 2 MiB chunks, "
      "advised for transparent huge pages) or heap (operator new, as the competitors' nodes)"));
  own.push_back(bool_flag("adapt-distance", runtime_options{}.adapt_prefetch_distance,
                          "tessera: each worker tries twice and half its prefetch distance now "
                          "and then and keeps the faster (no: the distance set)"));
  own.push_back(bool_flag("runtime-stats", false,
                          "print tessera's per-worker statistics (stderr) per configuration"));
  return own;
}

runtime_options tessera_settings::options(unsigned workers) const {
  runtime_options o;
  o.workers = workers;
  o.pin = pin;
  o.spin_before_park = std::chrono::microseconds(spin_us);
  o.resources = resource_memory == "heap" ? tessera::resource_memory::heap
                                          : tessera::resource_memory::pool;
  o.adapt_prefetch_distance = adapt_distance;
  return o;
}

void tessera_settings::print_statistics(const std::string& label, const runtime& rt) const {
  if (!statistics) return;
  std::fprintf(stderr, "tessera-bench: %s: runtime statistics, all runs%s\n%s", label.c_str(),
               rt.pinned() ? "" : " (unpinned)", rt.statistics().to_string().c_str());
}

}  // namespace tessera::bench
