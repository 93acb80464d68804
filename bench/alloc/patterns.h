// bench/alloc/patterns.h — the allocation patterns, written once for every allocator.
//
// An allocator is adapted as a policy with `void* make(std::uint64_t token)` (allocate and write
// the token), `bool check(void* p, std::uint64_t token)` and `void release(void* p)`. A `team`
// starts its members together and times them from the moment the last one arrived to the
// moment the last one finished; members that wait for each other give up after 30 s without
// progress, so a member that never runs turns into a bench_failure instead of a hang.
//
//   team t(workers);
//   // on each member i:
//   std::vector<void*> live;
//   if (!t.arrive_and_wait()) return;            // the others never came
//   bad += window_loop(policy, ops, window, salt(i), live);
//   t.finish(i);
//   // afterwards: t.seconds(), t.failed()
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "alloc/alloc.h"

namespace tessera::bench::alloc {

inline void cpu_relax() noexcept { __builtin_ia32_pause(); }

/// Token base of member i: tokens never repeat across members.
inline std::uint64_t salt(unsigned member) noexcept {
  return (static_cast<std::uint64_t>(member) + 1) << 48;
}

class team {
 public:
  explicit team(unsigned members, std::chrono::seconds deadline = std::chrono::seconds(30))
      : m_members(members), m_end(members), m_deadline(deadline) {}

  /// Waits until every member arrived; false on timeout or if another member gave up.
  bool arrive_and_wait() {
    // acq_rel: the last arrival's release of m_go orders m_start before the others read it.
    if (m_arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == m_members) {
      m_start = clock::now();
      m_go.store(true, std::memory_order_release);
      return true;
    }
    const auto give_up = clock::now() + m_deadline;
    for (unsigned spins = 0; !m_go.load(std::memory_order_acquire); ++spins) {
      cpu_relax();
      if (spins % 4096 == 0 && (failed() || clock::now() > give_up)) {
        fail();
        return false;
      }
    }
    return !failed();
  }

  void finish(unsigned member) { m_end[member].value = clock::now(); }
  void fail() noexcept { m_failed.store(true, std::memory_order_relaxed); }
  bool failed() const noexcept { return m_failed.load(std::memory_order_relaxed); }
  std::chrono::steady_clock::time_point deadline_from_now() const {
    return clock::now() + m_deadline;
  }

  /// From the start to the last finish (call after every member finished, e.g. after joins).
  double seconds() const {
    auto end = m_start;
    for (const auto& e : m_end) end = std::max(end, e.value);
    return std::chrono::duration<double>(end - m_start).count();
  }

 private:
  using clock = std::chrono::steady_clock;
  struct alignas(64) end_time {
    clock::time_point value{};
  };

  const unsigned m_members;
  alignas(64) std::atomic<unsigned> m_arrived{0};
  std::atomic<bool> m_go{false};
  std::atomic<bool> m_failed{false};
  clock::time_point m_start{};
  std::vector<end_time> m_end;
  std::chrono::seconds m_deadline;
};

/// Single-producer single-consumer ring of pointers.
class spsc_ring {
 public:
  static constexpr std::uint64_t capacity = 1024;

  /// Producer: true if push() will succeed.
  bool can_push() noexcept {
    const std::uint64_t tail = m_tail.load(std::memory_order_relaxed);
    if (tail - m_head_cache < capacity) return true;
    m_head_cache = m_head.load(std::memory_order_acquire);  // slots the consumer freed
    return tail - m_head_cache < capacity;
  }
  /// Producer: call only after can_push() returned true.
  void push(void* p) noexcept {
    const std::uint64_t tail = m_tail.load(std::memory_order_relaxed);
    m_slots[tail % capacity] = p;
    m_tail.store(tail + 1, std::memory_order_release);  // publishes the slot
  }
  void* pop() noexcept {
    const std::uint64_t head = m_head.load(std::memory_order_relaxed);
    if (head == m_tail_cache) {
      m_tail_cache = m_tail.load(std::memory_order_acquire);  // sees the published slots
      if (head == m_tail_cache) return nullptr;
    }
    void* p = m_slots[head % capacity];
    m_head.store(head + 1, std::memory_order_release);  // the slot may be reused
    return p;
  }

 private:
  alignas(64) std::atomic<std::uint64_t> m_tail{0};
  std::uint64_t m_head_cache = 0;  // producer's copy
  alignas(64) std::atomic<std::uint64_t> m_head{0};
  std::uint64_t m_tail_cache = 0;  // consumer's copy
  alignas(64) void* m_slots[capacity] = {};
};

/// `ops` alloc+free pairs in rounds of `window` live objects; returns the failed checks.
template <class Policy>
std::uint64_t window_loop(Policy& policy, std::uint64_t ops, unsigned window,
                          std::uint64_t token_base, std::vector<void*>& live) {
  live.resize(window);
  std::uint64_t bad = 0;
  for (std::uint64_t done = 0; done < ops;) {
    const auto k = static_cast<unsigned>(std::min<std::uint64_t>(window, ops - done));
    for (unsigned i = 0; i < k; ++i) live[i] = policy.make(token_base + done + i);
    for (unsigned i = 0; i < k; ++i) {
      bad += policy.check(live[i], token_base + done + i) ? 0 : 1;
      policy.release(live[i]);
    }
    done += k;
  }
  return bad;
}

/// Member `member` allocates `ops` objects into `out` (read by the next member) and frees the
/// `ops` objects that arrive on `in` (from the previous one); returns the failed checks.
template <class Policy>
std::uint64_t crossthread_loop(Policy& policy, std::uint64_t ops, unsigned window, unsigned member,
                               unsigned previous, spsc_ring& out, spsc_ring& in, team& t) {
  std::uint64_t produced = 0, consumed = 0, bad = 0;
  const std::uint64_t mine = salt(member), theirs = salt(previous);
  bool stalled = false;  // no progress since `give_up` was set
  auto give_up = std::chrono::steady_clock::time_point{};
  for (unsigned idle = 0; produced < ops || consumed < ops;) {
    bool progress = false;
    for (unsigned k = 0; k < window && produced < ops && out.can_push(); ++k) {
      out.push(policy.make(mine + produced));
      ++produced;
      progress = true;
    }
    for (unsigned k = 0; k < window; ++k) {
      void* p = in.pop();
      if (p == nullptr) break;
      bad += policy.check(p, theirs + consumed) ? 0 : 1;
      policy.release(p);
      ++consumed;
      progress = true;
    }
    if (progress) {
      idle = 0;
      stalled = false;
    } else if (++idle % 4096 == 0) {
      // Fail only when the neighbour made no progress for a whole deadline (or gave up).
      if (!stalled) {
        stalled = true;
        give_up = t.deadline_from_now();
      } else if (t.failed() || std::chrono::steady_clock::now() > give_up) {
        t.fail();
        break;
      }
    } else {
      cpu_relax();
    }
  }
  return bad;
}

/// Everything the members of one run share.
struct run_state {
  explicit run_state(const config& cfg) : members(cfg.workers), rings(cfg.workers) {}
  team members;
  std::vector<spsc_ring> rings;  ///< rings[i]: from member i to member (i+1) % W
};

/// The body of member `member`: wait for the others, run the pattern, stop the clock; returns
/// the failed checks, or the sentinel `~0` if the members never started together.
template <class Policy>
std::uint64_t run_member(Policy& policy, const config& cfg, unsigned member, run_state& state) {
  std::vector<void*> live(cfg.window);
  if (!state.members.arrive_and_wait()) return ~std::uint64_t{0};
  std::uint64_t bad = 0;
  if (cfg.shape == pattern::window) {
    bad = window_loop(policy, cfg.ops, cfg.window, salt(member), live);
  } else {
    const unsigned previous = (member + cfg.workers - 1) % cfg.workers;
    bad = crossthread_loop(policy, cfg.ops, cfg.window, member, previous, state.rings[member],
                           state.rings[previous], state.members);
  }
  state.members.finish(member);
  return bad;
}

}  // namespace tessera::bench::alloc
