// bench/common/worker_counters.h — one cache-line-padded counter per worker, for benchmarks that
// verify how many tasks ran without making the count itself a contended atomic.
//
// Each slot is written by one thread at a time (the worker with that index) with a relaxed
// load + store, not a read-modify-write; total() is exact once the writers are synchronized
// with the reader (a group wait, a thread join, the end of a parallel region).
//
//   worker_counters executed(workers);
//   executed.add(ctx.worker().value);   // inside a task
//   rt.wait(g);
//   if (executed.total() != expected) throw bench_failure("lost tasks");
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace tessera::bench {

/// The calling thread's worker index, for competitors whose own query is a call into their
/// library: oneTBB's this_task_arena::current_thread_index() cost ~3 ns per task on the 2-core VM,
/// a third of a whole tessera task, so counting with it made oneTBB look slower than it is. Set
/// where a thread joins (onetbb_placement, the first parallel region of an OpenMP run), read
/// inline. tessera's tasks use ctx.worker(), one load.
inline thread_local unsigned this_worker = 0;

class worker_counters {
 public:
  explicit worker_counters(unsigned workers) : m_slots(workers) {}

  void add(unsigned worker, std::uint64_t n = 1) noexcept {
    auto& v = m_slots[worker].value;
    v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t total() const noexcept {
    std::uint64_t sum = 0;
    for (const auto& s : m_slots) sum += s.value.load(std::memory_order_relaxed);
    return sum;
  }
  void reset() noexcept {
    for (auto& s : m_slots) s.value.store(0, std::memory_order_relaxed);
  }
  unsigned size() const noexcept { return static_cast<unsigned>(m_slots.size()); }

 private:
  struct alignas(64) slot {
    std::atomic<std::uint64_t> value{0};
  };
  std::vector<slot> m_slots;
};

}  // namespace tessera::bench
