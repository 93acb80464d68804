// loop on OpenMP: `#pragma omp parallel for schedule(static)` (sums: with `reduction(+:)`) of
// `workers` threads per loop (libgomp keeps its threads between regions).
#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/openmp_placement.h"
#include "loop/loop.h"

namespace tessera::bench::loop {

measurement run_openmp(const config& cfg) {
  omp_set_dynamic(0);
  const int threads = static_cast<int>(cfg.workers);
  const saved_cpu_mask caller;  // OpenMP's thread 0 (this one) is pinned during the runs only
  const std::uint32_t* in = cfg.input->in.data();
  const auto n = static_cast<std::ptrdiff_t>(cfg.elements);
  return measure(cfg.label, cfg.repeat, [&] {
    if (cfg.op == operation::sum) {
      place_openmp_threads(threads, cfg.tessera.pin);
      std::uint64_t total = 0;
      stopwatch clock;
      for (unsigned k = 0; k < cfg.loops; ++k) {
        std::uint64_t s = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : s)
        for (std::ptrdiff_t i = 0; i < n; ++i) s += sum_term(in[i], k);
        total += s;
      }
      const double seconds = clock.seconds();
      return checked_sum("openmp", cfg, total, seconds);
    }
    std::vector<std::uint32_t> out = fresh_output(cfg);
    std::uint32_t* o = out.data();
    place_openmp_threads(threads, cfg.tessera.pin);  // thread i on tessera's CPU of worker i
    stopwatch clock;
    for (unsigned k = 0; k < cfg.loops; ++k) {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (std::ptrdiff_t i = 0; i < n; ++i) o[i] = pass_update(o[i], in[i], k);
    }
    const double seconds = clock.seconds();
    return checked("openmp", cfg, out, seconds);
  });
}

}  // namespace tessera::bench::loop
