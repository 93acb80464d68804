// join on tessera: join::tessera_join (apps/join), the graph built once per configuration and
// run once per sample from this thread, which waits (it runs no part of the join: W workers).
#include "common/placement.h"
#include "join/join.h"
#include "join/tessera_join.h"
#include "tessera/runtime.h"

namespace tessera::bench::join_bench {

measurement run_tessera(const config& cfg) {
  runtime rt(cfg.tessera.options(cfg.workers));
  ::join::tessera_join j(rt, cfg.input, cfg.records_per_task, cfg.table_memory);
  const measurement m = measure(cfg.label, cfg.repeat, [&] {
    stopwatch clock;
    const ::join::join_result r = j.run();
    const double seconds = clock.seconds();
    return checked("tessera", cfg, r, seconds);
  });
  cfg.tessera.print_statistics(cfg.label, rt);
  return m;
}

}  // namespace tessera::bench::join_bench
