// tessera/loop_options.h — how a loop (parallel_for.h, parallel_reduce.h) is split, at which
// priority its pieces run, and how it is stopped early.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stop_token>

#include "tessera/ids.h"

namespace tessera {

struct loop_options {
  /// The most indices a piece holds; 0: about 16 pieces per active worker.
  std::size_t grain = 0;
  /// Priority of every piece (ids.h).
  tessera::priority priority = tessera::priority::normal;
  /// Early exit: once a stop is requested (from the body, e.g. a search that found what it
  /// looked for, or from any thread), pieces that have not started are skipped and the loop ends
  /// normally, without an exception; pieces running finish (a body may look at the token itself
  /// to cut its piece short). A reduction then combines the pieces that ran.
  std::stop_token stop{};
};

namespace detail {

/// The grain a loop over [first, last) uses: the given one, or about 16 pieces per worker.
inline std::size_t loop_grain(std::size_t first, std::size_t last, std::size_t grain,
                              unsigned active_workers) {
  if (grain != 0) return grain;
  const std::size_t pieces = 16 * std::size_t{std::max(1u, active_workers)};
  const std::size_t n = last - first;
  return std::max<std::size_t>(1, n / pieces + (n % pieces != 0));  // rounded up, no overflow
}

}  // namespace detail

}  // namespace tessera
