// Priorities: a lower priority runs only when no task of a higher one is ready on the worker that
// picks the next task (ids.h). The tests hold workers at a gate, queue interleaved priorities
// behind it, release it, and check the order each worker ran them in.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace tessera::test {
namespace {

/// What each worker ran, in order: the priorities, and whether the task ran where it was sent.
class order_log {
 public:
  explicit order_log(unsigned workers) : m_seq(workers) {}

  void record(unsigned worker, priority p, bool on_target) {
    std::lock_guard lock(m_mutex);
    m_seq.at(worker).push_back(static_cast<int>(p));
    if (!on_target) ++m_misplaced;
  }

  /// Empty if on every worker no task ran after a task of a lower priority.
  std::string violations() const {
    std::lock_guard lock(m_mutex);
    std::string out;
    for (std::size_t w = 0; w < m_seq.size(); ++w) {
      const auto& s = m_seq[w];
      for (std::size_t i = 1; i < s.size(); ++i) {
        if (s[i] < s[i - 1]) {
          out += "worker " + std::to_string(w) + ": priority " + std::to_string(s[i]) +
                 " ran at position " + std::to_string(i) + " after priority " +
                 std::to_string(s[i - 1]) + " (0 high, 1 normal, 2 low); ";
          break;
        }
      }
    }
    if (m_misplaced != 0) out += std::to_string(m_misplaced) + " tasks ran off their target";
    return out;
  }

  std::size_t total() const {
    std::lock_guard lock(m_mutex);
    std::size_t n = 0;
    for (const auto& s : m_seq) n += s.size();
    return n;
  }

 private:
  mutable std::mutex m_mutex;
  std::vector<std::vector<int>> m_seq;
  std::size_t m_misplaced = 0;
};

class prio_task final : public counted_task {
 public:
  prio_task(order_log& log, int target) noexcept : m_log(&log), m_target(target) {}
  task* execute(context& ctx) override {
    const bool on_target = m_target < 0 || ctx.worker().value == m_target;
    m_log->record(ctx.worker().value, priority(), on_target);
    return nullptr;
  }

 private:
  order_log* m_log;
  int m_target;
};

constexpr priority interleaved[] = {priority::low,    priority::normal, priority::high,
                                    priority::normal, priority::low,    priority::high};

TEST(priority, one_worker_runs_high_then_normal_then_low_spawned_from_outside) {
  ASSERT_EQ(live_objects.load(), 0);
  {
    runtime r({.workers = 1});
    order_log log(1);
    gate g;
    r.spawn(r.make_task<gate_task>(g));
    g.wait_for_arrivals(1);  // the worker is busy: everything below queues behind the gate
    // Enough tasks that a worker cannot take them all in one batch from its inboxes.
    const int rounds = static_cast<int>(scaled(500, 200));
    for (int i = 0; i < rounds; ++i) {
      for (priority p : interleaved) {
        auto* t = r.make_task<prio_task>(log, -1);
        t->annotate(p);
        r.spawn(t);
      }
    }
    g.release();
    r.wait_idle();
    EXPECT_EQ(log.total(), rounds * std::size(interleaved));
    EXPECT_EQ(log.violations(), "");
  }
  EXPECT_EQ(live_objects.load(), 0);
}

TEST(priority, one_worker_runs_high_then_normal_then_low_spawned_from_inside) {
  ASSERT_EQ(live_objects.load(), 0);
  {
    runtime r({.workers = 1});
    order_log log(1);
    constexpr int rounds = 50;
    r.spawn([&log, tok = live_token{}](context& ctx) {
      // Everything is ready before this task returns, so the worker picks by priority only.
      for (int i = 0; i < rounds; ++i) {
        for (priority p : interleaved) {
          auto* t = ctx.make_task<prio_task>(log, -1);
          t->annotate(p);
          ctx.spawn(t);
        }
      }
    });
    r.wait_idle();
    EXPECT_EQ(log.total(), rounds * std::size(interleaved));
    EXPECT_EQ(log.violations(), "");
  }
  EXPECT_EQ(live_objects.load(), 0);
}

/// A chain of spawns that would run on for seconds: each task spawns its successor, which the
/// work-first stack runs next. An urgent task spawned from outside lands in the worker's inbox,
/// which the worker drains only between tasks (periodic(), on the mail the push posts); it must
/// then run before the next step of the chain, and the chain must see it long before its end.
class endless_step final : public task {
 public:
  endless_step(std::atomic<bool>& started, std::atomic<bool>& stop, std::uint64_t left,
               std::uint64_t& steps)
      : m_started(&started), m_stop(&stop), m_left(left), m_steps(&steps) {}
  task* execute(context& ctx) override {
    ++*m_steps;
    m_started->store(true, std::memory_order_release);
    if (m_left > 0 && !m_stop->load(std::memory_order_acquire)) {
      ctx.spawn(ctx.make_task<endless_step>(*m_started, *m_stop, m_left - 1, *m_steps));
    }
    return nullptr;
  }

 private:
  std::atomic<bool>* m_started;
  std::atomic<bool>* m_stop;
  std::uint64_t m_left;
  std::uint64_t* m_steps;
};

/// A high-priority task that entered the prefetch window behind a normal one runs within the
/// window's few tasks, not after a run of follow-ups that the normal one returns (each could be
/// held 64 times if the window's tasks were not counted as queued).
constexpr int high_priority_mark = -1;

class self_returning final : public task {
 public:
  self_returning(int id, std::vector<int>& log, std::mutex& m)
      : m_id(id), m_log(&log), m_mutex(&m) {}
  task* execute(context& ctx) override {
    {
      std::lock_guard lock(*m_mutex);
      m_log->push_back(m_id);
    }
    if (m_id == 1 && m_runs == 0) {
      auto* high = make_fn(ctx, [log = m_log, m = m_mutex, tok = live_token{}](context&) {
        std::lock_guard lock(*m);
        log->push_back(high_priority_mark);
      });
      high->annotate(priority::high);
      ctx.spawn(high);
    }
    if (m_id == 2 && ++m_runs < 200) {
      clear_annotations();  // again, without data: a held follow-up
      return this;
    }
    ++m_runs;
    return nullptr;
  }

 private:
  int m_id;
  int m_runs = 0;
  std::vector<int>* m_log;
  std::mutex* m_mutex;
};

TEST(priority, a_high_priority_task_in_the_prefetch_window_is_not_overtaken_by_held_follow_ups) {
  static char objects[4][64];
  std::vector<int> log;  // the ids of the tasks as they ran, and the mark for the urgent one
  std::mutex m;
  {
    runtime r({.workers = 1, .prefetch_distance = 2});
    const group g = r.make_group();
    r.spawn(
        [&](context& ctx) {
          for (int i = 1; i <= 3; ++i) {
            auto* n = ctx.make_task<self_returning>(i, log, m);
            n->annotate_data(objects[i], sizeof objects[i]);
            ctx.spawn(n);
          }
        },
        g);
    r.wait(g);
  }
  std::lock_guard lock(m);
  const auto spawned = std::find(log.begin(), log.end(), 1);
  const auto high = std::find(log.begin(), log.end(), high_priority_mark);
  ASSERT_NE(high, log.end());
  ASSERT_NE(spawned, log.end());
  // Ahead of it at most the window's tasks (distance + 1) and the task that spawned it.
  EXPECT_LE(high - spawned, 4) << "tasks that ran between the spawn of the high-priority task "
                                  "and its run: "
                               << (high - spawned - 1);
}

TEST(priority, an_urgent_task_from_outside_interrupts_a_chain_on_its_only_worker) {
  runtime r({.workers = 1});
  std::atomic<bool> started{false};
  std::atomic<bool> stop{false};
  std::uint64_t steps = 0;                     // written by the chain only, read after the wait
  constexpr std::uint64_t limit = 20'000'000;  // about a second: reached only when it fails
  const group g = r.make_group();
  r.spawn(r.make_task<endless_step>(started, stop, limit, steps), g);
  while (!started.load(std::memory_order_acquire)) std::this_thread::yield();
  auto* urgent =
      r.make_task_from([&stop](context&) { stop.store(true, std::memory_order_release); });
  urgent->annotate(priority::high);
  r.spawn(urgent);
  r.wait(g);
  EXPECT_TRUE(stop.load()) << "the chain ran to its end without the urgent task";
  EXPECT_LT(steps, limit);
}

class priority_test : public runtime_fixture {};

TEST_P(priority_test, each_worker_orders_its_targeted_tasks_by_priority) {
  auto& r = start();
  const unsigned n = r.workers();
  order_log log(n);
  gate g;
  for (unsigned w = 0; w < n; ++w) {
    auto* t = r.make_task<gate_task>(g);
    t->annotate(wid(w));
    r.spawn(t);
  }
  g.wait_for_arrivals(n);  // every worker is held: no stealing, nothing runs early
  const int rounds = static_cast<int>(scaled(40, 10));
  for (int i = 0; i < rounds; ++i) {
    for (priority p : interleaved) {
      for (unsigned w = 0; w < n; ++w) {
        auto* t = r.make_task<prio_task>(log, static_cast<int>(w));
        t->annotate(p).annotate(wid(w));
        r.spawn(t);
      }
    }
  }
  g.release();
  r.wait_idle();
  EXPECT_EQ(log.total(), rounds * std::size(interleaved) * n);
  EXPECT_EQ(log.violations(), "");
}

TEST_P(priority_test, local_spawns_on_each_worker_run_by_priority) {
  auto& r = start();
  const unsigned n = r.workers();
  order_log log(n);
  const int rounds = static_cast<int>(scaled(40, 10));
  const group grp = r.make_group();
  for (unsigned w = 0; w < n; ++w) {
    auto* spawner = make_fn(r, [&log, w, tok = live_token{}](context& ctx) {
      for (int i = 0; i < rounds; ++i) {
        for (priority p : interleaved) {
          auto* t = ctx.make_task<prio_task>(log, static_cast<int>(w));
          t->annotate(p).annotate(wid(w));
          ctx.spawn(t);
        }
      }
    });
    spawner->annotate(wid(w));
    r.spawn(spawner, grp);
  }
  r.wait(grp);
  EXPECT_EQ(log.total(), rounds * std::size(interleaved) * n);
  EXPECT_EQ(log.violations(), "");
}

TEST_P(priority_test, annotations_read_back) {
  auto& r = start();
  gate unused;
  auto* t = r.make_task<gate_task>(unused);
  EXPECT_EQ(t->priority(), priority::normal) << "default priority";
  t->annotate(priority::high);
  EXPECT_EQ(t->priority(), priority::high);
  t->annotate(priority::low).annotate(wid(0));
  EXPECT_EQ(t->priority(), priority::low);
  const group g = r.make_group();
  t->annotate(g);
  EXPECT_EQ(t->task_group(), g);
  t->clear_annotations();
  EXPECT_EQ(t->priority(), priority::low) << "clear_annotations keeps the priority";
  EXPECT_EQ(t->task_group(), g) << "clear_annotations keeps the group";
  EXPECT_EQ(t->data(), nullptr);
  r.discard(t);
  r.wait(g);  // the group never got a task: wait returns at once
}

TESSERA_INSTANTIATE_WORKER_COUNTS(priority_test);

}  // namespace
}  // namespace tessera::test
