// Exceptions thrown by tasks: they reach the group's waiter (type and message intact), they never
// kill a worker, and those of ungrouped tasks are collected by take_unhandled_exceptions().
#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.h"

namespace tessera::test {
namespace {

struct task_failure : std::runtime_error {
  task_failure(const std::string& what, int c) : std::runtime_error(what), code(c) {}
  int code;
};

class exception_test : public runtime_fixture {
 protected:
  runtime& start_quiet() {
    m_expect_unhandled = true;
    return start({.report_unhandled_exceptions = false});
  }

  /// Every worker still runs tasks: one targeted task per worker, waited for.
  void expect_every_worker_alive(runtime& r, int rounds = 10) {
    std::atomic<unsigned> ran{0};
    std::atomic<unsigned> wrong{0};
    const group g = r.make_group();
    for (int i = 0; i < rounds; ++i) {
      for (unsigned w = 0; w < r.workers(); ++w) {
        auto* t = make_fn(r, [&, w, tok = live_token{}](context& ctx) {
          ran.fetch_add(1);
          if (ctx.worker() != wid(w)) wrong.fetch_add(1);
        });
        t->annotate(wid(w));
        r.spawn(t, g);
      }
    }
    r.wait(g);
    EXPECT_EQ(ran.load(), static_cast<unsigned>(rounds) * r.workers());
    EXPECT_EQ(wrong.load(), 0u);
  }
};

TEST_P(exception_test, wait_rethrows_the_tasks_exception_with_type_and_message) {
  auto& r = start_quiet();
  const group g = r.make_group();
  r.spawn([tok = live_token{}](context&) { throw task_failure("disk on fire", 42); }, g);
  try {
    r.wait(g);
    ADD_FAILURE() << "wait() returned normally";
  } catch (const task_failure& e) {
    EXPECT_STREQ(e.what(), "disk on fire");
    EXPECT_EQ(e.code, 42);
  } catch (...) {
    ADD_FAILURE() << "wait() threw something other than the task's exception";
  }
  expect_every_worker_alive(r);
}

TEST_P(exception_test, non_standard_exception_types_are_rethrown) {
  auto& r = start_quiet();
  const group g = r.make_group();
  r.spawn([tok = live_token{}](context&) { throw 7; }, g);
  try {
    r.wait(g);
    ADD_FAILURE() << "wait() returned normally";
  } catch (int v) {
    EXPECT_EQ(v, 7);
  } catch (...) {
    ADD_FAILURE() << "wrong exception type";
  }
}

TEST_P(exception_test, every_task_of_the_group_still_runs_and_one_exception_is_rethrown) {
  auto& r = start_quiet();
  const int n = static_cast<int>(scaled(2000, 300));
  std::atomic<int> ran{0};
  const group g = r.make_group();
  for (int i = 0; i < n; ++i) {
    r.spawn(
        [&ran, i, tok = live_token{}](context&) {
          ran.fetch_add(1);
          if (i % 100 == 7) throw task_failure("task " + std::to_string(i), i);
        },
        g);
  }
  int rethrown = 0;
  try {
    r.wait(g);
  } catch (const task_failure& e) {
    ++rethrown;
    EXPECT_EQ(e.code % 100, 7);
    EXPECT_EQ(std::string(e.what()), "task " + std::to_string(e.code));
  }
  EXPECT_EQ(rethrown, 1);
  EXPECT_EQ(ran.load(), n) << "wait returned before every task of the group finished";
  expect_every_worker_alive(r);
}

TEST_P(exception_test, exception_of_a_child_reaches_the_parents_group) {
  auto& r = start_quiet();
  const group g = r.make_group();
  r.spawn(
      [tok = live_token{}](context& ctx) {
        ctx.spawn([tok2 = live_token{}](context& inner) {
          inner.spawn([tok3 = live_token{}](context&) { throw task_failure("grandchild", 3); });
        });
      },
      g);
  EXPECT_THROW(r.wait(g), task_failure);
  expect_every_worker_alive(r);
}

// The task gave its count to the child it spawned (worker::take_token) before it threw: the waiter
// gets the exception, and only after the child ran.
TEST_P(exception_test, a_task_that_throws_after_spawning_is_waited_for_with_its_child) {
  auto& r = start_quiet();
  for (int round = 0; round < 20; ++round) {
    std::atomic<bool> child_ran{false};
    const group g = r.make_group();
    r.spawn(
        [&child_ran](context& ctx) {
          ctx.spawn([&child_ran](context&) { child_ran.store(true); });
          throw task_failure("after the spawn", 7);
        },
        g);
    EXPECT_THROW(r.wait(g), task_failure);
    EXPECT_TRUE(child_ran.load()) << "round " << round;
  }
  expect_every_worker_alive(r);
}

TEST_P(exception_test, runtime_keeps_running_after_many_exceptions) {
  auto& r = start_quiet();
  const int groups = static_cast<int>(scaled(300, 40));
  for (int i = 0; i < groups; ++i) {
    const group g = r.make_group();
    for (unsigned w = 0; w < r.workers(); ++w) {
      auto* t = make_fn(r, [i, tok = live_token{}](context&) { throw task_failure("x", i); });
      t->annotate(wid(w));  // every worker throws
      r.spawn(t, g);
    }
    EXPECT_THROW(r.wait(g), task_failure) << "group " << i;
  }
  expect_every_worker_alive(r);
  EXPECT_TRUE(r.running());
}

TEST_P(exception_test, ungrouped_exceptions_are_collected) {
  auto& r = start_quiet();
  const int n = static_cast<int>(scaled(500, 60));
  std::atomic<int> ran{0};
  for (int i = 0; i < n; ++i) {
    r.spawn([&ran, i, tok = live_token{}](context&) {
      ran.fetch_add(1);
      if (i % 2 == 0) throw task_failure("ungrouped", i);
    });
  }
  r.wait_idle();
  EXPECT_EQ(ran.load(), n);
  auto errors = r.take_unhandled_exceptions();
  ASSERT_EQ(errors.size(), static_cast<std::size_t>((n + 1) / 2));
  std::vector<bool> seen(n, false);
  for (auto& e : errors) {
    try {
      std::rethrow_exception(e);
    } catch (const task_failure& f) {
      EXPECT_STREQ(f.what(), "ungrouped");
      ASSERT_GE(f.code, 0);
      ASSERT_LT(f.code, n);
      EXPECT_FALSE(seen[f.code]) << "exception of task " << f.code << " collected twice";
      seen[f.code] = true;
    } catch (...) {
      ADD_FAILURE() << "wrong exception type";
    }
  }
  EXPECT_TRUE(r.take_unhandled_exceptions().empty()) << "taken exceptions must not come back";
  expect_every_worker_alive(r);
}

TEST_P(exception_test, wait_idle_leaves_grouped_exceptions_with_their_group) {
  auto& r = start_quiet();
  const group g = r.make_group();
  r.spawn([tok = live_token{}](context&) { throw task_failure("grouped", 1); }, g);
  r.wait_idle();
  EXPECT_TRUE(r.take_unhandled_exceptions().empty());
  EXPECT_THROW(r.wait(g), task_failure);
}

TEST_P(exception_test, exception_counter_counts_throwing_tasks) {
  auto& r = start_quiet();
  const int n = 50;
  const group g = r.make_group();
  for (int i = 0; i < n; ++i) {
    r.spawn([tok = live_token{}](context&) { throw task_failure("counted", 0); }, g);
  }
  EXPECT_THROW(r.wait(g), task_failure);
  r.wait_idle();
  EXPECT_EQ(r.statistics().total().exceptions, static_cast<std::uint64_t>(n));
}

TEST_P(exception_test, throwing_task_object_is_destroyed) {
  auto& r = start_quiet();
  struct thrower final : counted_task {
    task* execute(context&) override { throw task_failure("destroy me", 0); }
  };
  const group g = r.make_group();
  for (int i = 0; i < 100; ++i) r.spawn(r.make_task<thrower>(), g);
  EXPECT_THROW(r.wait(g), task_failure);
  r.wait_idle();
  EXPECT_EQ(live_objects.load(), 0) << "a task whose execute threw was not destroyed";
}

TEST_P(exception_test, when_done_continuation_runs_even_if_the_inner_group_threw) {
  // Not promised by the header in so many words, but a continuation that never runs would leak
  // it; the fixture's leak check pins that the continuation is at least destroyed.
  auto& r = start_quiet();
  std::atomic<int> continued{0};
  r.spawn([&, tok = live_token{}](context& ctx) {
    const group inner = ctx.runtime().make_group();
    ctx.spawn(&make_fn(ctx, [tok2 = live_token{}](context&) {
                 throw task_failure("inner", 1);
               })->annotate(inner));
    ctx.when_done(inner,
                  make_fn(ctx, [&, tok3 = live_token{}](context&) { continued.fetch_add(1); }));
  });
  r.wait_idle();
  r.stop();
  EXPECT_LE(continued.load(), 1);
}

TESSERA_INSTANTIATE_WORKER_COUNTS(exception_test);

}  // namespace
}  // namespace tessera::test
