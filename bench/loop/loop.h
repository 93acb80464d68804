// bench/loop/loop.h — parallel loops over an array in three task systems.
//
// Each run makes `loops` passes over `elements` 32-bit values, back to back, each pass one
// parallel loop, with the system's default split (tessera: ~16 pieces per worker; oneTBB:
// auto_partitioner; OpenMP: schedule(static)). Two operations:
// - update (parallel_for, tbb::parallel_for, `#pragma omp parallel for`): pass k sets
//   out[i] = mix(out[i] + in[i] + k), so every pass must have run over every element for the
//   check after the run to pass;
// - sum (parallel_reduce, tbb::parallel_reduce, `reduction(+:)`): pass k adds up mix(in[i] + k)
//   over the array into a 64-bit total; the run's total of every pass is checked.
// ops = elements x loops. Large arrays measure the memory system; small ones with many loops
// measure what a loop costs to start and to finish (every system's calling thread takes part in
// its loops; `tessera-task` runs the loops from inside the runtime, one continuation after
// another, and the caller waits once).
//
//   loop::config cfg{.workers = 2, .elements = 1 << 20, .loops = 10, .repeat = 3};
//   measurement m = loop::run_onetbb(cfg);     // throws bench_failure on a wrong result
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/tessera_settings.h"
#include "common/timing.h"

namespace tessera::bench::loop {

/// The per-element work: a multiplicative hash, a few cycles, no memory beside the element.
inline std::uint32_t mix(std::uint32_t x) noexcept {
  x *= 2654435761u;
  return x ^ (x >> 15);
}

/// Pass k's update of one element: every implementation and the expected result use this.
inline std::uint32_t pass_update(std::uint32_t out, std::uint32_t in, unsigned k) noexcept {
  return mix(out + in + k);
}

/// Pass k's update of [first, last): every implementation's piece of an update pass.
inline void update_piece(const std::uint32_t* in, std::uint32_t* out, std::size_t first,
                         std::size_t last, unsigned k) noexcept {
  for (std::size_t i = first; i < last; ++i) out[i] = pass_update(out[i], in[i], k);
}

/// Pass k's term of element i in a sum.
inline std::uint64_t sum_term(std::uint32_t in, unsigned k) noexcept { return mix(in + k); }

/// Pass k's sum over [first, last): every implementation's piece of a sum.
inline std::uint64_t sum_piece(const std::uint32_t* in, std::size_t first, std::size_t last,
                               unsigned k) noexcept {
  std::uint64_t s = 0;
  for (std::size_t i = first; i < last; ++i) s += sum_term(in[i], k);
  return s;
}

enum class operation { update, sum };

/// The input and, computed once per configuration, what `out` must hold after `loops` update
/// passes, and what `loops` sum passes add up to.
struct data {
  data(std::size_t elements, unsigned loops);
  std::vector<std::uint32_t> in;
  std::vector<std::uint32_t> expected;
  std::uint64_t expected_sum = 0;
  unsigned loops;
};

struct config {
  unsigned workers = 1;
  std::size_t elements = 0;
  unsigned loops = 1;
  operation op = operation::update;
  std::size_t grain = 0;  ///< tessera: loop_options::grain (0: its default)
  unsigned repeat = 3;
  std::string label;         ///< for progress lines
  tessera_settings tessera;  ///< pin: every implementation (common/placement.h); the rest: tessera
  const data* input = nullptr;
};

/// A fresh output array (zeros) for one run.
std::vector<std::uint32_t> fresh_output(const config& cfg);
/// sample{elements x loops, seconds}, or bench_failure naming the first wrong element.
sample checked(const char* implementation, const config& cfg, const std::vector<std::uint32_t>& out,
               double seconds);

/// sample{elements x loops, seconds}, or bench_failure if `total` is not the expected sum.
sample checked_sum(const char* implementation, const config& cfg, std::uint64_t total,
                   double seconds);

measurement run_tessera(const config& cfg);
measurement run_tessera_task(const config& cfg);
measurement run_onetbb(const config& cfg);
measurement run_openmp(const config& cfg);

}  // namespace tessera::bench::loop
