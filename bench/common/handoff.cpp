#include "common/handoff.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <system_error>
#include <thread>

#include "common/placement.h"

namespace tessera::bench {

namespace {

using clock_type = std::chrono::steady_clock;

// 128 bytes apart: AMD's and Intel's L2 fetch a line's neighbour with it, and the follower's
// looks at `control` would pull the ball's line back and forth as well.
struct alignas(128) ball {
  // Even: the leader's turn to hit it; odd: the follower's. Release on each hit and acquire on
  // each look, so that a hit is seen with everything before it (nothing else is shared; the
  // orders are for the pattern, not for data).
  std::atomic<std::uint64_t> value{0};
};

struct alignas(128) control {
  std::atomic<unsigned> ready{0};   // threads that have tried to pin themselves
  std::atomic<bool> failed{false};  // one of them could not
  std::atomic<bool> done{false};    // the leader has finished: the follower leaves
};

/// Waits until `b` holds `want`, spinning (without a pause instruction, which would add its own
/// latency of up to ~100 cycles to each hop), yielding now and then (the other thread may share
/// this CPU), and looking at the clock every 1024 spins. False if `deadline` passed first.
bool wait_for(const ball& b, std::uint64_t want, clock_type::time_point deadline) {
  for (unsigned spins = 1;; ++spins) {
    if (b.value.load(std::memory_order_acquire) == want) return true;
    if (spins % 1024 == 0) {
      if (clock_type::now() >= deadline) return false;
      std::this_thread::yield();
    }
  }
}

}  // namespace

std::optional<double> handoff_ns(unsigned cpu_a, unsigned cpu_b, handoff_limits limits) {
  ball b;
  control c;
  double best = std::numeric_limits<double>::infinity();

  std::thread follower([&] {
    if (!pin_this_thread_to(cpu_b)) c.failed.store(true, std::memory_order_relaxed);
    c.ready.fetch_add(1, std::memory_order_acq_rel);
    for (unsigned spins = 1;; ++spins) {
      const std::uint64_t v = b.value.load(std::memory_order_acquire);
      if ((v & 1) != 0) {
        b.value.store(v + 1, std::memory_order_release);
        spins = 0;  // 1024 spins of one wait, not of the whole run, before a look and a yield
        continue;
      }
      if (spins % 1024 == 0) {  // rarely: a look at `done` costs the next hop a little
        if (c.done.load(std::memory_order_acquire)) return;
        std::this_thread::yield();
      }
    }
  });
  auto lead = [&] {
    if (!pin_this_thread_to(cpu_a)) c.failed.store(true, std::memory_order_relaxed);
    c.ready.fetch_add(1, std::memory_order_acq_rel);
    while (c.ready.load(std::memory_order_acquire) < 2) std::this_thread::yield();
    if (c.failed.load(std::memory_order_relaxed)) return;
    const auto deadline = clock_type::now() + limits.budget;
    std::uint64_t v = 0;
    for (int block = 0; block < 3; ++block) {
      const auto start = clock_type::now();
      std::uint64_t trips = 0;
      bool in_time = true;
      while (trips < limits.round_trips && in_time) {
        b.value.store(v + 1, std::memory_order_release);
        v += 2;
        in_time = wait_for(b, v, deadline);
        if (in_time) ++trips;
        if (trips % 256 == 0 && clock_type::now() >= deadline) in_time = false;
      }
      if (trips > 0) {
        const std::chrono::duration<double, std::nano> took = clock_type::now() - start;
        best = std::min(best, took.count() / static_cast<double>(2 * trips));
      }
      if (!in_time) break;
    }
  };
  try {
    std::thread leader(lead);
    leader.join();
  } catch (const std::system_error&) {  // no thread to be had: no measurement
    c.failed.store(true, std::memory_order_relaxed);
  }
  // The follower answers a hit still in flight (odd) before it looks at `done`, so it never
  // leaves a hit unanswered that nobody waits for any more; it leaves on an even value.
  c.done.store(true, std::memory_order_release);
  follower.join();
  if (c.failed.load(std::memory_order_relaxed) || best == std::numeric_limits<double>::infinity())
    return std::nullopt;
  return best;
}

}  // namespace tessera::bench
