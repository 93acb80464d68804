// fib on the GeckoDB-style thread pool (common/thread_pool.h, [GeckoDB-pool]). Its tasks cannot
// wait either, so it runs the same continuation-passing scheme as tessera: every call is a
// submitted task; a call with n >= 2 allocates a join (operator new) and submits both children;
// the second child to finish sums and completes the parent join. Captures are kept at 16 bytes
// so that std::function stores them inline.
#include <atomic>
#include <cstdint>

#include "common/thread_pool.h"
#include "fib/fib.h"

namespace tessera::bench::fib {

namespace {

struct join {
  thread_pool* pool;
  join* parent;
  unsigned slot;
  std::atomic<unsigned> pending;
  std::uint64_t value[2] = {0, 0};
};

void complete(join* j, unsigned slot, std::uint64_t value) {
  for (;;) {
    j->value[slot] = value;
    // acq_rel: publish our value; the last arrival sees the sibling's.
    if (j->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    join* parent = j->parent;
    if (parent == nullptr) return;  // root join, owned by the caller
    value = j->value[0] + j->value[1];
    slot = j->slot;
    delete j;
    j = parent;
  }
}

void call(int n, join* parent, unsigned slot) {
  if (n < 2) {
    complete(parent, slot, static_cast<std::uint64_t>(n));
    return;
  }
  thread_pool* pool = parent->pool;
  auto* j = new join{pool, parent, slot, 2};
  pool->submit([j, n] { call(n - 1, j, 0); });
  pool->submit([j, n] { call(n - 2, j, 1); });
}

}  // namespace

measurement run_pool(const config& cfg) {
  thread_pool pool(cfg.workers, cfg.tessera.pin);
  return measure(cfg.label, cfg.repeat, [&] {
    join root{&pool, nullptr, 0, 1};
    stopwatch clock;
    const int n = cfg.n;
    join* r = &root;
    pool.submit([r, n] { call(n, r, 0); });
    pool.wait_idle();
    const double seconds = clock.seconds();
    return checked("pool", cfg.n, root.value[0] + root.value[1], seconds);
  });
}

}  // namespace tessera::bench::fib
