// Spawning from outside and inside the runtime, and placement by worker and NUMA-node targets.
#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "test_support.h"

namespace tessera::test {
namespace {

class spawn_test : public runtime_fixture {};

// A context is valid only inside execute: it cannot be copied out of it.
static_assert(!std::is_copy_constructible_v<context> && !std::is_copy_assignable_v<context>);

TEST_P(spawn_test, from_outside_every_task_runs_once) {
  auto& r = start();
  const std::size_t n = scaled(20000, 2000);
  run_counts counts(n);
  const group g = r.make_group();
  ASSERT_TRUE(g.valid());
  for (std::size_t i = 0; i < n; ++i) {
    r.spawn([&counts, i, t = live_token{}](context&) { counts.hit(i); }, g);
  }
  r.wait(g);
  EXPECT_EQ(counts.exactly_once(), "");
}

TEST_P(spawn_test, from_several_outside_threads_concurrently) {
  auto& r = start();
  const std::size_t per_thread = scaled(5000, 500);
  constexpr std::size_t threads = 4;
  run_counts counts(per_thread * threads);
  std::vector<std::thread> producers;
  for (std::size_t p = 0; p < threads; ++p) {
    producers.emplace_back([&, p] {
      for (std::size_t i = 0; i < per_thread; ++i) {
        const std::size_t id = p * per_thread + i;
        r.spawn([&counts, id, t = live_token{}](context&) { counts.hit(id); });
      }
    });
  }
  for (auto& t : producers) t.join();
  r.wait_idle();
  EXPECT_EQ(counts.exactly_once(), "");
}

/// A binary fan-out: each node spawns two children with context::spawn until `depth` is 0.
class tree_task final : public counted_task {
 public:
  tree_task(unsigned depth, std::atomic<std::uint64_t>& nodes) noexcept
      : m_depth(depth), m_nodes(&nodes) {}
  task* execute(context& ctx) override {
    m_nodes->fetch_add(1, std::memory_order_relaxed);
    if (m_depth > 0) {
      ctx.spawn(ctx.make_task<tree_task>(m_depth - 1, *m_nodes));
      ctx.spawn(ctx.make_task<tree_task>(m_depth - 1, *m_nodes));
    }
    return nullptr;
  }

 private:
  unsigned m_depth;
  std::atomic<std::uint64_t>* m_nodes;
};

TEST(spawn_order, fresh_spawns_without_data_run_newest_first_and_annotated_ones_oldest_first) {
  // One worker: the parent spawns plain tasks 0..4 and data-annotated tasks 5..9 interleaved.
  // Plain ones run newest first (from the work-first stack), before the annotated ones, which
  // run in spawn order.
  tessera::runtime r({.workers = 1});
  std::vector<int> order;  // one worker: no concurrent access
  static int data[10];
  r.spawn([&order](context& ctx) {
    for (int i = 0; i < 5; ++i) {
      ctx.spawn([&order, i](context&) { order.push_back(i); });
      auto* a = make_fn(ctx, [&order, i](context&) { order.push_back(5 + i); });
      a->annotate_data(&data[5 + i], sizeof(int));
      ctx.spawn(a);
    }
  });
  r.wait_idle();
  EXPECT_EQ(order, (std::vector<int>{4, 3, 2, 1, 0, 5, 6, 7, 8, 9}));
}

TEST(spawn_order, many_fresh_spawns_from_one_task_run_newest_first) {
  // One worker, one parent spawning 1000 plain tasks onto the work-first stack: they run newest
  // first.
  tessera::runtime r({.workers = 1});
  constexpr int n = 1000;
  std::vector<int> order;  // one worker: no concurrent access
  r.spawn([&order](context& ctx) {
    for (int i = 0; i < n; ++i) ctx.spawn([&order, i](context&) { order.push_back(i); });
  });
  r.wait_idle();
  std::vector<int> expected(n);
  for (int i = 0; i < n; ++i) expected[static_cast<std::size_t>(i)] = n - 1 - i;
  EXPECT_EQ(order, expected);
}

TEST(spawn_order, a_more_urgent_spawn_runs_before_the_stacked_ones_and_a_less_urgent_one_after) {
  // Normal-priority fresh spawns wait on the work-first stack; a high-priority one spawned
  // among them runs first, a low-priority one last, and the normal ones newest first between.
  tessera::runtime r({.workers = 1});
  std::vector<int> order;  // one worker: no concurrent access
  r.spawn([&order](context& ctx) {
    for (int i = 0; i < 20; ++i) {
      if (i == 5) {
        auto* low = make_fn(ctx, [&order](context&) { order.push_back(-2); });
        low->annotate(priority::low);
        ctx.spawn(low);
      }
      if (i == 10) {
        auto* high = make_fn(ctx, [&order](context&) { order.push_back(-1); });
        high->annotate(priority::high);
        ctx.spawn(high);
      }
      ctx.spawn([&order, i](context&) { order.push_back(i); });
    }
  });
  r.wait_idle();
  std::vector<int> expected{-1};
  for (int i = 19; i >= 0; --i) expected.push_back(i);
  expected.push_back(-2);
  EXPECT_EQ(order, expected);
}

TEST(spawn_order, a_span_spawn_queues_like_single_spawns) {
  // One worker: spawn(span) of plain and data-annotated tasks interleaved, and a low- and a
  // high-priority annotated one, orders them as single spawns would: the high one first, the
  // plain ones newest first, the normal annotated ones in span order, the low one last.
  tessera::runtime r({.workers = 1});
  std::vector<int> order;  // one worker: no concurrent access
  static int data[12];
  r.spawn([&order](context& ctx) {
    std::vector<task*> ts;
    for (int i = 0; i < 5; ++i) {
      ts.push_back(make_fn(ctx, [&order, i](context&) { order.push_back(i); }));
      auto* a = make_fn(ctx, [&order, i](context&) { order.push_back(5 + i); });
      a->annotate_data(&data[5 + i], sizeof(int));
      ts.push_back(a);
      if (i == 1 || i == 3) {
        const bool high = i == 3;
        auto* p = make_fn(ctx, [&order, high](context&) { order.push_back(high ? -1 : -2); });
        p->annotate_data(&data[high ? 11 : 10], sizeof(int));
        p->annotate(high ? priority::high : priority::low);
        ts.push_back(p);
      }
    }
    ctx.spawn(std::span<task* const>(ts));
    ctx.spawn(std::span<task* const>{});  // nothing
  });
  r.wait_idle();
  EXPECT_EQ(order, (std::vector<int>{-1, 4, 3, 2, 1, 0, 5, 6, 7, 8, 9, -2}));
}

TEST_P(spawn_test, a_span_spawn_runs_every_task_once_in_the_groups_and_places_asked) {
  // Tasks with data on this worker (the chained case), without data, targeted at every worker,
  // and annotated with the parent's group, spawned from inside in spans: each runs once, on its
  // target, and the parent's group waits for it.
  auto& r = start();
  const unsigned workers = r.workers();
  const std::size_t per_parent = scaled(400, 100);
  const std::size_t parents = 8;
  run_counts counts(per_parent * parents);
  std::atomic<std::size_t> misplaced{0};
  std::vector<int> data(per_parent * parents);
  const group g = r.make_group();
  for (std::size_t p = 0; p < parents; ++p) {
    r.spawn(
        [&, p, tok = live_token{}](context& ctx) {
          std::vector<task*> ts;
          for (std::size_t j = 0; j < per_parent; ++j) {
            const std::size_t i = p * per_parent + j;
            if (j % 4 == 2) {
              const auto w = worker_id{static_cast<std::uint16_t>(j % workers)};
              auto* t = make_fn(ctx, [&, i, w, tok2 = live_token{}](context& c) {
                if (c.worker() != w) misplaced.fetch_add(1);
                counts.hit(i);
              });
              t->annotate(w).annotate_data(&data[i], sizeof(int));
              ts.push_back(t);
              continue;
            }
            auto* t = make_fn(ctx, [&, i, tok2 = live_token{}](context&) { counts.hit(i); });
            if (j % 4 != 1) t->annotate_data(&data[i], sizeof(int));
            if (j % 4 == 3) t->annotate(g);
            ts.push_back(t);
            if (ts.size() == 37) {
              ctx.spawn(std::span<task* const>(ts));
              ts.clear();
            }
          }
          ctx.spawn(std::span<task* const>(ts));
        },
        g);
  }
  r.wait(g);
  EXPECT_EQ(counts.exactly_once(), "");
  EXPECT_EQ(misplaced.load(), 0u);
}

#if defined(TESSERA_DEBUG_CHECKS)
TEST(spawn_span_checks, a_task_spawned_already_refuses_the_whole_span) {
  // The second task of the span was spawned before: nothing of the span is spawned, the error
  // reaches the group's waiter, and the first task stays the caller's (discarded here).
  tessera::runtime r({.workers = 1});
  std::atomic<int> runs{0};
  const group g = r.make_group();
  r.spawn(
      [&](context& ctx) {
        auto* fresh = make_fn(ctx, [&](context&) { runs.fetch_add(1); });
        auto* twice = make_fn(ctx, [&](context&) { runs.fetch_add(10); });
        ctx.spawn(twice);
        const std::array<task*, 2> ts{fresh, twice};
        try {
          ctx.spawn(std::span<task* const>(ts));
        } catch (...) {
          ctx.runtime().discard(fresh);
          throw;
        }
      },
      g);
  EXPECT_THROW(r.wait(g), std::logic_error);
  EXPECT_EQ(runs.load(), 10);
}

TEST(spawn_span_checks, a_task_named_twice_in_a_span_is_refused_and_stays_the_callers) {
  tessera::runtime r({.workers = 1});
  std::atomic<int> runs{0};
  const group g = r.make_group();
  r.spawn(
      [&](context& ctx) {
        auto* t = make_fn(ctx, [&](context&) { runs.fetch_add(1); });
        const std::array<task*, 2> ts{t, t};
        try {
          ctx.spawn(std::span<task* const>(ts));
        } catch (...) {
          ctx.spawn(t);  // still the caller's, and spawnable
          throw;
        }
      },
      g);
  EXPECT_THROW(r.wait(g), std::logic_error);
  EXPECT_EQ(runs.load(), 1);
}
#endif

TEST_P(spawn_test, from_inside_children_join_the_parents_group) {
  auto& r = start();
  const unsigned depth = under_sanitizer ? 11 : 14;
  std::atomic<std::uint64_t> nodes{0};
  const group g = r.make_group();
  r.spawn(r.make_task<tree_task>(depth, nodes), g);
  r.wait(g);  // children were spawned without a group annotation: they joined g
  EXPECT_EQ(nodes.load(), (std::uint64_t{1} << (depth + 1)) - 1);
}

TEST_P(spawn_test, lambda_spawned_from_inside_joins_the_parents_group) {
  auto& r = start();
  const std::size_t n = scaled(2000, 300);
  std::vector<int> written(n, 0);  // plain writes: wait() must order them before the reads
  const group g = r.make_group();
  r.spawn(
      [&written, t = live_token{}](context& ctx) {
        for (std::size_t i = 0; i < n; ++i) {
          ctx.spawn([&written, i, t2 = live_token{}](context&) { written[i] = 1; });
        }
      },
      g);
  r.wait(g);
  std::size_t done = 0;
  for (int w : written) done += static_cast<std::size_t>(w);
  EXPECT_EQ(done, n);
}

TEST_P(spawn_test, worker_target_from_outside_runs_on_that_worker) {
  auto& r = start();
  ASSERT_EQ(r.workers(), worker_count());
  const unsigned rounds = static_cast<unsigned>(scaled(200, 20));
  std::atomic<unsigned> wrong{0};
  std::atomic<unsigned> ran{0};
  const group g = r.make_group();
  for (unsigned round = 0; round < rounds; ++round) {
    for (unsigned w = 0; w < r.workers(); ++w) {
      auto* t = make_fn(r, [&, w, tok = live_token{}](context& ctx) {
        ran.fetch_add(1, std::memory_order_relaxed);
        if (ctx.worker() != wid(w)) wrong.fetch_add(1);
        if (r.current_worker() != std::optional<worker_id>(ctx.worker())) wrong.fetch_add(1);
      });
      t->annotate(wid(w));
      r.spawn(t, g);
    }
  }
  r.wait(g);
  EXPECT_EQ(ran.load(), rounds * r.workers());
  EXPECT_EQ(wrong.load(), 0u);
}

/// Spawns, from whatever worker runs it, one task per worker targeted at that worker.
class scatter_task final : public counted_task {
 public:
  scatter_task(std::atomic<unsigned>& ran, std::atomic<unsigned>& wrong, int target) noexcept
      : m_ran(&ran), m_wrong(&wrong), m_target(target) {}
  task* execute(context& ctx) override {
    if (m_target >= 0) {
      m_ran->fetch_add(1, std::memory_order_relaxed);
      if (ctx.worker().value != m_target) m_wrong->fetch_add(1);
      return nullptr;
    }
    const unsigned n = ctx.runtime().workers();
    for (unsigned w = 0; w < n; ++w) {
      auto* t = ctx.make_task<scatter_task>(*m_ran, *m_wrong, static_cast<int>(w));
      t->annotate(wid(w));
      ctx.spawn(t);
    }
    return nullptr;
  }

 private:
  std::atomic<unsigned>* m_ran;
  std::atomic<unsigned>* m_wrong;
  int m_target;
};

TEST_P(spawn_test, worker_target_from_inside_runs_on_that_worker) {
  auto& r = start();
  const unsigned scatters = static_cast<unsigned>(scaled(200, 20));
  std::atomic<unsigned> ran{0};
  std::atomic<unsigned> wrong{0};
  const group g = r.make_group();
  for (unsigned i = 0; i < scatters; ++i) {
    auto* t = r.make_task<scatter_task>(ran, wrong, -1);
    t->annotate(wid(i % r.workers()));
    r.spawn(t, g);
  }
  r.wait(g);
  EXPECT_EQ(ran.load(), scatters * r.workers());
  EXPECT_EQ(wrong.load(), 0u);
}

TEST_P(spawn_test, numa_node_target_runs_on_a_worker_of_that_node) {
  auto& r = start();
  std::set<std::uint16_t> nodes;
  for (unsigned w = 0; w < r.workers(); ++w) {
    nodes.insert(r.node_of(wid(w)).value);
  }
  ASSERT_FALSE(nodes.empty());
  const unsigned per_node = static_cast<unsigned>(scaled(500, 50));
  std::atomic<unsigned> ran{0};
  std::atomic<unsigned> wrong{0};
  const group g = r.make_group();
  for (const auto node : nodes) {
    for (unsigned i = 0; i < per_node; ++i) {
      auto* t = make_fn(r, [&, node, tok = live_token{}](context& ctx) {
        ran.fetch_add(1, std::memory_order_relaxed);
        if (ctx.node() != numa_node_id(node)) wrong.fetch_add(1);
        if (ctx.runtime().node_of(ctx.worker()) != numa_node_id(node)) wrong.fetch_add(1);
      });
      t->annotate(numa_node_id(node));
      r.spawn(t, g);
    }
  }
  r.wait(g);
  EXPECT_EQ(ran.load(), per_node * nodes.size());
  EXPECT_EQ(wrong.load(), 0u);
}

TEST_P(spawn_test, context_reports_its_worker_and_node) {
  auto& r = start();
  EXPECT_FALSE(r.current_worker().has_value()) << "the test thread is not a worker";
  std::atomic<unsigned> wrong{0};
  const group g = r.make_group();
  for (int i = 0; i < 200; ++i) {
    r.spawn(
        [&, tok = live_token{}](context& ctx) {
          if (ctx.worker().value >= ctx.runtime().workers()) wrong.fetch_add(1);
          if (ctx.node() != ctx.runtime().node_of(ctx.worker())) wrong.fetch_add(1);
          if (&ctx.runtime() != &r) wrong.fetch_add(1);
          if (!ctx.validate()) wrong.fetch_add(1);  // no optimistic resource: always true
        },
        g);
  }
  r.wait(g);
  EXPECT_EQ(wrong.load(), 0u);
}

TEST_P(spawn_test, more_workers_than_cpus_start_and_report_their_cpus) {
  auto& r = start();
  EXPECT_EQ(r.workers(), worker_count());
  for (unsigned w = 0; w < r.workers(); ++w) {
    const unsigned cpu = r.cpu_of(wid(w));
    EXPECT_LT(cpu, 4096u);  // a plausible OS index
  }
  EXPECT_TRUE(r.running());
}

TEST_P(spawn_test, task_returned_by_a_lambda_is_scheduled) {
  auto& r = start();
  std::atomic<int> follow_up_ran{0};
  const group g = r.make_group();
  r.spawn(
      [&, tok = live_token{}](context& ctx) -> task* {
        auto* next =
            make_fn(ctx, [&, tok2 = live_token{}](context&) { follow_up_ran.fetch_add(1); });
        next->annotate(g);
        return next;
      },
      g);
  r.wait(g);
  EXPECT_EQ(follow_up_ran.load(), 1);
}

TEST_P(spawn_test, discard_frees_a_task_that_was_never_spawned) {
  auto& r = start();
  gate never_passed;
  for (int i = 0; i < 100; ++i) {
    auto* t = r.make_task<gate_task>(never_passed);
    r.discard(t);
  }
  EXPECT_EQ(live_objects.load(), 0);
}

/// A task of (about) `Bytes` bytes that spawns `children` tasks of its own size, then returns a
/// follow-up of its own size once (it knows its block's size class only from the runtime).
template <std::size_t Bytes>
class sized_task final : public counted_task {
 public:
  sized_task(std::atomic<int>& ran, int children, bool follow) noexcept
      : m_ran(&ran), m_children(children), m_follow(follow) {
    if constexpr (payload > 0) {
      m_payload.front() = std::byte{1};
      m_payload.back() = std::byte{2};
    }
  }
  task* execute(context& ctx) override {
    if constexpr (payload > 0) {
      EXPECT_EQ(m_payload.front(), std::byte{1});
      EXPECT_EQ(m_payload.back(), std::byte{2});
    }
    m_ran->fetch_add(1);
    for (int i = 0; i < m_children; ++i) ctx.spawn(ctx.make_task<sized_task>(*m_ran, 0, false));
    return m_follow ? ctx.make_task<sized_task>(*m_ran, 0, false) : nullptr;
  }

 private:
  static constexpr std::size_t payload = Bytes - sizeof(counted_task) - 16;
  std::atomic<int>* m_ran;
  int m_children;
  bool m_follow;
  std::array<std::byte, payload> m_payload{};
};
static_assert(sizeof(sized_task<64>) == 64 && sizeof(sized_task<128>) == 128 &&
              sizeof(sized_task<1024>) == 1024 && sizeof(sized_task<4096>) == 4096);

template <std::size_t Bytes>
void run_sized_tasks(runtime& r, std::atomic<int>& ran) {
  const group g = r.make_group();
  for (int i = 0; i < 50; ++i) r.spawn(r.make_task<sized_task<Bytes>>(ran, 3, true), g);
  r.discard(r.make_task<sized_task<Bytes>>(ran, 0, false));
  r.wait(g);
}

// Every kind of block a task can live in (each size class of the task allocator, a task over
// the largest class, and the system allocator) is freed the way it was allocated, from outside,
// from a task and as a follow-up; ASan checks the frees.
TEST_P(spawn_test, tasks_of_every_block_kind_are_freed_where_they_came_from) {
  for (task_allocator kind : {task_allocator::pool, task_allocator::system}) {
    auto& r = start({.allocator = kind});
    std::atomic<int> ran{0};
    run_sized_tasks<64>(r, ran);
    run_sized_tasks<128>(r, ran);
    run_sized_tasks<256>(r, ran);
    run_sized_tasks<512>(r, ran);
    run_sized_tasks<1024>(r, ran);
    run_sized_tasks<4096>(r, ran);
    EXPECT_EQ(ran.load(), 6 * 50 * (1 + 3 + 1));
    r.stop();
    EXPECT_EQ(live_objects.load(), 0);
  }
}

// A task's destructor runs exactly when the task is done: through the destroyer registered for
// its type when it has one (captures that own something), not at all when the type is trivially
// destructible (task's own destructor is not virtual, see detail/task_destroyers.h).
TEST_P(spawn_test, a_task_is_destroyed_once_and_only_types_with_a_destructor_run_one) {
  auto trivial = [](context&) {};
  auto owning = [p = std::make_shared<int>(7)](context&) { EXPECT_EQ(*p, 7); };
  static_assert(std::is_trivially_destructible_v<function_task<decltype(trivial)>>);
  EXPECT_EQ(detail::destroyer_of<function_task<decltype(trivial)>>(), 0);
  static_assert(!std::is_trivially_destructible_v<function_task<decltype(owning)>>);
  EXPECT_NE(detail::destroyer_of<function_task<decltype(owning)>>(), 0);
  EXPECT_NE(detail::destroyer_of<gate_task>(),
            detail::destroyer_of<function_task<decltype(owning)>>())
      << "two task types share a destroyer";

  auto& r = start();
  auto shared = std::make_shared<int>(7);
  const group g = r.make_group();
  for (int i = 0; i < 1000; ++i) {
    // Each task owns a copy of the pointer: the use count drops back only if every task's
    // destructor ran (a destructor run twice would make it drop too far and ASan would object).
    r.spawn(
        [p = shared](context& ctx) {
          EXPECT_EQ(*p, 7);
          ctx.spawn([q = p](context&) { EXPECT_EQ(*q, 7); });  // from a task, into the group
        },
        g);
  }
  r.discard(r.make_task_from([p = shared](context&) {}));
  r.wait(g);
  r.wait_idle();
  EXPECT_EQ(shared.use_count(), 1) << "a finished task's destructor did not run";
}

/// Its destructor spawns a task (runtime::spawn from the worker that destroys it). What execute
/// returns: nothing, a new follow-up (held on the worker's stack, or, with `hop`, placed on the
/// next worker), or itself once.
class spawns_when_destroyed final : public task {
 public:
  enum class ending { done, fresh_follow_up, self_once };
  spawns_when_destroyed(runtime& rt, std::atomic<int>& spawned_ran, ending e, bool hop) noexcept
      : m_rt(&rt), m_ran(&spawned_ran), m_ending(e), m_hop(hop) {}
  ~spawns_when_destroyed() {
    m_rt->spawn([ran = m_ran](context&) { ran->fetch_add(1); });
  }
  task* execute(context& ctx) override {
    switch (m_ending) {
      case ending::done: return nullptr;
      case ending::self_once:
        m_ending = ending::done;
        return this;
      case ending::fresh_follow_up: {
        auto* f = ctx.make_task<spawns_when_destroyed>(*m_rt, *m_ran, ending::done, false);
        if (m_hop) f->annotate(wid((ctx.worker().value + 1) % ctx.runtime().workers()));
        return f;
      }
    }
    return nullptr;
  }

 private:
  runtime* m_rt;
  std::atomic<int>* m_ran;
  ending m_ending;
  bool m_hop;
};

// A destructor that spawns runs while its worker is between tasks, after the task's count was
// settled (its completion counted, or passed to a child or a follow-up): the spawn must be
// counted on its own, or the group or the runtime's balance is off by one (a wait that never
// returns, or one that returns before the spawned task ran).
TEST_P(spawn_test, a_destructor_may_spawn_whatever_its_task_returned) {
  auto& r = start();
  using ending = spawns_when_destroyed::ending;
  const int rounds = static_cast<int>(scaled(200, 40));
  std::atomic<int> ran{0};
  int destroyed = 0;  // tasks destroyed = tasks spawned by destructors
  std::uint64_t executions = 0;
  for (int i = 0; i < rounds; ++i) {
    const group g = r.make_group();
    const int kind = i % 4;
    for (unsigned w = 0; w < r.workers(); ++w) {
      const ending e = kind == 0 ? ending::done
                       : kind == 3 ? ending::self_once
                                   : ending::fresh_follow_up;
      auto* t = r.make_task<spawns_when_destroyed>(r, ran, e, kind == 2);
      t->annotate(wid(w));
      r.spawn(t, g);
      const int tasks = e == ending::fresh_follow_up ? 2 : 1;
      destroyed += tasks;
      executions += static_cast<std::uint64_t>(tasks + (e == ending::self_once ? 1 : 0)) + tasks;
    }
    r.wait(g);
    r.wait_idle();
    ASSERT_EQ(ran.load(), destroyed) << "round " << i << ", kind " << kind;
    ASSERT_EQ(r.statistics().total().executed, executions) << "round " << i << ", kind " << kind;
  }
}

TEST_P(spawn_test, prefetch_distance_changes_at_run_time) {
  auto& r = start({.prefetch_distance = 0});
  EXPECT_EQ(r.prefetch_distance(), 0u);
  std::vector<std::uint64_t> data(4096, 1);
  std::atomic<std::uint64_t> sum{0};
  std::uint64_t expected = 0;
  for (unsigned d : {0u, 1u, 2u, runtime::max_prefetch_distance, 3u, 0u}) {
    r.set_prefetch_distance(d);
    EXPECT_EQ(r.prefetch_distance(), d);
    const group g = r.make_group();
    for (std::size_t i = 0; i < data.size(); i += 8) {
      auto* t = make_fn(r, [&sum, &data, i, tok = live_token{}](context&) {
        sum.fetch_add(data[i], std::memory_order_relaxed);
      });
      t->annotate_data(&data[i], 8 * sizeof(std::uint64_t));
      EXPECT_EQ(t->data(), &data[i]);
      EXPECT_EQ(t->data_size(), 8 * sizeof(std::uint64_t));
      EXPECT_EQ(t->mode(), access::read);
      EXPECT_FALSE(t->has_resource());
      r.spawn(t, g);
      ++expected;
    }
    r.wait(g);
    EXPECT_EQ(sum.load(), expected) << "distance " << d;
  }
}

TESSERA_INSTANTIATE_WORKER_COUNTS(spawn_test);

// Not parameterized: explicit CPU lists.
TEST(spawn_cpus, explicit_cpu_list_gives_one_worker_per_entry) {
  const unsigned cpus = cpu_count();
  runtime r({.cpus = {0, cpus > 1 ? 1u : 0u}});
  EXPECT_EQ(r.workers(), 2u);
  EXPECT_EQ(r.cpu_of(worker_id{0}), 0u);
  EXPECT_EQ(r.cpu_of(worker_id{1}), cpus > 1 ? 1u : 0u);
  std::atomic<int> ran{0};
  r.spawn([&](context&) { ran.fetch_add(1); });
  r.stop();
  EXPECT_EQ(ran.load(), 1);
}

// A worker of one runtime is "any other thread" for a second runtime: spawning into the second
// one from a task of the first is an external spawn, and current_worker() is empty there.
TEST(spawn_across_runtimes, task_of_one_runtime_spawns_into_another) {
  ASSERT_EQ(live_objects.load(), 0);
  {
    runtime small({.workers = 1});
    runtime big({.workers = 4});
    std::atomic<int> ran_in_small{0};
    std::atomic<int> wrong{0};
    const group gs = small.make_group();
    const group gb = big.make_group();
    for (unsigned w = 0; w < 4; ++w) {
      auto* t = make_fn(big, [&, tok = live_token{}](context& ctx) {
        if (small.current_worker().has_value()) wrong.fetch_add(1);
        if (big.current_worker() != std::optional<worker_id>(ctx.worker())) wrong.fetch_add(1);
        small.spawn(
            [&, tok2 = live_token{}](context& inner) {
              ran_in_small.fetch_add(1);
              if (&inner.runtime() != &small) wrong.fetch_add(1);
            },
            gs);
      });
      t->annotate(wid(w));  // workers 1..3 of `big` have no counterpart in `small`
      big.spawn(t, gb);
    }
    big.wait(gb);
    small.wait(gs);
    EXPECT_EQ(ran_in_small.load(), 4);
    EXPECT_EQ(wrong.load(), 0);
    small.wait_idle();
    EXPECT_EQ(small.statistics().spawned_external, 4u) << "spawns from big's workers are external";
  }
  EXPECT_EQ(live_objects.load(), 0);
}

TEST(spawn_cpus, explicit_cpu_list_wins_over_the_worker_count) {
  runtime r({.workers = 3, .cpus = {0}});
  EXPECT_EQ(r.workers(), 1u);
  EXPECT_EQ(r.cpu_of(worker_id{0}), 0u);
}

TEST(spawn_cpus, unpinned_runtime_runs_tasks_and_says_so) {
  runtime r({.workers = 3, .pin = false});
  std::atomic<int> ran{0};
  const group g = r.make_group();
  for (int i = 0; i < 100; ++i) r.spawn([&](context&) { ran.fetch_add(1); }, g);
  for (unsigned w = 0; w < 3; ++w) {  // every worker has started and run something
    auto* t = make_fn(r, [&](context&) { ran.fetch_add(1); });
    t->annotate(wid(w));
    r.spawn(t, g);
  }
  r.wait(g);
  EXPECT_EQ(ran.load(), 103);
  EXPECT_FALSE(r.pinned()) << "pin = false, yet the runtime reports pinned workers";
}

}  // namespace
}  // namespace tessera::test
