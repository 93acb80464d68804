// fib on tessera, in continuation-passing style: no task ever waits.
//
// The task computing fib(n) (n >= 2) allocates a join, spawns fib(n-2) as a new task, and then
// turns itself into fib(n-1) and returns `this` — recycled, no allocation. Each child hands
// its value to the join; the child that arrives second adds both and completes the parent join
// in its turn, all the way up. Joins come from the runtime's task allocator and are freed with
// runtime::discard (they are never spawned). Every fib call is one task execution.
#include <atomic>
#include <cstdint>
#include <string>

#include "fib/fib.h"
#include "tessera/tessera.h"

namespace tessera::bench::fib {

namespace {

class join final : public task {
 public:
  join(join* parent, unsigned slot, unsigned pending) noexcept
      : m_pending(pending), m_parent(parent), m_slot(slot) {}
  task* execute(context&) override { return nullptr; }  // never spawned

  std::uint64_t value() const noexcept { return m_value[0] + m_value[1]; }

  /// Delivers `value` into `slot` of `j`; the last of the two arrivals sums and goes up.
  static void complete(runtime& rt, join* j, unsigned slot, std::uint64_t value) noexcept {
    for (;;) {
      j->m_value[slot] = value;
      // acq_rel: the release publishes m_value[slot] to the sibling; for the last arrival, the
      // acquire makes the sibling's value visible before the sum.
      if (j->m_pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
      join* parent = j->m_parent;
      if (parent == nullptr) return;  // the root join belongs to the caller
      value = j->value();
      slot = j->m_slot;
      rt.discard(j);
      j = parent;
    }
  }

 private:
  std::atomic<unsigned> m_pending;
  std::uint64_t m_value[2] = {0, 0};
  join* m_parent;
  unsigned m_slot;
};

class call final : public task {
 public:
  call(int n, join* parent, unsigned slot) noexcept : m_n(n), m_slot(slot), m_parent(parent) {}

  task* execute(context& ctx) override {
    if (m_n < 2) {
      join::complete(ctx.runtime(), m_parent, m_slot, static_cast<std::uint64_t>(m_n));
      return nullptr;
    }
    auto* j = ctx.make_task<join>(m_parent, m_slot, 2u);
    ctx.spawn(ctx.make_task<call>(m_n - 2, j, 1u));
    // Become fib(n-1), the join's slot 0. A follow-up without data runs next on this worker
    // (no queue round-trip), so the recursion goes depth-first like a work-first scheduler;
    // fib(n-2) waits at the front of the queue, where thieves take the oldest, biggest pieces.
    m_n -= 1;
    m_parent = j;
    m_slot = 0;
    return this;
  }

 private:
  int m_n;
  unsigned m_slot;
  join* m_parent;
};

}  // namespace

measurement run_tessera(const config& cfg) {
  runtime rt(cfg.tessera.options(cfg.workers));
  const measurement m = measure(cfg.label, cfg.repeat, [&] {
    join root(nullptr, 0, 1);
    const std::uint64_t executed_before = rt.statistics().total().executed;
    const group g = rt.make_group();
    stopwatch clock;
    rt.spawn(rt.make_task<call>(cfg.n, &root, 0u), g);
    rt.wait(g);  // everything the tasks wrote, root's value included, is visible now
    const double seconds = clock.seconds();
    // The statistics are exact once the runtime is idle; every fib call is one execution.
    rt.wait_idle();
    const std::uint64_t executed = rt.statistics().total().executed - executed_before;
    if (executed != calls(cfg.n))
      throw bench_failure("tessera ran " + std::to_string(executed) + " tasks for fib(" +
                          std::to_string(cfg.n) + "), expected " + std::to_string(calls(cfg.n)));
    return checked("tessera", cfg.n, root.value(), seconds);
  });
  cfg.tessera.print_statistics(cfg.label, rt);
  return m;
}

}  // namespace tessera::bench::fib
