// tessera/loop_options.h — how a loop (parallel_for.h, parallel_reduce.h) is split, at which
// priority its pieces run, and how it is stopped early.
#pragma once

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

}  // namespace tessera
