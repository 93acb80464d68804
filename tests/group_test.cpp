// Groups: waiting for many tasks, nesting (children join, inner groups with when_done), slot reuse
// with generations (a stale handle is detected, never aliased), and wait_idle.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <latch>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/test_hooks.h"
#include "test_support.h"

namespace tessera::test {
namespace {

class group_test : public runtime_fixture {};

TEST_P(group_test, wait_returns_after_every_task_and_sees_their_writes) {
  auto& r = start();
  const std::size_t n = scaled(20000, 2000);
  std::vector<std::uint64_t> out(n, 0);  // plain memory: wait() orders the writes before reads
  const group g = r.make_group();
  for (std::size_t i = 0; i < n; ++i) {
    r.spawn([&out, i, tok = live_token{}](context&) { out[i] = i * i; }, g);
  }
  r.wait(g);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += out[i] != i * i;
  EXPECT_EQ(wrong, 0u);
}

TEST_P(group_test, wait_on_a_group_without_tasks_returns) {
  auto& r = start();
  for (int i = 0; i < 100; ++i) {
    const group g = r.make_group();
    ASSERT_TRUE(g.valid());
    r.wait(g);
  }
}

TEST_P(group_test, default_group_is_not_valid) {
  start();
  EXPECT_FALSE(group{}.valid());
}

/// Each node writes its slot in a plain array and spawns children that join its group.
class nested_task final : public counted_task {
 public:
  nested_task(std::vector<unsigned char>& seen, std::size_t index, std::size_t size) noexcept
      : m_seen(&seen), m_index(index), m_size(size) {}
  task* execute(context& ctx) override {
    (*m_seen)[m_index] = 1;
    // Heap-shaped tree: children of i are 2i+1 and 2i+2.
    for (std::size_t c = 2 * m_index + 1; c <= 2 * m_index + 2 && c < m_size; ++c) {
      ctx.spawn(ctx.make_task<nested_task>(*m_seen, c, m_size));
    }
    return nullptr;
  }

 private:
  std::vector<unsigned char>* m_seen;
  std::size_t m_index;
  std::size_t m_size;
};

/// Spawns the task `make_root(seen)` makes into a fresh group, waits for the group and returns
/// how many of the `n` entries of `seen` no task marked. `seen` is plain memory: wait() orders
/// the tasks' writes before the count.
template <class MakeRoot>
std::size_t unmarked_after_wait(runtime& r, std::size_t n, MakeRoot make_root) {
  std::vector<unsigned char> seen(n, 0);
  const group g = r.make_group();
  r.spawn(make_root(seen), g);
  r.wait(g);
  std::size_t missing = 0;
  for (auto x : seen) missing += x == 0;
  return missing;
}

TEST_P(group_test, nested_children_join_the_group_and_wait_covers_them) {
  auto& r = start();
  const std::size_t n = scaled(50000, 5000);
  for (int round = 0; round < 3; ++round) {
    const std::size_t missing = unmarked_after_wait(r, n, [&](std::vector<unsigned char>& seen) {
      return r.make_task<nested_task>(seen, 0, n);
    });
    ASSERT_EQ(missing, 0u) << "round " << round;
  }
}

/// A task of a group that sends its children to the next worker and keeps running for a while.
/// Workers batch their count changes of a group: the sender's batch counts the children it sent
/// until it is flushed, which must happen before a child can run elsewhere — else the receiver's
/// completions would bring the group to zero while the sender still runs.
class sender_task final : public counted_task {
 public:
  sender_task(std::vector<unsigned char>& seen, std::size_t index, unsigned workers) noexcept
      : m_seen(&seen), m_index(index), m_workers(workers) {}
  task* execute(context& ctx) override {
    if (m_index != 0) {
      (*m_seen)[m_index] = 1;
      return nullptr;
    }
    const auto next = static_cast<std::uint16_t>((ctx.worker().value + 1) % m_workers);
    for (std::size_t i = 1; i < m_seen->size(); ++i) {
      auto* child = ctx.make_task<sender_task>(*m_seen, i, m_workers);
      child->annotate(worker_id{next});
      ctx.spawn(child);     // joins this task's group
      pause_a_little(200);  // the receiver runs out of work and flushes between children
    }
    (*m_seen)[0] = 1;  // the last write of the group: wait() must see it
    return nullptr;
  }

 private:
  std::vector<unsigned char>* m_seen;
  std::size_t m_index;
  unsigned m_workers;
};

TEST_P(group_test, a_group_completes_after_its_task_that_sent_children_to_other_workers) {
  auto& r = start();
  const std::size_t n = scaled(2000, 300);
  for (int round = 0; round < 5; ++round) {
    const std::size_t missing = unmarked_after_wait(r, n, [&](std::vector<unsigned char>& seen) {
      return r.make_task<sender_task>(seen, 0, worker_count());
    });
    ASSERT_EQ(missing, 0u) << "round " << round;
  }
}

/// Parallel sum over [lo, hi): splits into an inner group of two halves and adds them in a
/// continuation registered with when_done. Results travel in plain memory: the continuation must
/// see what the inner group's tasks wrote.
class sum_task final : public counted_task {
 public:
  sum_task(std::uint64_t lo, std::uint64_t hi, std::uint64_t* out) noexcept
      : m_lo(lo), m_hi(hi), m_out(out) {}
  task* execute(context& ctx) override;

 private:
  std::uint64_t m_lo, m_hi;
  std::uint64_t* m_out;
};

class add_task final : public counted_task {
 public:
  add_task(std::uint64_t* out, std::latch* done) noexcept : m_out(out), m_done(done) {}
  std::uint64_t parts[2] = {0, 0};
  task* execute(context&) override {
    *m_out = parts[0] + parts[1];
    if (m_done != nullptr) m_done->count_down();
    return nullptr;
  }

 private:
  std::uint64_t* m_out;
  std::latch* m_done;
};

task* sum_task::execute(context& ctx) {
  if (m_hi - m_lo <= 4) {
    std::uint64_t s = 0;
    for (auto i = m_lo; i < m_hi; ++i) s += i;
    *m_out = s;
    return nullptr;
  }
  auto* add = ctx.make_task<add_task>(m_out, nullptr);
  const group inner = ctx.runtime().make_group();
  const auto mid = m_lo + (m_hi - m_lo) / 2;
  ctx.spawn(&ctx.make_task<sum_task>(m_lo, mid, &add->parts[0])->annotate(inner));
  ctx.spawn(&ctx.make_task<sum_task>(mid, m_hi, &add->parts[1])->annotate(inner));
  ctx.when_done(inner, add);
  return nullptr;
}

TEST_P(group_test, when_done_runs_the_continuation_after_the_inner_group) {
  auto& r = start();
  const std::uint64_t n = scaled(20000, 2000);
  std::uint64_t result = 0;
  std::latch done(1);
  // The root's continuation counts the latch down; the inner levels use wait_idle coverage.
  r.spawn([&, tok = live_token{}](context& ctx) {
    auto* add = ctx.make_task<add_task>(&result, &done);
    const group inner = ctx.runtime().make_group();
    ctx.spawn(&ctx.make_task<sum_task>(0, n / 2, &add->parts[0])->annotate(inner));
    ctx.spawn(&ctx.make_task<sum_task>(n / 2, n, &add->parts[1])->annotate(inner));
    ctx.when_done(inner, add);
  });
  done.wait();
  r.wait_idle();
  EXPECT_EQ(result, n * (n - 1) / 2);
}

// The lambda forms a task writes without reaching for the runtime: context::make_task_from and
// when_done with a callable.
TEST_P(group_test, when_done_takes_a_lambda_and_a_task_makes_tasks_from_lambdas) {
  auto& r = start();
  std::atomic<int> parts{0};
  std::atomic<int> joined{-1};
  const group all = r.make_group();
  r.spawn(
      [&, tok = live_token{}](context& ctx) {
        const group inner = ctx.runtime().make_group();
        for (int i = 0; i < 4; ++i) {
          ctx.spawn(&ctx.make_task_from([&parts, tok2 = live_token{}](context&) {
                       parts.fetch_add(1);
                     })->annotate(inner));
        }
        ctx.when_done(inner, [&, tok3 = live_token{}](context&) { joined.store(parts.load()); });
        // A refused registration frees the callable's task (the fixture counts live tokens).
        EXPECT_THROW(ctx.when_done(inner, [tok4 = live_token{}](context&) {}), std::logic_error);
      },
      all);
  r.wait(all);  // the continuation joined `all`
  EXPECT_EQ(joined.load(), 4);
}

TEST_P(group_test, wait_idle_covers_continuations_not_yet_spawned) {
  auto& r = start();
  const int rounds = static_cast<int>(scaled(200, 30));
  for (int round = 0; round < rounds; ++round) {
    std::uint64_t result = 0;
    auto* root = r.make_task<sum_task>(0, 256, &result);
    r.spawn(root);
    // While the inner groups run, a continuation waits unspawned; the last task of the group is
    // still running until it is spawned, so the runtime never looks idle in between.
    r.wait_idle();
    ASSERT_EQ(result, 256u * 255u / 2u) << "round " << round;
  }
}

TEST_P(group_test, when_done_on_an_empty_group_spawns_the_continuation) {
  auto& r = start();
  std::atomic<int> ran{0};
  std::latch done(1);
  r.spawn([&, tok = live_token{}](context& ctx) {
    const group inner = ctx.runtime().make_group();
    ctx.when_done(inner, make_fn(ctx, [&, tok2 = live_token{}](context&) {
                    ran.fetch_add(1);
                    done.count_down();
                  }));
  });
  done.wait();
  r.wait_idle();
  EXPECT_EQ(ran.load(), 1);
}

TEST_P(group_test, when_done_on_a_group_waited_for_already_throws_and_changes_nothing) {
  // The second when_done throws before it touches anything: the continuation stays the task's
  // (it discards it), and the outer group's count is exact, so wait(outer) returns. Had the
  // continuation joined the outer group before the check, wait(outer) would never return.
  auto& r = start();
  std::atomic<int> first_ran{0};
  std::atomic<int> threw{0};
  for (const bool catch_it : {true, false}) {
    const group outer = r.make_group();
    r.spawn(
        [&, catch_it, tok = live_token{}](context& ctx) {
          const group inner = ctx.runtime().make_group();
          auto* child = make_fn(ctx, [tok2 = live_token{}](context&) {});
          child->annotate(inner);
          ctx.spawn(child);  // inner stays open until the child runs
          ctx.when_done(inner, make_fn(ctx, [&, tok2 = live_token{}](context&) {
                          first_ran.fetch_add(1);
                        }));
          auto* second = make_fn(ctx, [tok2 = live_token{}](context&) {});
          if (!catch_it) {
            // The error goes to the outer group's waiter; second is discarded first.
            try {
              ctx.when_done(inner, second);
            } catch (...) {
              ctx.runtime().discard(second);
              throw;
            }
          }
          try {
            ctx.when_done(inner, second);
          } catch (const std::logic_error&) {
            threw.fetch_add(1);
            ctx.runtime().discard(second);
          }
        },
        outer);
    if (catch_it) {
      r.wait(outer);
    } else {
      EXPECT_THROW(r.wait(outer), std::logic_error);
    }
  }
  r.wait_idle();
  EXPECT_EQ(first_ran.load(), 2);
  EXPECT_EQ(threw.load(), 1);
}

TEST_P(group_test, a_long_task_of_another_group_does_not_hold_up_a_finished_group) {
  // One worker: g's only task, then a long task without a group, queued behind it. g's
  // completion is batched on the worker; the batch goes out before the long task runs, so
  // wait(g) returns while it still runs.
  // The long task ends when released or after 20 s (a fail-safe; the test checks an order of
  // events, not a time).
  auto& r = start(runtime_options{.workers = 1});
  const group g = r.make_group();
  std::atomic<bool> release{false};
  std::atomic<bool> long_done{false};
  std::atomic<bool> long_started{false};
  r.spawn([tok = live_token{}](context&) {}, g);
  r.spawn([&, tok = live_token{}](context&) {
    long_started.store(true);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!release.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    long_done.store(true);
  });
  r.wait(g);
  EXPECT_FALSE(long_done.load()) << "wait(g) returned only after the unrelated long task";
  release.store(true);
  r.wait_idle();
  EXPECT_TRUE(long_started.load());
}

/// g's only task hands a long task of group h to the runtime, spawned or returned as its
/// follow-up, and returns. g's completion is batched on the (only) worker and the long task is the
/// worker's next; the batch must go out before it runs. On the work-first stack, whose tasks run
/// with no group check, the long task would run first and wait(g) would wait for it.
/// Fail-safe and order of events as in the test above.
void expect_a_long_task_of_another_group_not_to_hold_up(runtime& r, bool as_follow_up) {
  const group g = r.make_group();
  const group h = r.make_group();
  std::atomic<bool> release{false};
  std::atomic<bool> long_done{false};
  r.spawn(
      [&, h, as_follow_up, tok = live_token{}](context& ctx) -> task* {
        auto* t = make_fn(ctx, [&, tok2 = live_token{}](context&) {
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
          while (!release.load() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::yield();
          }
          long_done.store(true);
        });
        t->annotate(h);
        if (as_follow_up) return t;
        ctx.spawn(t);
        return nullptr;
      },
      g);
  r.wait(g);
  EXPECT_FALSE(long_done.load()) << "wait(g) returned only after h's long "
                                 << (as_follow_up ? "follow-up" : "task");
  release.store(true);
  r.wait(h);
  EXPECT_TRUE(long_done.load());
}

TEST_P(group_test, a_long_task_spawned_into_another_group_does_not_hold_up_the_spawners_group) {
  expect_a_long_task_of_another_group_not_to_hold_up(start(runtime_options{.workers = 1}), false);
}

TEST_P(group_test, a_long_follow_up_in_another_group_does_not_hold_up_its_predecessors_group) {
  expect_a_long_task_of_another_group_not_to_hold_up(start(runtime_options{.workers = 1}), true);
}

/// The other direction: g's task X spawns a long task C of g (the work-first stack) and returns
/// a short follow-up F of group h. Were F held on the stack above C, F's completion would open
/// h's batch on the (only) worker, C would run next with no group check, and wait(h) would wait
/// for C. So F runs after C, or if before it, h's batch goes out before C runs.
/// C waits (20 s at most) only if F ran before it, so neither order can hang the test.
TEST_P(group_test, a_long_task_below_a_follow_up_of_another_group_does_not_hold_up_that_group) {
  auto& r = start(runtime_options{.workers = 1});
  const group g = r.make_group();
  const group h = r.make_group();
  std::atomic<bool> f_ran{false};
  std::atomic<bool> f_ran_before_c{false};
  std::atomic<bool> release{false};
  std::atomic<bool> c_started{false};
  std::atomic<bool> c_done{false};
  r.spawn(
      [&, h, tok = live_token{}](context& ctx) -> task* {
        ctx.spawn(make_fn(ctx, [&, tok2 = live_token{}](context&) {  // C, of g
          c_started.store(true);
          if (f_ran.load()) {
            f_ran_before_c.store(true);
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
            while (!release.load() && std::chrono::steady_clock::now() < deadline) {
              std::this_thread::yield();
            }
          }
          c_done.store(true);
        }));
        auto* f = make_fn(ctx, [&, tok3 = live_token{}](context&) { f_ran.store(true); });
        f->annotate(h);
        return f;
      },
      g);
  // F joins h when X returns; either C or F runs after that
  while (!c_started.load() && !f_ran.load()) std::this_thread::yield();
  r.wait(h);
  EXPECT_TRUE(f_ran.load());
  if (f_ran_before_c.load()) {
    EXPECT_FALSE(c_done.load()) << "wait(h) returned only after a long task of g that ran after h's "
                                   "last task";
  }
  release.store(true);
  r.wait(g);
  EXPECT_TRUE(c_done.load());
}

TEST_P(group_test, many_groups_reused_handles_never_repeat) {
  auto& r = start();
  const int rounds = static_cast<int>(scaled(5000, 500));
  std::set<std::pair<std::uint32_t, std::uint32_t>> handles;
  std::atomic<int> ran{0};
  for (int i = 0; i < rounds; ++i) {
    const group g = r.make_group();
    ASSERT_TRUE(g.valid());
    // A new group is never equal to a closed one: slots are reused with a new generation.
    ASSERT_TRUE(handles.emplace(g.index, g.generation).second)
        << "round " << i << ": handle {" << g.index << ", " << g.generation << "} repeated";
    for (int k = 0; k < 3; ++k) {
      r.spawn([&ran, tok = live_token{}](context&) { ran.fetch_add(1); }, g);
    }
    r.wait(g);
    ASSERT_EQ(ran.load(), 3 * (i + 1));
  }
}

TEST_P(group_test, many_groups_open_at_once_from_several_threads) {
  auto& r = start();
  constexpr int threads = 3;
  const int rounds = static_cast<int>(scaled(1000, 100));
  std::atomic<int> bad{0};
  std::vector<std::thread> waiters;
  for (int t = 0; t < threads; ++t) {
    waiters.emplace_back([&] {
      for (int i = 0; i < rounds; ++i) {
        std::vector<group> open;
        std::vector<std::atomic<int>> counts(4);
        for (int k = 0; k < 4; ++k) open.push_back(r.make_group());
        for (int k = 0; k < 4; ++k) {
          for (int j = 0; j <= k; ++j) {
            r.spawn([&counts, k, tok = live_token{}](context&) { counts[k].fetch_add(1); },
                    open[k]);
          }
        }
        for (int k = 3; k >= 0; --k) {
          r.wait(open[k]);
          if (counts[k].load() != k + 1) bad.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : waiters) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// A task's first child in its own group that stays on the task's worker carries the task's count
// instead of a count of its own (worker::take_token). The group must still stay open until the task
// returns, wherever the child goes: untargeted (the work-first stack), targeted at this worker, or
// at another one (counted as before: it may run and complete while its parent still runs).
TEST_P(group_test, a_group_stays_open_while_its_task_runs_on_after_spawning) {
  auto& r = start();
  const unsigned n = r.workers();
  for (int placement = 0; placement < 3; ++placement) {
    for (int round = 0; round < 3; ++round) {
      std::atomic<bool> parent_returned{false};
      std::atomic<int> children{0};
      const group g = r.make_group();
      r.spawn(
          [&, placement, n](context& ctx) {
            auto* child = make_fn(ctx, [&children](context&) { children.fetch_add(1); });
            const unsigned self = ctx.worker().value;
            if (placement == 1) child->annotate(wid(self));
            if (placement == 2) child->annotate(wid((self + 1) % n));
            ctx.spawn(child);
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            parent_returned.store(true);
          },
          g);
      r.wait(g);
      EXPECT_TRUE(parent_returned.load()) << "placement " << placement << ", round " << round;
      EXPECT_EQ(children.load(), 1);
    }
  }
}

// A task that spawns a child and then returns itself hands its count to the child first and takes
// a fresh one for the follow-up (worker::reacquire_token): every execution and every child is
// waited for, once, and the statistics count each spawn and execution exactly.
TEST_P(group_test, a_task_that_spawns_and_returns_itself_is_counted_exactly) {
  auto& r = start();
  struct looper final : counted_task {
    looper(int n, std::atomic<int>& r, std::atomic<int>& k) noexcept
        : left(n), runs(&r), kids(&k) {}
    int left;
    std::atomic<int>* runs;
    std::atomic<int>* kids;
    task* execute(context& ctx) override {
      runs->fetch_add(1);
      ctx.spawn([k = kids](context&) { k->fetch_add(1); });
      return --left > 0 ? this : nullptr;
    }
  };
  const int n = static_cast<int>(scaled(2000, 300));
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> runs{0};
    std::atomic<int> kids{0};
    const auto before = r.statistics().total();
    const group g = r.make_group();
    r.spawn(r.make_task<looper>(n, runs, kids), g);
    r.wait(g);
    EXPECT_EQ(runs.load(), n);
    EXPECT_EQ(kids.load(), n);
    r.wait_idle();
    const auto after = r.statistics().total();
    EXPECT_EQ(after.executed - before.executed, std::uint64_t(2 * n)) << "n runs and n children";
    EXPECT_EQ(
        after.spawned_local + after.spawned_remote - before.spawned_local - before.spawned_remote,
        std::uint64_t(2 * n - 1))
        << "n children and n - 1 follow-ups";
  }
}

TEST_P(group_test, wait_idle_waits_for_all_ungrouped_work) {
  auto& r = start();
  r.wait_idle();  // idle runtime: returns at once
  for (int round = 0; round < 5; ++round) {
    std::atomic<std::uint64_t> nodes{0};
    const unsigned depth = under_sanitizer ? 9 : 12;
    struct fan final : counted_task {
      fan(unsigned d, std::atomic<std::uint64_t>& c) noexcept : depth(d), count(&c) {}
      unsigned depth;
      std::atomic<std::uint64_t>* count;
      task* execute(context& ctx) override {
        count->fetch_add(1, std::memory_order_relaxed);
        if (depth > 0) {
          ctx.spawn(ctx.make_task<fan>(depth - 1, *count));
          ctx.spawn(ctx.make_task<fan>(depth - 1, *count));
        }
        return nullptr;
      }
    };
    r.spawn(r.make_task<fan>(depth, nodes));
    r.wait_idle();
    ASSERT_EQ(nodes.load(), (std::uint64_t{1} << (depth + 1)) - 1) << "round " << round;
  }
  r.wait_idle();
}

#if defined(TESSERA_DEBUG_CHECKS)
/// A second wait on g (a misuse) that passed its first check of g just before the first wait
/// completed and released g, while a new group took g's slot: it must not close, or wait for,
/// the new group. Held between its check and the group's mutex by a test hook. Without a second
/// check of the generation under the mutex it would take the new group's open reference.
TEST(group_stale_handle, a_second_wait_racing_the_first_never_acts_on_the_group_reusing_the_slot) {
  static std::atomic<int> phase{0};
  phase.store(0);
  runtime r({.workers = 1});
  const group g = r.make_group();
  r.spawn([](context&) {}, g);
  detail::test_hooks::group_wait_checked.store(+[] {
    int expected = 0;
    if (phase.compare_exchange_strong(expected, 1)) {  // the second wait only
      while (phase.load() != 2) std::this_thread::yield();
    }
  });
  std::atomic<int> second{0};  // 1: returned, 2: threw logic_error
  std::thread waiter([&] {
    try {
      r.wait(g);
      second.store(1);
    } catch (const std::logic_error&) {
      second.store(2);
    }
  });
  while (phase.load() != 1) std::this_thread::yield();
  r.wait(g);  // the first wait: completes and releases g
  const group reused = r.make_group();
  EXPECT_EQ(reused.index, g.index) << "the slot was not reused; the race is not exercised";
  phase.store(2);
  waiter.join();
  detail::test_hooks::group_wait_checked.store(nullptr);
  EXPECT_EQ(second.load(), 2) << "the second wait did not see that g was gone";
  std::atomic<bool> ran{false};
  r.spawn([&ran](context&) { ran.store(true); }, reused);
  r.wait(reused);  // its own, one wait: neither closed nor completed by the stale wait
  EXPECT_TRUE(ran.load());
}
#endif

/// Runs `body` in a forked child (a death test) and tells how it ended.
/// A stale handle must be *detected*: the call may return, throw, or stop the process with an
/// assertion (SIGABRT), but it must not act on the group that reuses the slot.
constexpr int stale_returned = 10;
constexpr int stale_threw_logic_error = 11;
constexpr int stale_threw_other = 12;
constexpr int new_group_broken = 20;

bool stale_handle_detected(int status) {
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    return code == stale_returned || code == stale_threw_logic_error || code == stale_threw_other;
  }
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

[[noreturn]] void stale_wait_scenario(unsigned workers) {
  ::alarm(20);  // a stale wait that aliases the new group would block forever: SIGALRM
  runtime r({.workers = workers});
  const group old_group = r.make_group();
  r.spawn([](context&) {}, old_group);
  r.wait(old_group);  // closes old_group
  // Groups opened after the wait may reuse old_group's slot; hold one of them with a gate.
  std::vector<group> fresh;
  for (int i = 0; i < 8; ++i) fresh.push_back(r.make_group());
  gate held;
  std::atomic<bool> fresh_task_done{false};
  for (const group g : fresh) {
    r.spawn(
        [&](context&) {
          held.pass();
          fresh_task_done.store(true);
        },
        g);
  }
  int code = stale_returned;
  try {
    r.wait(old_group);  // stale: must not wait for (or close) a fresh group
  } catch (const std::logic_error&) {
    code = stale_threw_logic_error;
  } catch (...) {
    code = stale_threw_other;
  }
  held.release();
  for (const group g : fresh) {
    try {
      r.wait(g);  // the fresh groups still work: wait blocks until their task ran
    } catch (...) {
      std::_Exit(new_group_broken);
    }
  }
  if (!fresh_task_done.load()) std::_Exit(new_group_broken);
  r.stop();
  std::_Exit(code);
}

TEST(group_stale_handle_death_test, waiting_twice_is_detected_not_aliased) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (unsigned workers : {1u, 2u}) {
    EXPECT_EXIT(stale_wait_scenario(workers), stale_handle_detected, "")
        << "with " << workers << " workers";
  }
}

TESSERA_INSTANTIATE_WORKER_COUNTS(group_test);

}  // namespace
}  // namespace tessera::test
