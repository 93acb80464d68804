// join on oneTBB, as its user would write it: the same steps (join::join_phases) under
// tbb::parallel_for with the simple_partitioner, one task per morsel of R records (bound,
// partition, probe; choose_table between bound and partition) and one per partition's table (build: oneTBB cannot place a task on a thread, so a
// table is filled by the one task that owns it), partial sums in a tbb::combinable; inside a
// tbb::task_arena of W slots (the calling thread takes one). The dense table's memory and the
// scatter buffer are kept from run to run (join::run_memory), as join::tessera_join keeps them.
#include <tbb/blocked_range.h>
#include <tbb/combinable.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <cstddef>

#include "common/onetbb_placement.h"
#include "join/join.h"
#include "join/join_phases.h"

namespace tessera::bench::join_bench {

namespace {

::join::join_result join_once(const config& cfg, ::join::run_memory& table_memory) {
  ::join::join_phases run(cfg.input, cfg.workers, cfg.records_per_task, &table_memory);
  using range = tbb::blocked_range<std::size_t>;
  tbb::parallel_for(
      range(0, run.build_morsels(), 1),
      [&](const range& r) {
        for (std::size_t m = r.begin(); m < r.end(); ++m) run.bound_morsel(m);
      },
      tbb::simple_partitioner());
  run.choose_table();
  tbb::parallel_for(
      range(0, run.build_morsels(), 1),
      [&](const range& r) {
        for (std::size_t m = r.begin(); m < r.end(); ++m) run.partition_morsel(m);
      },
      tbb::simple_partitioner());
  tbb::parallel_for(
      range(0, run.partitions(), 1),
      [&](const range& r) {
        for (std::size_t p = r.begin(); p < r.end(); ++p) {
          run.allocate_partition(static_cast<unsigned>(p));
          run.build(static_cast<unsigned>(p), 0, run.build_morsels());
        }
      },
      tbb::simple_partitioner());
  tbb::combinable<::join::join_result> partial;
  tbb::parallel_for(
      range(0, run.probe_morsels(), 1),
      [&](const range& r) {
        partial.local() += run.probe_morsels(r.begin(), r.end());
      },
      tbb::simple_partitioner());
  return partial.combine([](::join::join_result a, const ::join::join_result& b) {
    a += b;
    return a;
  });
}

}  // namespace

measurement run_onetbb(const config& cfg) {
  onetbb_arena arena(cfg.workers, cfg.tessera.pin);  // this_worker = slot; --pin
  ::join::run_memory own_memory;  // kept from run to run, as tessera_join keeps it
  ::join::run_memory& table_memory = cfg.table_memory != nullptr ? *cfg.table_memory : own_memory;
  return measure(cfg.label, cfg.repeat, [&] {
    ::join::join_result r;
    stopwatch clock;
    arena.execute([&] { r = join_once(cfg, table_memory); });
    const double seconds = clock.seconds();
    return checked("onetbb", cfg, r, seconds);
  });
}

}  // namespace tessera::bench::join_bench
