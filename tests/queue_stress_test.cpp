// Multi-producer stress on one worker's inbound queue: many non-worker threads and tasks on every
// worker spawn onto worker 0 at once; every task must run exactly once, on worker 0.
#include <atomic>
#include <thread>
#include <vector>

#include "test_support.h"

namespace tessera::test {
namespace {

class queue_stress : public runtime_fixture {};

class counted_hit final : public counted_task {
 public:
  counted_hit(run_counts& counts, std::size_t id, std::atomic<unsigned>& misplaced) noexcept
      : m_counts(&counts), m_id(id), m_misplaced(&misplaced) {}
  task* execute(context& ctx) override {
    m_counts->hit(m_id);
    if (ctx.worker() != wid(0)) m_misplaced->fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }

 private:
  run_counts* m_counts;
  std::size_t m_id;
  std::atomic<unsigned>* m_misplaced;
};

/// Runs on one worker and spawns `count` tasks onto worker 0, ids from `first`, a slice per run
/// (returns itself until done so that other tasks interleave with it).
class feeder final : public counted_task {
 public:
  feeder(run_counts& counts, std::size_t first, std::size_t count, std::atomic<bool>& go,
         std::atomic<unsigned>& misplaced, std::atomic<std::uint64_t>& runs_on_0) noexcept
      : m_counts(&counts),
        m_next(first),
        m_end(first + count),
        m_go(&go),
        m_misplaced(&misplaced),
        m_runs_on_0(&runs_on_0) {}
  task* execute(context& ctx) override {
    if (ctx.worker() == wid(0)) m_runs_on_0->fetch_add(1, std::memory_order_relaxed);
    if (!m_go->load(std::memory_order_acquire)) return this;  // start with the threads
    for (int i = 0; i < 64 && m_next < m_end; ++i, ++m_next) {
      auto* t = ctx.make_task<counted_hit>(*m_counts, m_next, *m_misplaced);
      t->annotate(wid(0));
      ctx.spawn(t);
    }
    return m_next < m_end ? this : nullptr;
  }

 private:
  run_counts* m_counts;
  std::size_t m_next, m_end;
  std::atomic<bool>* m_go;
  std::atomic<unsigned>* m_misplaced;
  std::atomic<std::uint64_t>* m_runs_on_0;
};

TEST_P(queue_stress, many_producers_onto_one_worker_each_task_runs_once) {
  auto& r = start();
  const unsigned n = r.workers();
  constexpr std::size_t threads = 4;
  const std::size_t per_thread = scaled(25000, 3000);
  const std::size_t per_feeder = scaled(10000, 1000);
  const std::size_t feeders = n;  // one on every worker, worker 0 included (local spawns)
  const std::size_t total = threads * per_thread + feeders * per_feeder;
  run_counts counts(total);
  std::atomic<unsigned> misplaced{0};
  std::atomic<bool> go{false};
  std::atomic<std::uint64_t> feeder_runs_on_0{0};

  const group g = r.make_group();
  for (std::size_t f = 0; f < feeders; ++f) {
    auto* t = r.make_task<feeder>(counts, threads * per_thread + f * per_feeder, per_feeder, go,
                                  misplaced, feeder_runs_on_0);
    t->annotate(wid(static_cast<unsigned>(f)));
    r.spawn(t, g);
  }
  std::vector<std::thread> producers;
  for (std::size_t p = 0; p < threads; ++p) {
    producers.emplace_back([&, p] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (std::size_t i = 0; i < per_thread; ++i) {
        auto* t = r.make_task<counted_hit>(counts, p * per_thread + i, misplaced);
        t->annotate(wid(0));
        // Alternate priorities so that every priority level of the queue sees contention.
        t->annotate(static_cast<priority>(i % priority_count));
        r.spawn(t, g);
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& t : producers) t.join();
  r.wait(g);
  EXPECT_EQ(counts.exactly_once(), "");
  EXPECT_EQ(misplaced.load(), 0u) << "tasks targeted at worker 0 ran elsewhere";
  r.wait_idle();
  // Worker 0 executed every targeted task, plus the runs of the feeder that lives on it.
  EXPECT_EQ(r.statistics().workers[0].executed, total + feeder_runs_on_0.load());
}

TEST_P(queue_stress, producers_and_consumer_race_through_empty_queue) {
  // Short bursts so that worker 0's queue is drained to empty and refilled very often: the
  // empty/non-empty transitions (and the worker's park/wake) race with the pushes.
  auto& r = start();
  constexpr std::size_t threads = 3;
  const std::size_t bursts = scaled(2000, 200);
  constexpr std::size_t burst = 4;
  run_counts counts(threads * bursts * burst);
  std::atomic<unsigned> misplaced{0};
  std::vector<std::thread> producers;
  for (std::size_t p = 0; p < threads; ++p) {
    producers.emplace_back([&, p] {
      for (std::size_t b = 0; b < bursts; ++b) {
        const group g = r.make_group();
        for (std::size_t i = 0; i < burst; ++i) {
          auto* t = r.make_task<counted_hit>(counts, (p * bursts + b) * burst + i, misplaced);
          t->annotate(wid(0));
          r.spawn(t, g);
        }
        r.wait(g);
      }
    });
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(counts.exactly_once(), "");
  EXPECT_EQ(misplaced.load(), 0u);
}

TESSERA_INSTANTIATE_WORKER_COUNTS(queue_stress);

}  // namespace
}  // namespace tessera::test
