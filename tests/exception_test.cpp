// Exceptions thrown by tasks: they reach the group's waiter (type and message intact), they never
// kill a worker, and those of ungrouped tasks are collected by take_unhandled_exceptions().
#include <atomic>
#include <set>
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

/// Rethrows `e` and returns its task_failure's message ("" for another type).
std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const task_failure& f) {
    return f.what();
  } catch (...) {
  }
  return "";
}

// context.h promises it: the continuation runs once all the same, and the exception goes to the
// continuation's group (here none: the unhandled list).
/// A task that gives `when_done` a group of one child that throws task_failure("inner"), with a
/// continuation that counts its runs in `continued`.
auto forks_a_failing_group(std::atomic<int>& continued) {
  return [&continued, tok = live_token{}](context& ctx) {
    const group inner = ctx.runtime().make_group();
    ctx.spawn(&make_fn(ctx, [tok2 = live_token{}](context&) {
                 throw task_failure("inner", 1);
               })->annotate(inner));
    ctx.when_done(inner, make_fn(ctx, [&continued, tok3 = live_token{}](context&) {
                    continued.fetch_add(1);
                  }));
  };
}

TEST_P(exception_test, when_done_continuation_runs_even_if_the_inner_group_threw) {
  auto& r = start_quiet();
  std::atomic<int> continued{0};
  r.spawn(forks_a_failing_group(continued));
  r.wait_idle();
  EXPECT_EQ(continued.load(), 1);
  const auto errors = r.take_unhandled_exceptions();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(message_of(errors[0]), "inner");
}

TEST_P(exception_test, the_inner_groups_exception_reaches_the_wait_of_the_continuations_group) {
  auto& r = start_quiet();
  std::atomic<int> continued{0};
  const group outer = r.make_group();
  r.spawn(forks_a_failing_group(continued), outer);
  try {
    r.wait(outer);
    ADD_FAILURE() << "the outer wait did not rethrow the inner group's exception";
  } catch (const task_failure& f) {
    EXPECT_STREQ(f.what(), "inner");
  }
  EXPECT_EQ(continued.load(), 1);
  EXPECT_TRUE(r.take_unhandled_exceptions().empty());
}

// A group nobody waits for must neither lose its exceptions without a word nor keep its slot for
// good: a detached group frees its slot when its tasks are done, and what they threw goes to the
// unhandled list.
TEST_P(exception_test, a_detached_groups_exception_is_unhandled_and_its_slot_is_reused) {
  auto& r = start_quiet();
  const int rounds = static_cast<int>(scaled(1000, 100));
  std::atomic<int> ran{0};
  std::set<std::uint32_t> slots;
  for (int i = 0; i < rounds; ++i) {
    const group g = r.make_group();
    slots.insert(g.index);
    for (int k = 0; k < 3; ++k) {
      r.spawn(
          [&ran, i, k, tok = live_token{}](context&) {
            ran.fetch_add(1);
            if (k == 0 && i % 10 == 0) throw task_failure("detached", i);
          },
          g);
    }
    r.detach(g);
    EXPECT_THROW(r.detach(g), std::logic_error) << "a second detach";
    EXPECT_THROW(r.wait(g), std::logic_error) << "a wait after the detach";
    if (i % 50 == 49) r.wait_idle();  // the detached groups completed: their slots are free
  }
  r.wait_idle();
  EXPECT_EQ(ran.load(), 3 * rounds);
  EXPECT_LE(slots.size(), 64u) << "detached groups' slots were not reused";
  const auto errors = r.take_unhandled_exceptions();
  EXPECT_EQ(errors.size(), static_cast<std::size_t>((rounds + 9) / 10));
  for (const auto& e : errors) EXPECT_EQ(message_of(e), "detached");
}

TEST_P(exception_test, a_task_may_detach_a_group_it_made) {
  auto& r = start_quiet();
  std::atomic<int> ran{0};
  r.spawn([&ran, tok = live_token{}](context& ctx) {
    const group g = ctx.runtime().make_group();
    for (int k = 0; k < 8; ++k) {
      ctx.spawn(&make_fn(ctx, [&ran, tok2 = live_token{}](context&) {
                   ran.fetch_add(1);
                 })->annotate(g));
    }
    ctx.runtime().detach(g);
  });
  r.wait_idle();
  EXPECT_EQ(ran.load(), 8);
}

// The destructor says how many groups nobody waited for, and what the first held threw.
TEST(exception_report, groups_never_waited_for_are_reported_when_the_runtime_ends) {
  testing::internal::CaptureStderr();
  {
    runtime r({.workers = 2u});
    const group g = r.make_group();
    r.spawn([](context&) { throw task_failure("never waited for", 0); }, g);
    const group waited = r.make_group();
    r.spawn([](context&) {}, waited);
    r.wait(waited);
    (void)r.make_group();  // empty, never waited for
    r.wait_idle();
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("2 groups were never waited for"), std::string::npos) << err;
  EXPECT_NE(err.find("never waited for (each group needs runtime::wait"), std::string::npos) << err;
  EXPECT_NE(err.find("first: never waited for"), std::string::npos) << err;
}

TESSERA_INSTANTIATE_WORKER_COUNTS(exception_test);

}  // namespace
}  // namespace tessera::test
