// parallel_for: every index once, pieces within the grain, the body shared and destroyed before
// the loop is done, exceptions, loops from inside tasks and nested loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <numeric>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/test_hooks.h"
#include "test_support.h"
#include "tessera/tessera.h"

namespace tessera::test {
namespace {

class parallel_for_test : public runtime_fixture {};

/// One counter per index of [first, last); `runs(i)` is how often index i was visited.
struct visits {
  visits(std::size_t first, std::size_t last) : base(first), counts(last - first) {}
  void visit(std::size_t i) const { counts.at(i - base).fetch_add(1, std::memory_order_relaxed); }
  bool each_once() const {
    return std::all_of(counts.begin(), counts.end(), [](const auto& c) { return c.load() == 1; });
  }
  std::size_t base;
  mutable std::vector<std::atomic<std::uint32_t>> counts;
};

/// A loop body that counts its copies (moves are free) and is alive while its live_token is.
struct copy_counting_body {
  live_token token;
  std::shared_ptr<std::atomic<int>> copies;
  explicit copy_counting_body(std::shared_ptr<std::atomic<int>> c) : copies(std::move(c)) {}
  copy_counting_body(const copy_counting_body& o) : token(o.token), copies(o.copies) {
    copies->fetch_add(1);
  }
  copy_counting_body(copy_counting_body&& o) noexcept : token(o.token), copies(o.copies) {}
  void operator()(std::size_t) const {}
};

/// While it lives, a thread keeps changing the number of active workers (1 .. all); all are
/// active again after it.
class keeps_resizing {
 public:
  explicit keeps_resizing(runtime& r)
      : m_runtime(r), m_thread([this] {
          for (unsigned k = 0; !m_stop.load(); ++k) {
            m_runtime.set_active_workers(1 + k % m_runtime.workers());
            std::this_thread::yield();
          }
        }) {}
  ~keeps_resizing() {
    m_stop.store(true);
    m_thread.join();
    m_runtime.set_active_workers(m_runtime.workers());
  }

 private:
  runtime& m_runtime;
  std::atomic<bool> m_stop{false};
  std::thread m_thread;
};

TEST_P(parallel_for_test, every_index_runs_exactly_once_whatever_the_grain) {
  auto& r = start();
  for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{1000},
                              scaled(100'003, 20'011)}) {
    for (const std::size_t grain : {std::size_t{0}, std::size_t{1}, std::size_t{64}, n + 5}) {
      if (grain == 1 && n > 1000) continue;  // a task per index: covered by n = 1000
      const std::size_t first = 1000;  // not 0: the indices are the range's, not offsets
      visits v(first, first + n);
      parallel_for(r, first, first + n, [&v](std::size_t i) { v.visit(i); }, {.grain = grain});
      EXPECT_TRUE(v.each_once()) << "n " << n << ", grain " << grain;
    }
  }
}

TEST_P(parallel_for_test, pieces_are_disjoint_cover_the_range_and_hold_at_most_grain) {
  auto& r = start();
  std::mutex m;
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  const std::size_t first = 17;
  const std::size_t last = 10'017;
  const std::size_t grain = 100;
  parallel_for(
      r, first, last,
      [&](std::size_t f, std::size_t l) {
        std::lock_guard lock(m);
        pieces.emplace_back(f, l);
      },
      {.grain = grain});
  std::sort(pieces.begin(), pieces.end());
  ASSERT_FALSE(pieces.empty());
  EXPECT_EQ(pieces.front().first, first);
  EXPECT_EQ(pieces.back().second, last);
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    EXPECT_LT(pieces[k].first, pieces[k].second);
    EXPECT_LE(pieces[k].second - pieces[k].first, grain);
    // halving: a piece is never below half the grain when the range was larger than it
    EXPECT_GE(pieces[k].second - pieces[k].first, grain / 2);
    if (k > 0) {
      EXPECT_EQ(pieces[k - 1].second, pieces[k].first);
    }
  }
}

TEST_P(parallel_for_test, the_default_grain_makes_about_sixteen_pieces_per_worker) {
  auto& r = start();
  std::atomic<std::size_t> pieces{0};
  parallel_for(r, 0, 1'000'000, [&](std::size_t, std::size_t) { pieces.fetch_add(1); });
  EXPECT_GE(pieces.load(), 16u * r.active_workers());
  EXPECT_LE(pieces.load(), 32u * r.active_workers());
}

TEST(parallel_for_grain, the_default_grain_is_rounded_up_without_overflow) {
  constexpr std::size_t max = ~std::size_t{0};
  EXPECT_EQ(detail::loop_grain(0, 1'000'000, 0, 2), 31'250u);    // 32 pieces
  EXPECT_EQ(detail::loop_grain(0, 1'000'001, 0, 2), 31'251u);    // rounded up
  EXPECT_EQ(detail::loop_grain(5, 6, 0, 16), 1u);                // never 0
  EXPECT_EQ(detail::loop_grain(0, 100, 7, 16), 7u);              // given: kept
  EXPECT_EQ(detail::loop_grain(0, max, 0, 4), max / 64 + 1);     // (last - first + 63) overflowed
}

TEST_P(parallel_for_test, a_piece_body_sums_a_range) {
  auto& r = start();
  std::vector<std::uint64_t> values(scaled(1'000'000, 100'000));
  std::iota(values.begin(), values.end(), std::uint64_t{1});
  std::atomic<std::uint64_t> total{0};
  parallel_for(r, 0, values.size(), [&](std::size_t f, std::size_t l) {
    std::uint64_t local = 0;  // per-piece set-up: the reason for the two-index form
    for (std::size_t i = f; i < l; ++i) local += values[i];
    total.fetch_add(local, std::memory_order_relaxed);
  });
  const std::uint64_t n = values.size();
  EXPECT_EQ(total.load(), n * (n + 1) / 2);
}

TEST_P(parallel_for_test, an_empty_range_calls_nothing_and_a_reversed_one_is_refused) {
  auto& r = start();
  std::atomic<int> calls{0};
  parallel_for(r, 5, 5, [&](std::size_t) { calls.fetch_add(1); });
  EXPECT_EQ(calls.load(), 0);
  try {
    parallel_for(r, 6, 5, [&](std::size_t) { calls.fetch_add(1); });
    ADD_FAILURE() << "a reversed range was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("first (6) is after last (5)"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(calls.load(), 0);
  r.wait_idle();
  EXPECT_EQ(r.statistics().total().executed, 0u);  // nothing was spawned either time
}

TEST_P(parallel_for_test, the_body_is_moved_in_once_shared_and_destroyed_before_the_loop_returns) {
  auto& r = start();
  const long before = live_objects.load();
  {
    auto copies = std::make_shared<std::atomic<int>>(0);
    parallel_for(r, 0, 10'000, copy_counting_body{copies}, {.grain = 10});
    EXPECT_EQ(copies->load(), 0) << "the body was copied for the pieces";
    EXPECT_EQ(live_objects.load(), before) << "the body outlived the loop";
  }
}

TEST_P(parallel_for_test, an_exception_reaches_the_caller_and_pieces_not_started_are_skipped) {
  auto& r = start();
  const std::size_t n = 1000;
  std::atomic<std::size_t> calls{0};
  try {
    parallel_for(
        r, 0, n,
        [&](std::size_t i) {
          calls.fetch_add(1);
          if (i == 0) throw std::runtime_error("index 0 failed");
        },
        {.grain = 1});
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "index 0 failed");
  }
  // With one worker the caller runs the loop alone (no helper), and index 0 is its first piece.
  if (r.workers() == 1) {
    EXPECT_EQ(calls.load(), 1u);
  } else {
    EXPECT_LE(calls.load(), n);
  }
  // The runtime goes on.
  visits v(0, 100);
  parallel_for(r, 0, 100, [&v](std::size_t i) { v.visit(i); });
  EXPECT_TRUE(v.each_once());
}

TEST_P(parallel_for_test, from_a_task_the_loop_joins_a_group_and_when_done_continues_after_it) {
  auto& r = start();
  const std::size_t n = 5000;
  visits v(0, n);
  std::atomic<bool> all_seen{false};
  const group outer = r.make_group();
  r.spawn(
      [&](context& ctx) {
        const group loop = ctx.runtime().make_group();
        parallel_for(ctx, loop, 0, n, [&v](std::size_t i) { v.visit(i); });
        ctx.when_done(loop, [&](context&) { all_seen.store(v.each_once()); });
      },
      outer);
  r.wait(outer);  // covers the continuation: it joins the spawning task's group
  EXPECT_TRUE(all_seen.load());
}

TEST_P(parallel_for_test, from_a_task_without_a_group_the_loop_joins_the_running_tasks_group) {
  auto& r = start();
  const std::size_t n = 5000;
  visits v(0, n);
  const group outer = r.make_group();
  r.spawn(
      [&](context& ctx) {
        parallel_for(ctx, group{}, 0, n, [&v](std::size_t i) { v.visit(i); }, {.grain = 16});
      },
      outer);
  r.wait(outer);
  EXPECT_TRUE(v.each_once());
}

TEST_P(parallel_for_test, a_body_with_the_context_nests_loops_that_the_outer_wait_covers) {
  auto& r = start();
  const std::size_t rows = 64;
  const std::size_t columns = 300;
  visits v(0, rows * columns);
  parallel_for(
      r, 0, rows,
      [&v](context& ctx, std::size_t f, std::size_t l) {
        for (std::size_t row = f; row < l; ++row) {
          parallel_for(ctx, group{}, row * columns, (row + 1) * columns,
                       [&v](std::size_t i) { v.visit(i); });
        }
      },
      {.grain = 4});
  EXPECT_TRUE(v.each_once());
}

TEST_P(parallel_for_test, the_blocking_form_from_a_task_is_refused_with_a_message) {
  auto& r = start();
  std::string message;
  const group g = r.make_group();
  r.spawn(
      [&](context& ctx) {
        try {
          parallel_for(ctx.runtime(), 0, 10, [](std::size_t) {});
        } catch (const std::logic_error& e) {
          message = e.what();
        }
      },
      g);
  r.wait(g);
  EXPECT_NE(message.find("use parallel_for(context&, group, ...)"), std::string::npos) << message;
}

TEST_P(parallel_for_test, after_stop_a_loop_is_refused_and_its_body_freed) {
  auto& r = start();
  r.stop();
  std::atomic<int> calls{0};
  try {
    parallel_for(r, 0, 100, [&calls, tok = live_token{}](std::size_t) { calls.fetch_add(1); });
    ADD_FAILURE() << "a loop after stop() was accepted";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("after stop() began"), std::string::npos) << e.what();
  }
  EXPECT_EQ(calls.load(), 0);
  // TearDown: no live_token left (the body was freed with its state)
}

TEST_P(parallel_for_test, many_small_loops_in_a_row) {
  auto& r = start();
  const int loops = static_cast<int>(scaled(2000, 300));
  std::atomic<std::size_t> total{0};
  for (int k = 0; k < loops; ++k) {
    parallel_for(r, 0, 10, [&](std::size_t) { total.fetch_add(1, std::memory_order_relaxed); });
  }
  EXPECT_EQ(total.load(), 10u * static_cast<std::size_t>(loops));
}

TEST_P(parallel_for_test, the_caller_takes_part_and_at_most_active_workers_threads_run_the_loop) {
  auto& r = start();
  std::mutex m;
  std::set<std::thread::id> threads;
  std::atomic<bool> on_worker_with_context{true};
  parallel_for(
      r, 0, 100'000,
      [&](std::size_t, std::size_t) {
        std::lock_guard lock(m);
        threads.insert(std::this_thread::get_id());
      },
      {.grain = 100});
  EXPECT_GE(threads.size(), 1u);
  EXPECT_LE(threads.size(), r.active_workers());
  if (r.workers() == 1) {
    EXPECT_EQ(threads.count(std::this_thread::get_id()), 1u) << "one worker: the caller runs all";
  }
  // A body with the context runs in tasks only, never on the caller.
  parallel_for(r, 0, 1000, [&](context&, std::size_t, std::size_t) {
    if (!r.current_worker()) on_worker_with_context.store(false);
  });
  EXPECT_TRUE(on_worker_with_context.load());
}

TEST_P(parallel_for_test, a_loop_does_not_wait_for_a_busy_worker_whose_helper_starts_after_it) {
  auto& r = start();
  // Worker 0, where the loop's first helper goes, runs a task until the loop has returned: the
  // caller (and the other helpers) run every piece, and the helper that starts afterwards finds
  // none left and touches only the loop's shared counters (ASan: nothing freed is read). With one
  // worker there is no helper, and the caller runs the loop alone beside the busy worker.
  std::atomic<bool> blocker_running{false};
  std::atomic<bool> loop_returned{false};
  const group g = r.make_group();
  task* blocker = r.make_task_from([&](context&) {
    blocker_running.store(true);
    while (!loop_returned.load()) std::this_thread::yield();
  });
  blocker->annotate(worker_id{0});
  r.spawn(blocker, g);
  while (!blocker_running.load()) std::this_thread::yield();
  visits v(0, 10'000);
  parallel_for(r, 0, 10'000, [&v](std::size_t i) { v.visit(i); }, {.grain = 10});
  loop_returned.store(true);
  r.wait(g);
  r.wait_idle();  // the late helper ran
  EXPECT_TRUE(v.each_once());
}

TEST_P(parallel_for_test, a_helper_takes_pieces_from_the_callers_share_while_the_caller_is_busy) {
  auto& r = start();
  if (r.workers() == 1) {
    // No helper: the caller runs every piece of its share in order.
    std::vector<std::size_t> order;
    parallel_for(r, 0, 100, [&](std::size_t f, std::size_t) { order.push_back(f); },
                 {.grain = 10});
    EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
    EXPECT_EQ(order.size(), 10u);
    return;
  }
  // The caller's share starts with every piece; the caller's first piece waits until another
  // thread ran a piece, which a helper can only do by taking the back half of that share.
  const auto caller = std::this_thread::get_id();
  std::atomic<std::size_t> by_others{0};
  std::atomic<bool> gave_up{false};
  visits v(0, 64'000);
  parallel_for(
      r, 0, 64'000,
      [&](std::size_t f, std::size_t l) {
        if (std::this_thread::get_id() == caller) {
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
          while (by_others.load() == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
              gave_up.store(true);
              break;
            }
            std::this_thread::yield();
          }
        } else {
          by_others.fetch_add(1);
        }
        for (std::size_t i = f; i < l; ++i) v.visit(i);
      },
      {.grain = 1000});
  EXPECT_FALSE(gave_up.load()) << "no helper took a piece from the caller's share";
  EXPECT_GT(by_others.load(), 0u);
  EXPECT_TRUE(v.each_once());
}

TEST_P(parallel_for_test, blocking_loops_stay_exact_while_the_active_workers_change) {
  auto& r = start();
  // Helpers go to workers 0 .. active-2 as counted at each loop's start; a resize between that
  // count and a helper's run moves the helper, never loses it or a piece.
  const keeps_resizing resizer(r);
  const int loops = static_cast<int>(scaled(300, 60));
  for (int k = 0; k < loops; ++k) {
    visits v(0, 5000);
    parallel_for(r, 0, 5000, [&v](std::size_t i) { v.visit(i); }, {.grain = 50});
    ASSERT_TRUE(v.each_once()) << "loop " << k;
    const std::uint64_t sum = parallel_reduce(
        r, 0, 5000, std::uint64_t{0},
        [](std::size_t f, std::size_t l) { return std::uint64_t{l - f}; },
        [](std::uint64_t a, std::uint64_t b) { return a + b; }, {.grain = 50});
    ASSERT_EQ(sum, 5000u) << "loop " << k;
  }
}

// ---- loops started from a task (helpers in no group; the loop holds its group) ---------------

TEST_P(parallel_for_test, from_a_task_pieces_run_on_at_most_active_workers_workers) {
  auto& r = start();
  std::mutex m;
  std::set<std::thread::id> threads;
  std::atomic<bool> off_worker{false};
  visits v(0, 100'000);
  const group outer = r.make_group();
  r.spawn(
      [&](context& ctx) {
        parallel_for(ctx, group{}, 0, 100'000,
                     [&](std::size_t f, std::size_t l) {
                       if (!r.current_worker()) off_worker.store(true);
                       {
                         std::lock_guard lock(m);
                         threads.insert(std::this_thread::get_id());
                       }
                       for (std::size_t i = f; i < l; ++i) v.visit(i);
                     },
                     {.grain = 100});
      },
      outer);
  r.wait(outer);
  EXPECT_TRUE(v.each_once());
  EXPECT_FALSE(off_worker.load()) << "a piece ran outside the workers";
  EXPECT_GE(threads.size(), 1u);
  EXPECT_LE(threads.size(), r.active_workers());
}

TEST_P(parallel_for_test, from_a_task_the_loops_group_does_not_wait_for_a_busy_workers_helper) {
  auto& r = start();
  visits v(0, 10'000);
  if (r.workers() == 1) {
    // One worker: no helper besides participant 0, which runs after the starting task.
    const group g = r.make_group();
    r.spawn(
        [&](context& ctx) {
          parallel_for(ctx, group{}, 0, 10'000, [&v](std::size_t i) { v.visit(i); });
        },
        g);
    r.wait(g);
    EXPECT_TRUE(v.each_once());
    return;
  }
  // Worker 1, where the loop's helper 1 goes (the loop starts on worker 0), runs a task until the
  // loop's continuation ran. The loop's group completes without that helper, which then starts,
  // finds every piece gone, and touches only the loop's shared counters (ASan: nothing freed is
  // read). Were the helpers counted in the group, the continuation would wait for the blocker,
  // and the blocker for the continuation (until the 20 s deadline).
  std::atomic<bool> blocker_running{false};
  std::atomic<bool> continued{false};
  std::atomic<bool> gave_up{false};
  const group outer = r.make_group();
  task* blocker = r.make_task_from([&](context&) {
    blocker_running.store(true);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!continued.load()) {
      if (std::chrono::steady_clock::now() > deadline) {
        gave_up.store(true);
        return;
      }
      std::this_thread::yield();
    }
  });
  blocker->annotate(worker_id{1});
  r.spawn(blocker, outer);
  while (!blocker_running.load()) std::this_thread::yield();
  task* starter = r.make_task_from([&](context& ctx) {
    const group loop = ctx.runtime().make_group();
    parallel_for(ctx, loop, 0, 10'000, [&v](std::size_t i) { v.visit(i); }, {.grain = 10});
    ctx.when_done(loop, [&](context&) { continued.store(v.each_once()); });
  });
  starter->annotate(worker_id{0});
  r.spawn(starter, outer);
  r.wait(outer);
  r.wait_idle();  // the late helper ran
  EXPECT_FALSE(gave_up.load()) << "the loop's group waited for the busy worker's helper";
  EXPECT_TRUE(continued.load());
}

TEST_P(parallel_for_test,
       from_a_task_the_body_is_moved_in_once_and_destroyed_before_the_group_completes) {
  auto& r = start();
  const long before = live_objects.load();
  auto copies = std::make_shared<std::atomic<int>>(0);
  std::atomic<long> live_in_continuation{-1};
  const group outer = r.make_group();
  r.spawn(
      [&](context& ctx) {
        const group loop = ctx.runtime().make_group();
        parallel_for(ctx, loop, 0, 10'000, copy_counting_body{copies}, {.grain = 10});
        ctx.when_done(loop, [&](context&) { live_in_continuation.store(live_objects.load()); });
      },
      outer);
  r.wait(outer);
  EXPECT_EQ(copies->load(), 0) << "the body was copied for the helpers";
  EXPECT_EQ(live_in_continuation.load(), before) << "the body outlived the loop's pieces";
}

TEST_P(parallel_for_test,
       from_a_task_an_exception_reaches_the_loops_group_and_the_continuation_runs) {
  auto& r = start();
  std::atomic<std::size_t> calls{0};
  std::atomic<bool> continued{false};
  const group outer = r.make_group();
  r.spawn(
      [&](context& ctx) {
        const group loop = ctx.runtime().make_group();
        parallel_for(ctx, loop, 0, 1000,
                     [&](std::size_t i) {
                       calls.fetch_add(1);
                       if (i == 0) throw std::runtime_error("index 0 failed");
                     },
                     {.grain = 1});
        ctx.when_done(loop, [&](context&) { continued.store(true); });
      },
      outer);
  try {
    r.wait(outer);  // the exception moved from the loop's group to the continuation's
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "index 0 failed");
  }
  EXPECT_TRUE(continued.load());
  EXPECT_LE(calls.load(), 1000u);
  if (r.workers() == 1) {
    EXPECT_EQ(calls.load(), 1u) << "one participant: piece 0 first, then every piece skipped";
  }
}

TEST_P(parallel_for_test, from_a_task_a_loop_into_a_stale_group_is_refused_and_spawns_nothing) {
  auto& r = start();
  const group done = r.make_group();
  r.wait(done);  // completed: the handle is stale
  const long before = live_objects.load();
  std::atomic<int> calls{0};
  std::atomic<bool> refused{false};
  const group outer = r.make_group();
  r.spawn(
      [&](context& ctx) {
        try {
          parallel_for(ctx, done, 0, 1000,
                       [&, t = live_token{}](std::size_t) { calls.fetch_add(1); });
        } catch (const std::logic_error& e) {
          refused.store(std::string(e.what()).find("stale") != std::string::npos);
        }
      },
      outer);
  r.wait(outer);
  r.wait_idle();
  EXPECT_TRUE(refused.load());
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(live_objects.load(), before) << "the refused loop's body was not freed";
}

TEST_P(parallel_for_test, loops_from_tasks_stay_exact_while_the_active_workers_change) {
  auto& r = start();
  // Helpers go to the next active_workers() - 1 workers as counted at each loop's start; a
  // resize meanwhile moves a helper to an active worker, never loses it or a piece.
  const keeps_resizing resizer(r);
  const int loops = static_cast<int>(scaled(300, 60));
  for (int k = 0; k < loops; ++k) {
    visits v(0, 5000);
    std::atomic<std::uint64_t> sum{0};
    const group g = r.make_group();
    r.spawn(
        [&](context& ctx) {
          parallel_for(ctx, group{}, 0, 5000, [&v](std::size_t i) { v.visit(i); }, {.grain = 50});
          parallel_reduce(
              ctx, 0, 5000, std::uint64_t{0},
              [](std::size_t f, std::size_t l) { return std::uint64_t{l - f}; },
              [](std::uint64_t a, std::uint64_t b) { return a + b; },
              [&sum](context&, std::uint64_t s) { sum.store(s); }, {.grain = 50});
        },
        g);
    r.wait(g);
    ASSERT_TRUE(v.each_once()) << "loop " << k;
    ASSERT_EQ(sum.load(), 5000u) << "loop " << k;
  }
}

TEST_P(parallel_for_test, a_stopped_reduction_combines_the_pieces_that_ran) {
  auto& r = start();
  std::stop_source source;
  std::atomic<std::uint64_t> ran{0};  // indices in the pieces whose map ran
  const std::uint64_t sum = parallel_reduce(
      r, 0, 100'000, std::uint64_t{0},
      [&](std::size_t f, std::size_t l) {
        ran.fetch_add(l - f);
        if (f >= 30'000) source.request_stop();
        return std::uint64_t{l - f};
      },
      [](std::uint64_t a, std::uint64_t b) { return a + b; },
      {.grain = 1000, .stop = source.get_token()});
  EXPECT_EQ(sum, ran.load());
  EXPECT_LE(sum, 100'000u);
  if (r.workers() == 1) {
    EXPECT_EQ(sum, 31'000u) << "the caller alone, in order: pieces 0 .. 30";
  }
}

TEST_P(parallel_for_test, loops_from_several_threads_at_once) {
  auto& r = start();
  const int loops = static_cast<int>(scaled(300, 50));
  std::atomic<std::uint64_t> total{0};
  constexpr int callers_count = 4;
  std::vector<std::thread> callers;
  callers.reserve(callers_count);
  for (int t = 0; t < callers_count; ++t) {
    callers.emplace_back([&] {
      for (int k = 0; k < loops; ++k) {
        parallel_for(r, 0, 1000, [&](std::size_t f, std::size_t l) {
          total.fetch_add(l - f, std::memory_order_relaxed);
        }, {.grain = 7});
        total.fetch_add(parallel_reduce(
            r, 0, 1000, std::uint64_t{0},
            [](std::size_t f, std::size_t l) { return std::uint64_t{l - f}; },
            [](std::uint64_t a, std::uint64_t b) { return a + b; }, {.grain = 13}));
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(total.load(), std::uint64_t{callers_count} * 2000u * static_cast<std::uint64_t>(loops));
}

TEST_P(parallel_for_test, a_stop_requested_by_the_body_ends_the_loop_early_without_an_exception) {
  auto& r = start();
  const std::size_t n = scaled(1'000'000, 100'000);
  const std::size_t target = 150;  // in the second piece of 100
  std::stop_source source;
  std::atomic<std::size_t> visited{0};
  std::atomic<std::size_t> found{n};
  parallel_for(
      r, 0, n,
      [&](std::size_t f, std::size_t l) {
        visited.fetch_add(l - f);
        if (f <= target && target < l) {
          found.store(target);
          source.request_stop();
        }
      },
      {.grain = 100, .stop = source.get_token()});
  EXPECT_EQ(found.load(), target);
  EXPECT_LE(visited.load(), n);
  if (r.workers() == 1) {
    EXPECT_EQ(visited.load(), 200u) << "the caller alone: pieces 0 and 1, then nothing";
  }
  // The same with the context form, which runs in tasks.
  std::stop_source again;
  std::atomic<std::size_t> pieces{0};
  parallel_for(
      r, 0, n,
      [&](context&, std::size_t f, std::size_t l) {
        pieces.fetch_add(1);
        if (f <= target && target < l) again.request_stop();
      },
      {.grain = 100, .stop = again.get_token()});
  EXPECT_TRUE(again.stop_requested());
  // Halving makes pieces of 50 to 100 indices: at most 2n/100 of them run, and at 1 worker only
  // the few before the one holding the target (the lower halves run first).
  EXPECT_LE(pieces.load(), 2 * n / 100);
  if (r.workers() == 1) {
    EXPECT_LT(pieces.load(), 10u);
  }
  r.wait_idle();
}

TEST_P(parallel_for_test, a_loop_stopped_before_it_starts_runs_nothing_in_every_form) {
  auto& r = start();
  std::stop_source source;
  source.request_stop();
  const loop_options stopped{.grain = 10, .stop = source.get_token()};
  std::atomic<int> calls{0};
  parallel_for(r, 0, 1000, [&](std::size_t) { calls.fetch_add(1); }, stopped);
  parallel_for(r, 0, 1000, [&](context&, std::size_t, std::size_t) { calls.fetch_add(1); },
               stopped);
  const int sum = parallel_reduce(
      r, 0, 1000, 0,
      [&](std::size_t, std::size_t) {
        calls.fetch_add(1);
        return 1;
      },
      [](int a, int b) { return a + b; }, stopped);
  EXPECT_EQ(sum, 0) << "a stopped reduction combines the pieces that ran: none";
  const group g = r.make_group();
  r.spawn(
      [&](context& ctx) {
        parallel_for(ctx, group{}, 0, 1000, [&](std::size_t) { calls.fetch_add(1); }, stopped);
      },
      g);
  r.wait(g);
  EXPECT_EQ(calls.load(), 0);
}

// ---- parallel_reduce -----------------------------------------------------------------------------

TEST_P(parallel_for_test, a_reduction_sums_a_range_exactly) {
  auto& r = start();
  const std::uint64_t n = scaled(1'000'003, 100'003);
  for (const std::size_t grain : {std::size_t{0}, std::size_t{1000}, std::size_t{n}}) {
    const std::uint64_t sum = parallel_reduce(
        r, 1, n + 1, std::uint64_t{0},
        [](std::size_t f, std::size_t l) {
          std::uint64_t s = 0;
          for (std::size_t i = f; i < l; ++i) s += i;
          return s;
        },
        [](std::uint64_t a, std::uint64_t b) { return a + b; }, {.grain = grain});
    EXPECT_EQ(sum, n * (n + 1) / 2) << "grain " << grain;
  }
}

TEST_P(parallel_for_test, a_reduction_of_an_empty_range_is_the_identity) {
  auto& r = start();
  // A product (identity 1) of 2 per piece: any piece run would make it even.
  const int v = parallel_reduce(
      r, 3, 3, 1, [](std::size_t, std::size_t) { return 2; },
      [](int a, int b) { return a * b; });
  EXPECT_EQ(v, 1);
}

TEST_P(parallel_for_test, a_reduction_that_throws_rethrows) {
  auto& r = start();
  EXPECT_THROW(parallel_reduce(
                   r, 0, 1000, 0,
                   [](std::size_t f, std::size_t) -> int {
                     if (f == 0) throw std::runtime_error("piece 0");
                     return 1;
                   },
                   [](int a, int b) { return a + b; }, {.grain = 10}),
               std::runtime_error);
}

TEST_P(parallel_for_test, from_a_task_a_reduction_hands_its_result_to_done) {
  auto& r = start();
  std::atomic<std::uint64_t> result{0};
  std::atomic<int> done_runs{0};
  const group outer = r.make_group();
  r.spawn(
      [&](context& ctx) {
        parallel_reduce(
            ctx, 0, 100'000, std::uint64_t{0},
            [](std::size_t f, std::size_t l) {
              std::uint64_t s = 0;
              for (std::size_t i = f; i < l; ++i) s += i % 7;
              return s;
            },
            [](std::uint64_t a, std::uint64_t b) { return a + b; },
            [&](context&, std::uint64_t v) {
              result.store(v);
              done_runs.fetch_add(1);
            });
        // and an empty one: done still runs, with the identity (a product, as above)
        parallel_reduce(
            ctx, 5, 5, std::uint64_t{1}, [](std::size_t, std::size_t) { return std::uint64_t{2}; },
            [](std::uint64_t a, std::uint64_t b) { return a * b; },
            [&](context&, std::uint64_t v) { done_runs.fetch_add(v == 1 ? 1 : 100); });
      },
      outer);
  r.wait(outer);  // covers both continuations: they join the spawning task's group
  std::uint64_t want = 0;
  for (std::size_t i = 0; i < 100'000; ++i) want += i % 7;
  EXPECT_EQ(result.load(), want);
  EXPECT_EQ(done_runs.load(), 2);
}

TEST_P(parallel_for_test, from_a_task_a_reduction_that_throws_skips_done_and_reaches_the_group) {
  auto& r = start();
  std::atomic<int> done_runs{0};
  const group outer = r.make_group();
  r.spawn(
      [&](context& ctx) {
        parallel_reduce(
            ctx, 0, 1000, 0,
            [](std::size_t f, std::size_t) -> int {
              if (f == 0) throw std::runtime_error("piece 0");
              return 1;
            },
            [](int a, int b) { return a + b; }, [&](context&, int) { done_runs.fetch_add(1); },
            {.grain = 10});
      },
      outer);
  EXPECT_THROW(r.wait(outer), std::runtime_error);
  EXPECT_EQ(done_runs.load(), 0);
}

#if defined(TESSERA_DEBUG_CHECKS)
/// Task allocations on this thread: after `allowed` more succeed, the next one throws
/// std::bad_alloc, once. Through test_hooks::task_allocating, which sees every task allocation
/// of a runtime with task_allocator::system.
thread_local int allocations_before_failure = -1;  // -1: none fails

class failing_task_allocations {
 public:
  failing_task_allocations() {
    m_failures.store(0);
    detail::test_hooks::task_allocating.store(&hook);
  }
  ~failing_task_allocations() { detail::test_hooks::task_allocating.store(nullptr); }
  failing_task_allocations(const failing_task_allocations&) = delete;
  failing_task_allocations& operator=(const failing_task_allocations&) = delete;
  static void arm(int allowed) { allocations_before_failure = allowed; }
  static void disarm() { allocations_before_failure = -1; }
  /// How many allocations failed (the path under test was taken).
  int failures() const { return m_failures.load(); }

 private:
  static void hook(std::size_t) {
    int& left = allocations_before_failure;
    if (left >= 0 && left-- == 0) {  // left is -1 afterwards
      m_failures.fetch_add(1);
      throw std::bad_alloc();
    }
  }
  static inline std::atomic<int> m_failures{0};
};

TEST_P(parallel_for_test, without_memory_for_a_helper_a_blocking_loop_runs_on_the_caller) {
  const failing_task_allocations hook;
  auto& r = start({.allocator = task_allocator::system});
  const std::size_t n = 5000;
  visits v(0, n);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  failing_task_allocations::arm(0);  // the first helper cannot be made
  EXPECT_NO_THROW(parallel_for(
      r, 0, n,
      [&](std::size_t i) {
        v.visit(i);
        if (std::this_thread::get_id() != caller) elsewhere.fetch_add(1);
      },
      {.grain = 16}));
  failing_task_allocations::disarm();
  EXPECT_EQ(hook.failures(), worker_count() > 1 ? 1 : 0);  // one worker: no helper to make
  EXPECT_TRUE(v.each_once());
  EXPECT_EQ(elsewhere.load(), 0) << "a helper ran although none could be made";
  // a reduction too: the helpers' slots that were never made stay the identity
  failing_task_allocations::arm(0);
  std::uint64_t sum = 0;
  EXPECT_NO_THROW(sum = parallel_reduce(
                      r, 0, n, std::uint64_t{0},
                      [](std::size_t f, std::size_t l) {
                        std::uint64_t s = 0;
                        for (std::size_t i = f; i < l; ++i) s += i;
                        return s;
                      },
                      [](std::uint64_t a, std::uint64_t b) { return a + b; }, {.grain = 16}));
  failing_task_allocations::disarm();
  EXPECT_EQ(sum, std::uint64_t{n} * (n - 1) / 2);
  EXPECT_EQ(hook.failures(), worker_count() > 1 ? 2 : 0);
  // the runtime is unharmed: the next loop has its helpers
  visits again(0, n);
  parallel_for(r, 0, n, [&again](std::size_t i) { again.visit(i); });
  EXPECT_TRUE(again.each_once());
}

// allowed 0: no helper can be made, and the calling task runs every piece before the call
// returns; allowed 1: the last participant is made and the next one fails (with one worker there
// is no next one: the plain path), and those made run the loop.
TEST_P(parallel_for_test, from_a_task_without_memory_for_helpers_those_made_run_the_loop) {
  const failing_task_allocations hook;
  auto& r = start({.allocator = task_allocator::system});
  const std::size_t n = 5000;
  for (const int allowed : {0, 1}) {
    visits v(0, n);
    std::atomic<bool> ran_before_return{false};
    std::atomic<bool> all_seen{false};
    const int failures_before = hook.failures();
    const group outer = r.make_group();
    r.spawn(
        [&](context& ctx) {
          const group loop = ctx.runtime().make_group();
          failing_task_allocations::arm(allowed);
          parallel_for(ctx, loop, 0, n, [&v](std::size_t i) { v.visit(i); }, {.grain = 16});
          failing_task_allocations::disarm();
          ran_before_return.store(v.each_once());
          ctx.when_done(loop, [&](context&) { all_seen.store(v.each_once()); });
        },
        outer);
    r.wait(outer);
    EXPECT_EQ(hook.failures() - failures_before, allowed == 0 || worker_count() > 1 ? 1 : 0)
        << "allowed " << allowed;
    if (allowed == 0) {
      EXPECT_TRUE(ran_before_return.load()) << "the calling task did not run every piece itself";
    }
    EXPECT_TRUE(all_seen.load()) << "allowed " << allowed;
  }
}

TEST_P(parallel_for_test, from_a_task_a_reduction_without_memory_for_any_helper_still_completes) {
  const failing_task_allocations hook;
  auto& r = start({.allocator = task_allocator::system});
  std::atomic<std::uint64_t> result{0};
  const group outer = r.make_group();
  r.spawn(
      [&](context& ctx) {
        failing_task_allocations::arm(0);  // the first helper fails; `done`'s task is made
        parallel_reduce(
            ctx, 0, 10'000, std::uint64_t{0},
            [](std::size_t f, std::size_t l) {
              std::uint64_t s = 0;
              for (std::size_t i = f; i < l; ++i) s += i;
              return s;
            },
            [](std::uint64_t a, std::uint64_t b) { return a + b; },
            [&](context&, std::uint64_t v) { result.store(v); }, {.grain = 16});
        failing_task_allocations::disarm();
      },
      outer);
  r.wait(outer);
  EXPECT_EQ(hook.failures(), 1);
  EXPECT_EQ(result.load(), std::uint64_t{10'000} * 9'999 / 2);
}
#endif

// ---- short pieces: a participant claims adjacent pieces in batches (detail/claimed_loop.h) -----

/// The pieces a loop body was called with, in the order each thread called it.
struct piece_log {
  void add(std::size_t f, std::size_t l) const {
    const std::lock_guard lock(m);
    all.emplace_back(f, l);
    by_thread[std::this_thread::get_id()].emplace_back(f, l);
  }
  /// The pieces tile [0, n) in pieces of at most `grain` indices, sizes differing by at most
  /// one (how claimed_loop cuts a range), each called once; "" if so, else what is wrong.
  std::string tiles(std::size_t n, std::size_t grain) const {
    auto sorted = all;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t pieces = (n + grain - 1) / grain;
    if (sorted.size() != pieces) return std::to_string(sorted.size()) + " calls for " +
                                        std::to_string(pieces) + " pieces";
    std::size_t at = 0;
    std::size_t smallest = n;
    std::size_t largest = 0;
    for (const auto& [f, l] : sorted) {
      if (f != at || l <= f) return "a piece [" + std::to_string(f) + ", " + std::to_string(l) +
                                    ") where " + std::to_string(at) + " was next";
      smallest = std::min(smallest, l - f);
      largest = std::max(largest, l - f);
      at = l;
    }
    if (at != n) return "the pieces end at " + std::to_string(at);
    if (largest > grain || largest - smallest > 1) {
      return "piece sizes " + std::to_string(smallest) + ".." + std::to_string(largest);
    }
    return "";
  }
  /// One thread called the body, each piece right after the one before it (one worker: the
  /// caller's share, a batch after another, in index order).
  bool one_thread_in_order() const {
    if (by_thread.size() != 1) return false;
    const auto& pieces = by_thread.begin()->second;
    for (std::size_t k = 1; k < pieces.size(); ++k) {
      if (pieces[k].first != pieces[k - 1].second) return false;
    }
    return true;
  }
  mutable std::mutex m;
  mutable std::vector<std::pair<std::size_t, std::size_t>> all;
  mutable std::map<std::thread::id, std::vector<std::pair<std::size_t, std::size_t>>> by_thread;
};

TEST_P(parallel_for_test, short_pieces_claimed_together_are_still_called_one_by_one_with_their_own_bounds) {
  auto& r = start();
  // Pieces of a few indices are far shorter than a batch's threshold: claims grow to many
  // pieces each. The body still sees every piece alone, with the bounds the grain asked for.
  for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{1000},
                              scaled(100'003, 20'003)}) {
    for (const std::size_t grain : {std::size_t{1}, std::size_t{3}}) {
      const piece_log blocking;
      parallel_for(r, 0, n, [&](std::size_t f, std::size_t l) { blocking.add(f, l); },
                   {.grain = grain});
      EXPECT_EQ(blocking.tiles(n, grain), "") << "blocking, n " << n << ", grain " << grain;
      if (r.workers() == 1) {
        EXPECT_TRUE(blocking.one_thread_in_order()) << "n " << n << ", grain " << grain;
      }

      const piece_log reduced;
      const std::uint64_t sum = parallel_reduce(
          r, 0, n, std::uint64_t{0},
          [&](std::size_t f, std::size_t l) {
            reduced.add(f, l);
            return std::uint64_t{l - f};
          },
          [](std::uint64_t a, std::uint64_t b) { return a + b; }, {.grain = grain});
      EXPECT_EQ(sum, n);
      EXPECT_EQ(reduced.tiles(n, grain), "") << "reduce, n " << n << ", grain " << grain;

      const piece_log in_tasks;
      std::atomic<std::uint64_t> task_sum{0};
      const group outer = r.make_group();
      r.spawn(
          [&](context& ctx) {
            parallel_for(ctx, group{}, 0, n,
                         [&](std::size_t f, std::size_t l) { in_tasks.add(f, l); },
                         {.grain = grain});
            parallel_reduce(
                ctx, 0, n, std::uint64_t{0},
                [](std::size_t f, std::size_t l) { return std::uint64_t{l - f}; },
                [](std::uint64_t a, std::uint64_t b) { return a + b; },
                [&](context&, std::uint64_t v) { task_sum.store(v); }, {.grain = grain});
          },
          outer);
      r.wait(outer);
      EXPECT_EQ(in_tasks.tiles(n, grain), "") << "from a task, n " << n << ", grain " << grain;
      EXPECT_EQ(task_sum.load(), n);
    }
  }
  // An empty range calls nothing in every form.
  std::atomic<int> calls{0};
  parallel_for(r, 5, 5, [&](std::size_t, std::size_t) { calls.fetch_add(1); }, {.grain = 1});
  EXPECT_EQ(parallel_reduce(
                r, 5, 5, 0,
                [&](std::size_t, std::size_t) {
                  calls.fetch_add(1);
                  return 1;
                },
                [](int a, int b) { return a + b; }, {.grain = 1}),
            0);
  EXPECT_EQ(calls.load(), 0);
}

TEST_P(parallel_for_test, short_pieces_of_mixed_length_run_once_each) {
  auto& r = start();
  // Short pieces make the claims grow; then a stretch of slow pieces (each ~20 µs) makes them
  // shrink again, and a thief still finds the slow ones not claimed: every index once.
  const std::size_t n = scaled(60'000, 12'000);
  visits v(0, n);
  parallel_for(
      r, 0, n,
      [&](std::size_t i) {
        if (i >= n / 3 && i < n / 3 + 200) {
          const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
          while (std::chrono::steady_clock::now() < until) {
          }
        }
        v.visit(i);
      },
      {.grain = 1});
  EXPECT_TRUE(v.each_once());
}

TEST_P(parallel_for_test, a_stop_skips_the_rest_of_a_batch_of_short_pieces) {
  auto& r = start();
  // Thousands of one-index pieces before the stop: the claims have grown to many pieces. The
  // piece that requests the stop is the last its thread starts: the rest of its batch is
  // skipped (each piece is tested before it starts), whatever the batch.
  const std::size_t n = scaled(200'000, 40'000);
  const std::size_t target = n / 4 + 17;
  for (int form = 0; form < 2; ++form) {
    std::stop_source source;
    std::atomic<std::thread::id> stopper{};
    std::atomic<bool> after_stop_on_stopper{false};
    std::atomic<std::size_t> ran{0};
    const auto body = [&](std::size_t i) {
      if (stopper.load() == std::this_thread::get_id()) after_stop_on_stopper.store(true);
      ran.fetch_add(1);
      if (i == target) {
        stopper.store(std::this_thread::get_id());
        source.request_stop();
      }
    };
    const loop_options options{.grain = 1, .stop = source.get_token()};
    if (form == 0) {
      parallel_for(r, 0, n, body, options);
    } else {
      const group outer = r.make_group();
      r.spawn([&](context& ctx) { parallel_for(ctx, group{}, 0, n, body, options); }, outer);
      r.wait(outer);
    }
    EXPECT_TRUE(source.stop_requested()) << "form " << form;
    EXPECT_FALSE(after_stop_on_stopper.load()) << "form " << form << ": a piece ran after the "
                                                  "stop on the thread that requested it";
    EXPECT_LE(ran.load(), n);
    if (r.workers() == 1) {
      EXPECT_EQ(ran.load(), target + 1) << "form " << form << ": one thread, in index order";
    }
  }
}

TEST_P(parallel_for_test, an_exception_skips_the_rest_of_a_batch_of_short_pieces) {
  auto& r = start();
  const std::size_t n = scaled(200'000, 40'000);
  const std::size_t target = n / 4 + 17;
  for (int form = 0; form < 2; ++form) {
    std::atomic<std::thread::id> thrower{};
    std::atomic<bool> after_throw_on_thrower{false};
    std::atomic<std::size_t> ran{0};
    std::atomic<bool> done_ran{false};
    const auto map = [&](std::size_t f, std::size_t l) {
      if (thrower.load() == std::this_thread::get_id()) after_throw_on_thrower.store(true);
      ran.fetch_add(l - f);
      if (f <= target && target < l) {
        thrower.store(std::this_thread::get_id());
        throw std::runtime_error("piece " + std::to_string(f));
      }
      return std::uint64_t{l - f};
    };
    const auto add = [](std::uint64_t a, std::uint64_t b) { return a + b; };
    std::string what;
    if (form == 0) {
      try {
        (void)parallel_reduce(r, 0, n, std::uint64_t{0}, map, add, {.grain = 1});
        ADD_FAILURE() << "no exception";
      } catch (const std::runtime_error& e) {
        what = e.what();
      }
    } else {
      const group outer = r.make_group();
      r.spawn(
          [&](context& ctx) {
            parallel_reduce(ctx, 0, n, std::uint64_t{0}, map, add,
                            [&](context&, std::uint64_t) { done_ran.store(true); },
                            {.grain = 1});
          },
          outer);
      try {
        r.wait(outer);
        ADD_FAILURE() << "no exception";
      } catch (const std::runtime_error& e) {
        what = e.what();
      }
    }
    EXPECT_EQ(what, "piece " + std::to_string(target)) << "form " << form;
    EXPECT_FALSE(done_ran.load()) << "`done` saw a partial result";
    EXPECT_FALSE(after_throw_on_thrower.load()) << "form " << form << ": a piece ran after the "
                                                   "exception on the thread that threw it";
    if (r.workers() == 1) {
      EXPECT_EQ(ran.load(), target + 1) << "form " << form << ": one thread, in index order";
    }
  }
}

TEST_P(parallel_for_test, pieces_that_turn_long_after_short_ones_run_once_each_in_every_form) {
  auto& r = start();
  // Pieces of ~100 ns make the claims grow to many pieces; then the pieces turn long (~100 µs
  // each): a batch sized on the short ones is cut within a few pieces of its first long one, its
  // pieces not started go back to its share, and thieves take them. Two layouts: half short,
  // half long (the long ones reached by batches of short ones), and the long ones at the very
  // end (a batch may hold the share's last pieces). Every piece once, in every loop form.
  struct layout {
    std::size_t pieces;
    std::size_t first_long;
  };
  for (const layout at : {layout{400, 200}, layout{scaled(6'000, 2'000), scaled(5'900, 1'900)}}) {
    const auto spin = [](std::chrono::nanoseconds d) {
      const auto until = std::chrono::steady_clock::now() + d;
      while (std::chrono::steady_clock::now() < until) {
      }
    };
    const auto piece = [&, at](const piece_log& log, std::size_t f, std::size_t l) {
      for (std::size_t i = f; i < l; ++i) {
        spin(i < at.first_long ? std::chrono::nanoseconds(100) : std::chrono::microseconds(100));
      }
      log.add(f, l);
    };
    const std::string where = "pieces " + std::to_string(at.pieces) + ", long from " +
                              std::to_string(at.first_long);

    const piece_log blocking;
    parallel_for(r, 0, at.pieces, [&](std::size_t f, std::size_t l) { piece(blocking, f, l); },
                 {.grain = 1});
    EXPECT_EQ(blocking.tiles(at.pieces, 1), "") << "blocking, " << where;

    const piece_log reduced;
    EXPECT_EQ(parallel_reduce(
                  r, 0, at.pieces, std::uint64_t{0},
                  [&](std::size_t f, std::size_t l) {
                    piece(reduced, f, l);
                    return std::uint64_t{l - f};
                  },
                  [](std::uint64_t a, std::uint64_t b) { return a + b; }, {.grain = 1}),
              at.pieces);
    EXPECT_EQ(reduced.tiles(at.pieces, 1), "") << "reduce, " << where;

    const piece_log in_task;
    const piece_log reduced_in_task;
    std::atomic<std::uint64_t> task_sum{0};
    const group outer = r.make_group();
    r.spawn(
        [&](context& ctx) {
          parallel_for(ctx, group{}, 0, at.pieces,
                       [&](std::size_t f, std::size_t l) { piece(in_task, f, l); }, {.grain = 1});
          parallel_reduce(
              ctx, 0, at.pieces, std::uint64_t{0},
              [&](std::size_t f, std::size_t l) {
                piece(reduced_in_task, f, l);
                return std::uint64_t{l - f};
              },
              [](std::uint64_t a, std::uint64_t b) { return a + b; },
              [&](context&, std::uint64_t v) { task_sum.store(v); }, {.grain = 1});
        },
        outer);
    r.wait(outer);
    EXPECT_EQ(in_task.tiles(at.pieces, 1), "") << "from a task, " << where;
    EXPECT_EQ(reduced_in_task.tiles(at.pieces, 1), "") << "reduce from a task, " << where;
    EXPECT_EQ(task_sum.load(), at.pieces);
    if (r.workers() == 1) {
      EXPECT_TRUE(blocking.one_thread_in_order()) << where;
      EXPECT_TRUE(reduced.one_thread_in_order()) << where;
    }
  }
}

// A body whose call operator is not const (a mutable lambda) would race with itself across
// workers: it is no loop body.
static_assert(!loop_body<decltype([n = 0](std::size_t) mutable { ++n; })>);
static_assert(loop_body<decltype([](std::size_t) {})>);
static_assert(loop_body<decltype([](std::size_t, std::size_t) {})>);
static_assert(loop_body<decltype([](context&, std::size_t, std::size_t) {})>);

TESSERA_INSTANTIATE_WORKER_COUNTS(parallel_for_test);

}  // namespace
}  // namespace tessera::test
