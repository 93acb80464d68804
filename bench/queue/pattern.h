// bench/queue/pattern.h — runs one queue design in one pattern (queue.h) and checks the items.
//
// A design is a type Q with `void push(tessera::task*)` (any thread its capabilities allow) and
// either `bool try_pop(tessera::task*&)` or, for a queue whose pop waits for its item (the ticket
// queue), `static constexpr bool waiting_pop = true` and `tessera::task* pop()`. Producers push
// disjoint ranges of item ids; consumers keep the ids they got in their own vectors (reserved
// before the clock starts), checked after the clock stopped: every id exactly once.
//
//   measurement m = run_pattern<mutex_deque>(cfg);
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/timing.h"
#include "queue/queue.h"
#include "tessera/task.h"

namespace tessera::bench::queue_bench {

/// An item: a task object (never run) with its id. Queues that are not intrusive carry pointers
/// to these, so every design moves the same thing.
struct item final : task {
  std::uint32_t id = 0;
  task* execute(context&) override { return nullptr; }
};

template <class Q>
concept waiting_queue = Q::waiting_pop;

inline void relax(unsigned& spins) noexcept {
  if (++spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    spins = 0;
    std::this_thread::yield();  // more threads than CPUs: let the others run
  }
}

/// Every id in [0, items) exactly once over all the consumers' lists; else throws bench_failure.
void check_exactly_once(const std::string& who, std::uint64_t items,
                        const std::vector<std::vector<std::uint32_t>>& got);

template <class Q>
sample run_once(const config& cfg, std::vector<item>& items) {
  Q q;
  const std::uint64_t n = items.size();
  std::vector<std::vector<std::uint32_t>> got(cfg.shape == pattern::owner ? 1 : cfg.consumers);
  for (auto& g : got) g.reserve(got.size() == 1 ? n : n / got.size() * 2 + 64);
  if (cfg.shape == pattern::owner) {
    stopwatch clock;
    constexpr std::uint64_t batch = 256;
    for (std::uint64_t first = 0; first < n; first += batch) {
      const std::uint64_t last = first + batch < n ? first + batch : n;
      for (std::uint64_t i = first; i < last; ++i) q.push(&items[i]);
      for (std::uint64_t i = first; i < last; ++i) {
        task* t = nullptr;
        if constexpr (waiting_queue<Q>) {
          t = q.pop();
        } else {
          while (!q.try_pop(t)) {
          }
        }
        got[0].push_back(static_cast<item*>(t)->id);
      }
    }
    const double seconds = clock.seconds();
    check_exactly_once(cfg.label, n, got);
    return {.ops = n, .seconds = seconds};
  }
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  std::atomic<unsigned> producers_left{cfg.producers};
  std::vector<std::thread> threads;
  const unsigned total = cfg.producers + cfg.consumers;
  const auto wait_for_go = [&] {
    ready.fetch_add(1, std::memory_order_relaxed);
    unsigned spins = 0;
    while (!go.load(std::memory_order_acquire)) relax(spins);  // acquire: the queue is built
  };
  for (unsigned p = 0; p < cfg.producers; ++p) {
    threads.emplace_back([&, p] {
      const std::uint64_t first = n * p / cfg.producers;
      const std::uint64_t last = n * (p + 1) / cfg.producers;
      wait_for_go();
      for (std::uint64_t i = first; i < last; ++i) q.push(&items[i]);
      // release: a consumer that sees the last producer leave sees every push before it
      producers_left.fetch_sub(1, std::memory_order_release);
    });
  }
  for (unsigned c = 0; c < cfg.consumers; ++c) {
    threads.emplace_back([&, c] {
      std::vector<std::uint32_t>& mine = got[c];
      wait_for_go();
      unsigned spins = 0;
      if constexpr (waiting_queue<Q>) {
        // A waiting pop takes a ticket for an item to come: each consumer takes its share.
        const std::uint64_t share = n * (c + 1) / cfg.consumers - n * c / cfg.consumers;
        for (std::uint64_t k = 0; k < share; ++k) mine.push_back(static_cast<item*>(q.pop())->id);
      } else {
        for (;;) {
          task* t = nullptr;
          if (q.try_pop(t)) {
            mine.push_back(static_cast<item*>(t)->id);
            spins = 0;
            continue;
          }
          // acquire: pairs with the producers' release; then one more look finds what is left
          if (producers_left.load(std::memory_order_acquire) == 0) {
            while (q.try_pop(t)) mine.push_back(static_cast<item*>(t)->id);
            break;
          }
          relax(spins);
        }
      }
    });
  }
  unsigned spins = 0;
  while (ready.load(std::memory_order_relaxed) != total) relax(spins);
  stopwatch clock;
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  const double seconds = clock.seconds();
  check_exactly_once(cfg.label, n, got);
  return {.ops = n, .seconds = seconds};
}

template <class Q>
measurement run_pattern(const config& cfg) {
  std::vector<item> items(cfg.items);
  for (std::uint64_t i = 0; i < cfg.items; ++i) items[i].id = static_cast<std::uint32_t>(i);
  return measure(cfg.label, cfg.repeat, [&] { return run_once<Q>(cfg, items); });
}

}  // namespace tessera::bench::queue_bench
