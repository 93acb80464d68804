// loop on oneTBB: tbb::parallel_for (sums: tbb::parallel_reduce) over a blocked_range
// (auto_partitioner, the default) inside a tbb::task_arena of `workers` slots (the calling thread
// takes one of them).
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/onetbb_placement.h"
#include "loop/loop.h"

namespace tessera::bench::loop {

measurement run_onetbb(const config& cfg) {
  onetbb_arena arena(cfg.workers, cfg.tessera.pin);  // this_worker = slot; --pin
  const std::uint32_t* in = cfg.input->in.data();
  return measure(cfg.label, cfg.repeat, [&] {
    if (cfg.op == operation::sum) {
      std::uint64_t total = 0;
      stopwatch clock;
      arena.execute([&] {
        for (unsigned k = 0; k < cfg.loops; ++k) {
          total += tbb::parallel_reduce(
              tbb::blocked_range<std::size_t>(0, cfg.elements), std::uint64_t{0},
              [in, k](const tbb::blocked_range<std::size_t>& r, std::uint64_t acc) {
                return acc + sum_piece(in, r.begin(), r.end(), k);
              },
              std::plus<>{});
        }
      });
      const double seconds = clock.seconds();
      return checked_sum("onetbb", cfg, total, seconds);
    }
    std::vector<std::uint32_t> out = fresh_output(cfg);
    std::uint32_t* o = out.data();
    stopwatch clock;
    arena.execute([&] {
      for (unsigned k = 0; k < cfg.loops; ++k) {
        tbb::parallel_for(tbb::blocked_range<std::size_t>(0, cfg.elements),
                          [in, o, k](const tbb::blocked_range<std::size_t>& r) {
                            update_piece(in, o, r.begin(), r.end(), k);
                          });
      }
    });
    const double seconds = clock.seconds();
    return checked("onetbb", cfg, out, seconds);
  });
}

}  // namespace tessera::bench::loop
