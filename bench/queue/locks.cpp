// Lock-based designs: a std::deque under a mutex, and the ticket queue of [Xtask] §IV-B
// ("Squeue": a bounded ring whose enqueue and dequeue each take a ticket with one fetch_add
// and wait for their slot's turn).
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>

#include "queue/pattern.h"

namespace tessera::bench::queue_bench {
namespace {

struct mutex_deque {
  std::mutex m;
  std::deque<task*> q;  // guarded by m
  void push(task* t) {
    const std::scoped_lock hold(m);
    q.push_back(t);
  }
  bool try_pop(task*& t) {
    const std::scoped_lock hold(m);
    if (q.empty()) return false;
    t = q.front();
    q.pop_front();
    return true;
  }
};

/// A ticket's slot is ring[ticket % slots]; its turn counter says whose it is: 2r for the
/// enqueuer of round r, 2r + 1 for that round's dequeuer. A pop waits for its item.
class ticket_queue {
 public:
  static constexpr bool waiting_pop = true;
  static constexpr std::uint64_t slots = 1 << 16;

  ticket_queue() : m_ring(std::make_unique<slot[]>(slots)) {}

  void push(task* t) noexcept {
    const std::uint64_t ticket = m_tail.fetch_add(1, std::memory_order_relaxed);
    slot& s = m_ring[ticket % slots];
    const std::uint64_t turn = 2 * (ticket / slots);
    unsigned spins = 0;
    // acquire: the previous round's dequeuer has read the slot
    while (s.turn.load(std::memory_order_acquire) != turn) relax(spins);
    s.value = t;
    s.turn.store(turn + 1, std::memory_order_release);  // release: publishes the value
  }
  task* pop() noexcept {
    const std::uint64_t ticket = m_head.fetch_add(1, std::memory_order_relaxed);
    slot& s = m_ring[ticket % slots];
    const std::uint64_t turn = 2 * (ticket / slots) + 1;
    unsigned spins = 0;
    // acquire: the value stored before the enqueuer's release
    while (s.turn.load(std::memory_order_acquire) != turn) relax(spins);
    task* t = s.value;
    s.turn.store(turn + 1, std::memory_order_release);  // release: the slot is free again
    return t;
  }

 private:
  struct alignas(64) slot {
    std::atomic<std::uint64_t> turn{0};
    task* value = nullptr;
  };
  std::unique_ptr<slot[]> m_ring;
  alignas(64) std::atomic<std::uint64_t> m_tail{0};
  alignas(64) std::atomic<std::uint64_t> m_head{0};
};

}  // namespace

measurement run_mutex_deque(const config& cfg) { return run_pattern<mutex_deque>(cfg); }
measurement run_ticket_queue(const config& cfg) { return run_pattern<ticket_queue>(cfg); }

}  // namespace tessera::bench::queue_bench
