// tessera's own queues (src/runtime/): the owner-only FIFO of a pool (local_queue.h, one thread)
// and the wait-free multi-producer inbox (mpsc_queue.h, one consumer).
#include "queue/pattern.h"
#include "runtime/local_queue.h"
#include "runtime/mpsc_queue.h"

namespace tessera::bench::queue_bench {
namespace {

struct local_fifo {
  ::tessera::detail::local_queue q;
  void push(task* t) noexcept { q.push_back(t); }
  bool try_pop(task*& t) noexcept {
    t = q.pop_front();
    return t != nullptr;
  }
};

struct inbox {
  ::tessera::detail::mpsc_queue q;
  void push(task* t) noexcept { q.push(t); }
  bool try_pop(task*& t) noexcept {
    // busy: a producer between its exchange and its link; the item comes in a moment
    for (;;) {
      switch (q.pop(t)) {
        case ::tessera::detail::pop_result::item: return true;
        case ::tessera::detail::pop_result::empty: return false;
        case ::tessera::detail::pop_result::busy: break;
      }
    }
  }
};

}  // namespace

measurement run_local_queue(const config& cfg) { return run_pattern<local_fifo>(cfg); }
measurement run_mpsc_queue(const config& cfg) { return run_pattern<inbox>(cfg); }

}  // namespace tessera::bench::queue_bench
