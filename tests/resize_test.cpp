// Resizing the set of active workers at run time (1 .. workers()) without losing tasks.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "test_support.h"

namespace tessera::test {
namespace {

class resize_test : public runtime_fixture {};

TEST_P(resize_test, all_workers_are_active_at_start_and_the_count_reads_back) {
  auto& r = start();
  EXPECT_EQ(r.active_workers(), r.workers());
  for (unsigned n = 1; n <= r.workers(); ++n) {
    r.set_active_workers(n);
    EXPECT_EQ(r.active_workers(), n);
  }
  for (unsigned n = r.workers(); n >= 1; --n) {
    r.set_active_workers(n);
    EXPECT_EQ(r.active_workers(), n);
  }
}

TEST_P(resize_test, tasks_targeted_at_inactive_workers_still_run) {
  auto& r = start();
  r.set_active_workers(1);
  const unsigned per_worker = static_cast<unsigned>(scaled(300, 40));
  run_counts counts(per_worker * r.workers());
  const group g = r.make_group();
  for (unsigned w = 0; w < r.workers(); ++w) {
    for (unsigned i = 0; i < per_worker; ++i) {
      auto* t = make_fn(
          r, [&counts, id = w * per_worker + i, tok = live_token{}](context&) { counts.hit(id); });
      t->annotate(wid(w));
      r.spawn(t, g);
    }
  }
  r.wait(g);
  EXPECT_EQ(counts.exactly_once(), "");
  r.set_active_workers(r.workers());
}

TEST_P(resize_test, stop_drains_while_shrunk) {
  auto& r = start();
  r.set_active_workers(1);
  std::atomic<int> ran{0};
  for (unsigned w = 0; w < r.workers(); ++w) {
    for (int i = 0; i < 50; ++i) {
      auto* t = make_fn(r, [&ran, tok = live_token{}](context&) { ran.fetch_add(1); });
      t->annotate(wid(w));
      r.spawn(t);
    }
  }
  r.stop();
  EXPECT_EQ(ran.load(), static_cast<int>(50 * r.workers()));
}

/// A follow-up chain that hops to the next worker on every run: it crosses every worker, active
/// or not, while the active set changes.
class hopping_chain final : public counted_task {
 public:
  hopping_chain(std::uint32_t left, std::atomic<std::uint64_t>& runs) noexcept
      : m_left(left), m_runs(&runs) {}
  task* execute(context& ctx) override {
    m_runs->fetch_add(1, std::memory_order_relaxed);
    if (m_left-- == 0) return nullptr;
    annotate(wid((ctx.worker().value + 1u) % ctx.runtime().workers()));
    return this;
  }

 private:
  std::uint32_t m_left;
  std::atomic<std::uint64_t>* m_runs;
};

TEST_P(resize_test, resizing_under_load_loses_no_task) {
  auto& r = start();
  const unsigned max = r.workers();
  const std::size_t per_thread = scaled(40000, 4000);
  constexpr std::size_t threads = 2;
  run_counts counts(per_thread * threads);
  const std::uint32_t chain_runs = static_cast<std::uint32_t>(scaled(20000, 2000));
  std::atomic<std::uint64_t> chain_done{0};
  std::atomic<std::size_t> finished{0};

  const group g = r.make_group();
  r.spawn(r.make_task<hopping_chain>(chain_runs - 1, chain_done), g);
  std::vector<std::thread> producers;
  for (std::size_t p = 0; p < threads; ++p) {
    producers.emplace_back([&, p] {
      for (std::size_t i = 0; i < per_thread; ++i) {
        const std::size_t id = p * per_thread + i;
        auto* t = make_fn(r, [&counts, id, tok = live_token{}](context& ctx) {
          counts.hit(id);
          if (id % 7 == 0) {  // some spawn children from inside as well
            ctx.spawn([tok2 = live_token{}](context&) {});
          }
        });
        if (i % 3 == 0) t->annotate(wid(static_cast<unsigned>(i / 3) % max));
        r.spawn(t, g);
      }
      finished.fetch_add(1);
    });
  }
  // Shrink and grow while the producers and the chain run.
  unsigned resizes = 0;
  while (finished.load() < threads || resizes < 6) {
    const unsigned target = resizes % 2 == 0 ? 1 : max;
    r.set_active_workers(target);
    EXPECT_EQ(r.active_workers(), target);
    if (resizes % 3 == 2 && max > 2) {
      r.set_active_workers(max / 2);
      EXPECT_EQ(r.active_workers(), max / 2);
    }
    ++resizes;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let work flow, not a timing check
  }
  for (auto& t : producers) t.join();
  r.set_active_workers(1);
  r.wait(g);
  EXPECT_EQ(counts.exactly_once(), "");
  EXPECT_EQ(chain_done.load(), chain_runs);
  r.set_active_workers(max);
  EXPECT_EQ(r.active_workers(), max);
  // Everything still works at full size.
  std::atomic<unsigned> ran{0};
  const group g2 = r.make_group();
  for (unsigned w = 0; w < max; ++w) {
    auto* t = make_fn(r, [&ran, tok = live_token{}](context&) { ran.fetch_add(1); });
    t->annotate(wid(w));
    r.spawn(t, g2);
  }
  r.wait(g2);
  EXPECT_EQ(ran.load(), max);
}

TESSERA_INSTANTIATE_WORKER_COUNTS(resize_test);

}  // namespace
}  // namespace tessera::test
