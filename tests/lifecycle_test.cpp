// Starting and stopping: stop() drains every task spawned before or during it (children too),
// is idempotent, is called by the destructor; spawning from outside after stop began throws.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "runtime/test_hooks.h"
#include "test_support.h"

namespace tessera::test {
namespace {

class lifecycle_test : public runtime_fixture {};

/// Fan-out: each node spawns `width` children until depth 0; counts nodes.
class fan_task final : public counted_task {
 public:
  fan_task(unsigned depth, unsigned width, std::atomic<std::uint64_t>& n) noexcept
      : m_depth(depth), m_width(width), m_n(&n) {}
  task* execute(context& ctx) override {
    m_n->fetch_add(1, std::memory_order_relaxed);
    if (m_depth > 0) {
      for (unsigned i = 0; i < m_width; ++i) {
        auto* t = ctx.make_task<fan_task>(m_depth - 1, m_width, *m_n);
        // Some children go to other workers, some stay local.
        if (i % 2 == 1) t->annotate(wid((ctx.worker().value + i) % ctx.runtime().workers()));
        ctx.spawn(t);
      }
    }
    return nullptr;
  }
  static std::uint64_t nodes(unsigned depth, unsigned width) {
    std::uint64_t total = 0, level = 1;
    for (unsigned d = 0; d <= depth; ++d, level *= width) total += level;
    return total;
  }

 private:
  unsigned m_depth, m_width;
  std::atomic<std::uint64_t>* m_n;
};

TEST_P(lifecycle_test, stop_drains_tasks_in_flight_and_their_children) {
  const unsigned depth = under_sanitizer ? 5 : 7, width = 4;
  for (int round = 0; round < 3; ++round) {
    std::atomic<std::uint64_t> n{0};
    auto& r = start();
    for (int i = 0; i < 4; ++i) r.spawn(r.make_task<fan_task>(depth, width, n));
    r.stop();  // right away: most of the tree does not exist yet
    EXPECT_FALSE(r.running());
    EXPECT_EQ(n.load(), 4 * fan_task::nodes(depth, width)) << "round " << round;
    EXPECT_EQ(live_objects.load(), 0);
  }
}

TEST_P(lifecycle_test, destructor_drains_like_stop) {
  const unsigned depth = under_sanitizer ? 5 : 6, width = 4;
  std::atomic<std::uint64_t> n{0};
  {
    runtime r({.workers = worker_count()});
    r.spawn(r.make_task<fan_task>(depth, width, n));
  }
  EXPECT_EQ(n.load(), fan_task::nodes(depth, width));
}

TEST_P(lifecycle_test, runtime_guard_stops_the_runtime) {
  std::atomic<std::uint64_t> n{0};
  auto r = std::make_unique<runtime>(runtime_options{.workers = worker_count()});
  {
    runtime_guard guard(*r);
    r->spawn(r->make_task<fan_task>(3, 3, n));
  }
  EXPECT_FALSE(r->running());
  EXPECT_EQ(n.load(), fan_task::nodes(3, 3));
}

TEST_P(lifecycle_test, stop_is_idempotent) {
  auto& r = start();
  EXPECT_TRUE(r.running());
  std::atomic<int> ran{0};
  r.spawn([&ran, tok = live_token{}](context&) { ran.fetch_add(1); });
  r.stop();
  EXPECT_FALSE(r.running());
  r.stop();
  r.stop();
  EXPECT_FALSE(r.running());
  EXPECT_EQ(ran.load(), 1);
}

TEST_P(lifecycle_test, spawn_from_outside_after_stop_throws_logic_error) {
  auto& r = start();
  r.stop();
  std::atomic<int> ran{0};
  EXPECT_THROW(r.spawn([&ran, tok = live_token{}](context&) { ran.fetch_add(1); }),
               std::logic_error);
  EXPECT_EQ(ran.load(), 0);
  // The refused task is not leaked: the lambda's capture was destroyed (ownership passed at
  // spawn, and spawn(F) gives the caller no pointer to discard).
  EXPECT_EQ(live_objects.load(), 0) << "the task refused after stop() was leaked";
}

TEST_P(lifecycle_test, spawns_racing_with_stop_either_run_or_throw) {
  const int rounds = static_cast<int>(scaled(60, 10));
  for (int round = 0; round < rounds; ++round) {
    auto& r = start();
    std::atomic<std::uint64_t> ran{0};
    std::atomic<std::uint64_t> accepted{0};
    std::atomic<bool> started{false};
    std::vector<std::thread> producers;
    for (int p = 0; p < 2; ++p) {
      producers.emplace_back([&] {
        for (;;) {
          try {
            r.spawn([&ran, tok = live_token{}](context&) { ran.fetch_add(1); });
          } catch (const std::logic_error&) {
            return;  // stop() began
          }
          accepted.fetch_add(1);
          started.store(true);
        }
      });
    }
    while (!started.load()) std::this_thread::yield();
    r.stop();
    for (auto& t : producers) t.join();
    EXPECT_EQ(ran.load(), accepted.load())
        << "round " << round << ": a spawn that did not throw must run before stop() returns";
    m_rt.reset();
    EXPECT_EQ(live_objects.load(), 0);
  }
}

TEST_P(lifecycle_test, two_runtimes_side_by_side) {
  auto& a = start();
  runtime b({.workers = 2});
  std::atomic<int> wrong{0}, ran{0};
  const group ga = a.make_group();
  const group gb = b.make_group();
  for (int i = 0; i < 500; ++i) {
    a.spawn(
        [&, tok = live_token{}](context& ctx) {
          ran.fetch_add(1);
          if (&ctx.runtime() != &a || !a.current_worker() || b.current_worker()) wrong.fetch_add(1);
        },
        ga);
    b.spawn(
        [&, tok = live_token{}](context& ctx) {
          ran.fetch_add(1);
          if (&ctx.runtime() != &b || !b.current_worker() || a.current_worker()) wrong.fetch_add(1);
        },
        gb);
  }
  a.wait(ga);
  b.wait(gb);
  b.stop();
  EXPECT_EQ(ran.load(), 1000);
  EXPECT_EQ(wrong.load(), 0);
}

#if defined(TESSERA_DEBUG_CHECKS)
/// wait_idle() sleeps until a worker going idle finds the runtime quiescent and wakes it; its
/// 50 ms safety timeout is set to an hour here, so a missed wake-up shows as a phase that does
/// not end. Many short phases, their tasks spread over the workers (some finish on a worker
/// other than the one that went idle first), each checked when its wait returns.
TEST_P(lifecycle_test, wait_idle_is_woken_when_the_last_task_ends) {
  auto& r = start();
  detail::test_hooks::idle_wait_timeout_ns.store(3'600'000'000'000ull);
  const unsigned phases = static_cast<unsigned>(scaled(2000, 300));
  std::atomic<std::uint64_t> n{0};
  std::atomic<unsigned> done{0};
  std::atomic<bool> wrong{false};
  std::thread waiter([&] {
    for (unsigned i = 1; i <= phases; ++i) {
      const unsigned roots = 1 + i % 4;
      for (unsigned k = 0; k < roots; ++k) r.spawn(r.make_task<fan_task>(i % 3, 2, n));
      r.wait_idle();
      // Every task of the phase ran before the wait returned.
      if (n.load() != roots * fan_task::nodes(i % 3, 2)) wrong.store(true);
      n.store(0);
      done.store(i);
    }
  });
  // No progress for 20 s: a lost wake-up. Rescue the waiter (a task's end notifies again).
  unsigned seen = 0;
  auto last = std::chrono::steady_clock::now();
  bool stuck = false;
  while (done.load() != phases) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (done.load() != seen) {
      seen = done.load();
      last = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last > std::chrono::seconds(20)) {
      stuck = true;
      r.spawn([](context&) {});
      last = std::chrono::steady_clock::now();
    }
  }
  waiter.join();
  detail::test_hooks::idle_wait_timeout_ns.store(0);
  EXPECT_FALSE(stuck) << "a wait_idle() was not woken when its runtime became idle";
  EXPECT_FALSE(wrong.load()) << "wait_idle() returned before every task had run";
}
#endif

TESSERA_INSTANTIATE_WORKER_COUNTS(lifecycle_test);

#if defined(TESSERA_DEBUG_CHECKS)
/// A worker thread the OS cannot create (a limit on threads or on memory) makes the runtime's
/// constructor throw that error, after the workers it had already started exited. It hung in
/// the unwinding before: worker 0 was joined without ever being told to exit. (A hang fails by
/// ctest's timeout.) The failure is forced with a test hook (src/runtime/test_hooks.h).
TEST(lifecycle_start, a_worker_that_cannot_start_makes_the_constructor_throw_without_hanging) {
  detail::test_hooks::worker_starting.store(
      +[](unsigned index) {
        if (index == 2) {
          throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                  "test: thread creation refused");
        }
      },
      std::memory_order_release);
  EXPECT_THROW(runtime({.workers = 4}), std::system_error);
  detail::test_hooks::worker_starting.store(nullptr);
  // Nothing was left behind: a runtime starts and runs afterwards.
  runtime r({.workers = 4});
  std::atomic<int> ran{0};
  const group g = r.make_group();
  for (int i = 0; i < 100; ++i) r.spawn([&ran](context&) { ran.fetch_add(1); }, g);
  r.wait(g);
  EXPECT_EQ(ran.load(), 100);
}
#endif

// ---- slow loops ---------------------------------------------------------------------------------

TEST(lifecycle_stress, start_and_stop_many_times) {
  const int rounds = static_cast<int>(scaled(10000, 500));
  for (int i = 0; i < rounds; ++i) {
    runtime r({.workers = 1u + static_cast<unsigned>(i % 2)});
    ASSERT_TRUE(r.running()) << "round " << i;
    r.stop();
    ASSERT_FALSE(r.running()) << "round " << i;
  }
}

// The first prototype hung in stop() when a task was spawned right before it: the worker parked
// after the shutdown flag was read and nobody woke it. Spawn "hello world", stop immediately.
TEST(lifecycle_stress, regression_hello_world_hang_on_shutdown) {
  ASSERT_EQ(live_objects.load(), 0);
  const int rounds = static_cast<int>(scaled(10000, 500));
  for (int i = 0; i < rounds; ++i) {
    std::atomic<int> said{0};
    runtime r({.workers = 1u + static_cast<unsigned>(i % 2)});
    r.spawn([&said, tok = live_token{}](context&) { said.fetch_add(1); });  // "hello world"
    r.stop();
    ASSERT_EQ(said.load(), 1) << "round " << i << ": stop() returned before hello world ran";
  }
  EXPECT_EQ(live_objects.load(), 0);
}

TEST(lifecycle_stress, stop_with_fan_out_in_flight_many_times) {
  ASSERT_EQ(live_objects.load(), 0);
  const int rounds = static_cast<int>(scaled(1000, 100));
  for (int i = 0; i < rounds; ++i) {
    std::atomic<std::uint64_t> n{0};
    runtime r({.workers = 1u + static_cast<unsigned>(i % 3)});
    r.spawn(r.make_task<fan_task>(3, 3, n));
    r.stop();
    ASSERT_EQ(n.load(), fan_task::nodes(3, 3)) << "round " << i;
  }
  EXPECT_EQ(live_objects.load(), 0);
}

}  // namespace
}  // namespace tessera::test
