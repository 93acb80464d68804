// bench/common/tessera_settings.h — how every benchmark starts a tessera runtime, and the flags
// that change it (--pin, --spin-us, --resource-memory, --runtime-stats), registered once here
// for all subcommands.
//
//   .flags = tessera_settings::add_flags({int_flag("n", 30, "fib argument")}),
//   tessera_settings s = tessera_settings::from(ctx.flags);
//   tessera::runtime rt(s.options(workers));
//   ... runs ...
//   s.print_statistics(label, rt);   // per-worker counters on stderr with --runtime-stats
#pragma once

#include <string>
#include <vector>

#include "common/flags.h"

namespace tessera {
class runtime;
struct runtime_options;
}  // namespace tessera

namespace tessera::bench {

struct tessera_settings {
  /// --[no-]pin: pin workers to CPUs (the runtime's default: yes); the competitors' threads are
  /// pinned the same way (common/placement.h)
  bool pin = true;
  bool statistics = false;  ///< --[no-]runtime-stats: print runtime statistics after a config
  /// --spin-us: how long an idle worker spins before it parks (runtime_options::spin_before_park)
  long long spin_us = 200;  // (the runtime's default)
  /// --resource-memory: where tessera's resources live (runtime_options::resources): "pool" (the
  /// task allocator's chunks, on huge pages) or "heap" (operator new)
  std::string resource_memory = "pool";
  /// --[no-]adapt-distance: each worker adapts its prefetch distance
  /// (runtime_options::adapt_prefetch_distance; the runtime's default: yes)
  bool adapt_distance = true;

  static tessera_settings from(const flag_values& flags);
  /// `own` followed by the flags above.
  static std::vector<flag_definition> add_flags(std::vector<flag_definition> own);

  runtime_options options(unsigned workers) const;
  /// With --runtime-stats: "<label>: runtime statistics" and rt.statistics() on stderr.
  void print_statistics(const std::string& label, const runtime& rt) const;
};

}  // namespace tessera::bench
