// Whole-pool stealing ([MxKernel] §5, coarse-grained work stealing) and serialization by
// scheduling while pools change hands.
//
// The load is skewed on purpose: every resource is moved to worker 0's pools (or every task
// starts in worker 0's home pool), the other workers start idle and must take work by asking
// worker 0 for a pool (or for half of its home pool's untargeted tasks). Tasks keep re-running
// themselves (returning `this`, sometimes re-aimed at another resource) until the test has seen
// what it waits for, so the checks depend on behaviour, not on how fast anything is: a worker
// that never gets work makes the test wait until its (generous) deadline and fail with a
// message. Per resource, an "inside" flag (exchanged to 1 on entry; it must have been 0) catches
// two tasks of one resource running at once, and a plain counter lets ThreadSanitizer check that
// each hand-over orders the accesses of consecutive tasks.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/scheduler.h"
#include "runtime/test_hooks.h"
#include "runtime/worker.h"
#include "test_support.h"

namespace tessera::test {
namespace {

/// Generous liveness bound for "eventually": a failure means the behaviour is missing.
constexpr auto eventually = std::chrono::seconds(60);

struct alignas(64) padded_counter {
  std::atomic<std::uint64_t> value{0};
};

/// A resource with four counters (one per line) that writers keep equal.
struct alignas(64) object {
  struct alignas(64) line {
    std::int64_t value = 0;
  };
  std::array<line, 4> fields{};
  std::int64_t plain = 0;  ///< touched only by tasks the primitive serializes (non-atomic)
  alignas(64) std::atomic<int> inside{0};
  std::atomic<std::uint64_t> writes{0};
};

struct shared_state {
  std::vector<object*> objects;
  primitive prim = primitive::scheduling;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> violations{0};
  std::atomic<std::uint64_t> runs{0};
  std::unique_ptr<padded_counter[]> per_worker;
  unsigned workers = 0;
  unsigned work = 64;  ///< pauses per task: long enough that stealing pays

  std::uint64_t total() const noexcept { return runs.load(std::memory_order_relaxed); }
  bool every_worker_ran() const noexcept {
    for (unsigned w = 0; w < workers; ++w) {
      if (per_worker[w].value.load(std::memory_order_relaxed) == 0) return false;
    }
    return true;
  }
  std::string per_worker_text() const {
    std::string s;
    for (unsigned w = 0; w < workers; ++w) {
      s += std::to_string(per_worker[w].value.load(std::memory_order_relaxed)) + " ";
    }
    return s;
  }
};

/// Runs on one object, then again (sometimes on the next object) until `stop`.
class perpetual final : public counted_task {
 public:
  perpetual(shared_state& s, unsigned object, bool writer) noexcept
      : m_s(&s), m_object(object), m_writer(writer) {
    aim();
  }

  task* execute(context& ctx) override {
    object& o = *m_s->objects[m_object];
    const bool serialized = m_writer || m_s->prim == primitive::scheduling;
    if (serialized) {
      if (o.inside.exchange(1) != 0) m_s->violations.fetch_add(1);
      if (m_writer) {
        for (auto& f : o.fields) racy_store(f.value, racy_load(f.value) + 1);
        ++o.plain;
        o.writes.fetch_add(1, std::memory_order_relaxed);
      } else if (o.plain != racy_load(o.fields[0].value)) {
        m_s->violations.fetch_add(1);
      }
      pause_a_little(m_s->work);
      o.inside.store(0);
    } else {  // an optimistic reader
      std::array<std::int64_t, 4> seen{};
      for (std::size_t i = 0; i < seen.size(); ++i) {
        seen[i] = racy_load(o.fields[i].value);
        pause_a_little(m_s->work / 4);
      }
      if (!ctx.validate()) return nullptr;  // restored and re-run
      if (seen[0] != seen[1] || seen[1] != seen[2] || seen[2] != seen[3]) {
        m_s->violations.fetch_add(1);
      }
    }
    auto& mine = m_s->per_worker[ctx.worker().value].value;
    mine.store(mine.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    m_s->runs.fetch_add(1, std::memory_order_relaxed);
    if (m_s->stop.load(std::memory_order_acquire)) return nullptr;
    if (++m_count % 4 == 0) {  // hop to another object (and so, often, to another pool)
      m_object = (m_object + 1 + m_count / 4) % static_cast<unsigned>(m_s->objects.size());
      aim();
    }
    return this;
  }

 private:
  void aim() noexcept {
    annotate_resource(m_s->objects[m_object], m_writer ? access::write : access::read);
  }

  shared_state* m_s;
  unsigned m_object;
  bool m_writer;
  unsigned m_count = 0;
};

class stealing_test : public runtime_fixture {
 protected:
  enum class until { every_worker_ran, resized };

  /// Every object moved to worker 0; `per_object` writers and as many readers per object (under
  /// scheduling the readers are serialized too); runs until `goal`, then checks everything.
  void skewed_run(primitive prim, unsigned pools_per_worker, until goal) {
    auto& r = start({.pools_per_worker = pools_per_worker});
    shared_state s;
    s.prim = prim;
    s.workers = r.workers();
    s.per_worker = std::make_unique<padded_counter[]>(s.workers);
    const unsigned n_objects = 2 * r.workers();
    for (unsigned i = 0; i < n_objects; ++i) {
      auto* o = r.make_resource<object>({.primitive = prim});
      r.move_resource(o, wid(0));
      s.objects.push_back(o);
    }
    const group g = r.make_group();
    // One task on worker 0 spawns everything: writers go to the objects' pools (all worker 0's),
    // optimistic readers to worker 0's home pool. Those readers stay on worker 0 (a target): a
    // thief must get its work by taking a pool, the thing under test. Movable, they could be its
    // first answer (half of the home pool), before the writers reached their pools, and keep it
    // busy for the whole run without a pool ever changing hands (one run in 70 under load failed
    // so, one in 11 once a spawning task woke the parked thief at its second spawn).
    auto* gen = make_fn(r, [&s, n_objects, tok = live_token{}](context& ctx) {
      const unsigned per_object = 3;
      for (unsigned i = 0; i < n_objects; ++i) {
        for (unsigned k = 0; k < per_object; ++k) {
          ctx.spawn(ctx.make_task<perpetual>(s, i, true));
          auto* reader = ctx.make_task<perpetual>(s, i, false);
          if (s.prim != primitive::scheduling) reader->annotate(wid(0));
          ctx.spawn(reader);
        }
      }
    });
    gen->annotate(wid(0));
    r.spawn(gen, g);

    const std::uint64_t min_runs = scaled(20000, 3000);
    const auto deadline = std::chrono::steady_clock::now() + eventually;
    unsigned resizes = 0;
    for (;;) {
      const bool enough = s.total() >= min_runs;
      if (goal == until::every_worker_ran && enough && s.every_worker_ran()) break;
      if (goal == until::resized && enough && resizes >= 12) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "not reached in time: runs " << s.total() << ", per worker "
                      << s.per_worker_text() << ", resizes " << resizes;
        break;
      }
      if (goal == until::resized) {
        const unsigned n = 1 + resizes % r.workers();
        r.set_active_workers(resizes % 3 == 2 ? r.workers() : n);
        ++resizes;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // let work flow
    }
    r.set_active_workers(r.workers());
    s.stop.store(true, std::memory_order_release);
    r.wait(g);

    EXPECT_EQ(s.violations.load(), 0u) << "two tasks of one resource overlapped";
    for (unsigned i = 0; i < n_objects; ++i) {
      const object& o = *s.objects[i];
      const auto writes = static_cast<std::int64_t>(o.writes.load());
      EXPECT_EQ(o.plain, writes) << "object " << i;
      for (const auto& f : o.fields) EXPECT_EQ(f.value, writes) << "object " << i;
    }
    for (auto* o : s.objects) r.retire_resource(o);
    if (goal == until::every_worker_ran) {
      r.stop();
      const auto stats = r.statistics();
      std::uint64_t pools_stolen = 0;
      for (unsigned w = 0; w < r.workers(); ++w) {
        EXPECT_GT(stats.workers[w].executed, 0u) << "worker " << w << " never ran a task";
        pools_stolen += stats.workers[w].pools_stolen;
      }
      if (r.workers() > 1) {
        EXPECT_GT(pools_stolen, 0u) << stats.to_string();
      }
    }
  }
};

// Enough resource pools on worker 0 that every thief can take one.
unsigned pools_for_everyone(unsigned workers) { return workers + 1; }

TEST_P(stealing_test, scheduling_never_overlaps_while_pools_are_stolen) {
  skewed_run(primitive::scheduling, pools_for_everyone(GetParam()), until::every_worker_ran);
}

TEST_P(stealing_test, optimistic_scheduled_writers_never_overlap_while_pools_are_stolen) {
  skewed_run(primitive::optimistic_scheduled, pools_for_everyone(GetParam()),
             until::every_worker_ran);
}

TEST_P(stealing_test, scheduling_never_overlaps_while_workers_are_resized) {
  skewed_run(primitive::scheduling, 4, until::resized);
}

TEST_P(stealing_test, optimistic_scheduled_writers_never_overlap_while_workers_are_resized) {
  skewed_run(primitive::optimistic_scheduled, 4, until::resized);
}

// With one pool per worker, resources live in home pools, and a thief may be handed half of a
// home pool's tasks: tasks serialized by scheduling must not be among them.
TEST_P(stealing_test, scheduling_never_overlaps_with_one_pool_per_worker) {
  skewed_run(primitive::scheduling, 1, until::resized);
}

TEST_P(stealing_test, optimistic_scheduled_writers_never_overlap_with_one_pool_per_worker) {
  skewed_run(primitive::optimistic_scheduled, 1, until::resized);
}

/// Untargeted work, no resources: re-runs itself (in the home pool of whichever worker runs it).
class busy final : public counted_task {
 public:
  explicit busy(shared_state& s) noexcept : m_s(&s) {}
  task* execute(context& ctx) override {
    pause_a_little(m_s->work);
    auto& mine = m_s->per_worker[ctx.worker().value].value;
    mine.store(mine.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    m_s->runs.fetch_add(1, std::memory_order_relaxed);
    return m_s->stop.load(std::memory_order_acquire) ? nullptr : this;
  }

 private:
  shared_state* m_s;
};

TEST_P(stealing_test, idle_workers_take_half_of_a_busy_home_pool) {
  auto& r = start();
  shared_state s;
  s.workers = r.workers();
  s.per_worker = std::make_unique<padded_counter[]>(s.workers);
  const group g = r.make_group();
  // One task on worker 0 spawns all the work: it all starts in worker 0's home pool.
  const unsigned tasks = 16 * r.workers();
  auto* gen = make_fn(r, [&s, tasks, tok = live_token{}](context& ctx) {
    for (unsigned i = 0; i < tasks; ++i) ctx.spawn(ctx.make_task<busy>(s));
  });
  gen->annotate(wid(0));
  r.spawn(gen, g);
  const auto deadline = std::chrono::steady_clock::now() + eventually;
  while (!(s.every_worker_ran() && s.total() >= scaled(20000, 3000))) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "idle workers got no share: per worker " << s.per_worker_text();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  s.stop.store(true, std::memory_order_release);
  r.wait(g);
  r.stop();
  const auto stats = r.statistics();
  std::uint64_t stolen = 0;
  for (unsigned w = 0; w < r.workers(); ++w) {
    EXPECT_GT(stats.workers[w].executed, 0u) << "worker " << w;
    stolen += stats.workers[w].tasks_stolen;
  }
  if (r.workers() > 1) {
    EXPECT_GT(stolen, 0u);
  }
}

TESSERA_INSTANTIATE_WORKER_COUNTS(stealing_test);

// A long queue of tasks that may not move (all targeted at worker 0) while worker 1 idles and
// keeps asking worker 0 for work. Answering walks the queue; when every request walked all of
// it, a test with 150,000 such tasks took 6-40 s on 2 cores (once over 300 s). The walks are
// paid for by executed tasks now: worker 0 looks at about one queued task per task it runs.
TEST(stealing, answering_thieves_walks_a_queue_of_unmovable_tasks_about_once) {
  runtime_options options;
  options.workers = 2;
  runtime r(options);
  const std::size_t n = scaled(20000, 4000);
  std::atomic<bool> open{false};
  std::atomic<std::uint64_t> ran{0};
  const group g = r.make_group();
  // Worker 0 is held by a first task while the others queue up behind it.
  auto* gate = make_fn(r, [&open](context&) {
    while (!open.load(std::memory_order_acquire)) pause_a_little(1);
  });
  gate->annotate(wid(0));
  r.spawn(gate, g);
  for (std::size_t i = 0; i < n; ++i) {
    auto* t = make_fn(r, [&ran](context&) {
      pause_a_little(100);
      ran.fetch_add(1, std::memory_order_relaxed);
    });
    t->annotate(wid(0));
    r.spawn(t, g);
  }
  open.store(true, std::memory_order_release);
  r.wait(g);
  r.wait_idle();  // the statistics are exact once the runtime is idle
  const auto stats = r.statistics();
  EXPECT_EQ(ran.load(), n);
  EXPECT_EQ(stats.workers[0].tasks_stolen, 0u) << "a task targeted at worker 0 was handed away";
  EXPECT_LE(stats.workers[0].steal_walk_steps, 2 * n + 4096)
      << "answering steal requests walked the queue again and again";
}

// A worker that parked before work appeared on another worker is woken by that worker: spawns
// into its own pools would wake it, but a recursion running on worker 0 spawns only into worker
// 0's pool. Without the wake-up it slept until the park timeout (50 ms), which made fib at
// 2 workers bimodal. The busy worker counts the wake-up in peers_woken; the parked one then
// takes a share of the queued work.
TEST(parking, a_busy_worker_wakes_a_parked_one_to_take_queued_work) {
  runtime_options options;
  options.workers = 2;
  options.spin_before_park = std::chrono::microseconds{0};  // idle means parked at once
  runtime r(options);
  std::array<std::atomic<unsigned>, 2> ran{};
  std::uint64_t woken = 0;
  const auto deadline = std::chrono::steady_clock::now() + eventually;
  while ((woken == 0 || ran[1].load() == 0) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // worker 1 goes to sleep
    const group g = r.make_group();
    auto* gen = make_fn(r, [&ran](context& ctx) {
      for (int i = 0; i < 400; ++i) {
        ctx.spawn([&ran](context& c) {
          pause_a_little(200);
          ran[c.worker().value].fetch_add(1, std::memory_order_relaxed);
        });
      }
    });
    gen->annotate(wid(0));
    r.spawn(gen, g);
    r.wait(g);
    r.wait_idle();  // the statistics are exact once the runtime is idle
    woken = r.statistics().workers[0].peers_woken;
  }
  EXPECT_GT(woken, 0u) << "worker 0 never woke the parked worker 1";
  EXPECT_GT(ran[1].load(), 0u) << "worker 1 took no share of worker 0's queued tasks";
}

#if defined(TESSERA_DEBUG_CHECKS)
/// For a hook or a task that holds its worker at one point of an interleaving: yields until
/// `flag` is set, or 20 s have passed (so that a failing test ends instead of hanging).
void hold_until(const std::atomic<bool>& flag) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!flag.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

/// A root task for worker `w` that spawns three children onto that worker's work-first stack, so
/// that the worker has more than one task queued while they wait there. The first child to run
/// sets `started` (if given) and then holds its worker until `requested` is set (hold_until).
struct three_children {
  std::atomic<bool> first{true};
  std::atomic<unsigned> ran{0};  // children that ran

  task* root(runtime& r, worker_id w, const std::atomic<bool>& requested,
             std::atomic<bool>* started = nullptr) {
    auto* t = make_fn(r, [this, &requested, started](context& ctx) {
      for (int i = 0; i < 3; ++i) {
        ctx.spawn([this, &requested, started](context&) {
          if (first.exchange(false)) {
            if (started != nullptr) started->store(true);
            hold_until(requested);
          }
          ran.fetch_add(1);
        });
      }
    });
    t->annotate(w);
    return t;
  }
};

/// Options for the hook tests below: `workers` workers that park as soon as they are idle (no spin)
/// and a periodic() after every task (queue lengths published, parked peers looked for).
runtime_options parking_at_once(unsigned workers) {
  runtime_options options;
  options.workers = workers;
  options.epoch_interval_tasks = 1;
  options.spin_before_park = std::chrono::microseconds{0};
  return options;
}

/// Which thief asked which victim (test_hooks::steal_requested), for workers below 4: set while
/// an instance lives, cleared when it is made.
struct requests_seen {
  static inline std::array<std::array<std::atomic<bool>, 4>, 4> asked{};  // [victim][thief]
  requests_seen() {
    for (auto& row : asked) {
      for (auto& a : row) a.store(false);
    }
    detail::test_hooks::steal_requested.store(
        +[](detail::worker& victim, unsigned thief) {
          if (victim.index() < 4 && thief < 4) asked[victim.index()][thief].store(true);
        },
        std::memory_order_release);
  }
  ~requests_seen() { detail::test_hooks::steal_requested.store(nullptr); }
  requests_seen(const requests_seen&) = delete;
  requests_seen& operator=(const requests_seen&) = delete;
};

/// The interleaving forced with test hooks (src/runtime/test_hooks.h): worker 1 answers worker
/// 2's steal request with tasks of its home pool and has checked that worker 2 is active; before
/// it moves them, worker 2 is deactivated and hands its home pool to worker 0, which adopts it and
/// parks. The tasks moved into that pool's inbox must wake its owner now, worker 0. They used to
/// post mail to and wake worker 2, which went back to sleep, so they waited for worker 0's park
/// timeout (50 ms; set to an hour here, so that only a real wake-up runs them).
TEST(stealing_race, tasks_stolen_for_a_thief_deactivated_meanwhile_wake_the_new_owner) {
  struct shared {
    std::atomic<bool> blocker_started{false};
    std::atomic<bool> release_blocker{false};
    std::atomic<bool> requested{false};  // worker 2 asked worker 1 for work
    std::atomic<bool> answering{false};  // worker 1 is about to move tasks to worker 2
    std::atomic<bool> proceed{false};
    std::atomic<const detail::scheduler*> sched{nullptr};
    three_children children;
  };
  static shared* st = nullptr;
  shared s;
  st = &s;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto before_deadline = [&] { return std::chrono::steady_clock::now() < deadline; };
  {
    runtime_options options;
    options.workers = 3;
    options.pools_per_worker = 1;  // worker 2's only pool, its home, goes to worker 2 % 2 = 0
    options.epoch_interval_tasks = 1;  // worker 1 publishes its queue length after every task
    options.spin_before_park = std::chrono::microseconds{0};
    runtime r(options);
    const group g = r.make_group();
    // Worker 0 is busy, so worker 2 asks worker 1, the only worker with queued tasks.
    auto* blocker = make_fn(r, [](context&) {
      st->blocker_started.store(true);
      while (!st->release_blocker.load()) std::this_thread::yield();
    });
    blocker->annotate(wid(0));
    r.spawn(blocker, g);
    while (!s.blocker_started.load() && before_deadline()) std::this_thread::yield();
    detail::test_hooks::park_timeout_ns.store(3'600'000'000'000ull);
    detail::test_hooks::steal_requested.store(
        +[](detail::worker& victim, unsigned thief) {
          if (victim.index() == 1 && thief == 2) st->requested.store(true);
        },
        std::memory_order_release);
    detail::test_hooks::steal_answering.store(
        +[](detail::worker& victim, unsigned thief) {
          if (victim.index() != 1 || thief != 2 || st->answering.exchange(true)) return;
          st->sched.store(victim.owner());
          hold_until(st->proceed);
        },
        std::memory_order_release);
    // Worker 1 runs three children from its work-first stack; the first one waits for worker
    // 2's request, and the answer (after it) moves one of the other two.
    r.spawn(s.children.root(r, wid(1), s.requested), g);
    while (!s.answering.load() && before_deadline()) std::this_thread::yield();
    const bool reached = s.answering.load();
    if (reached) {
      r.set_active_workers(2);  // worker 2 gives its home pool to worker 0
      s.release_blocker.store(true);
      const detail::scheduler& sched = *s.sched.load();
      // Worker 0 adopts the pool, finds nothing to run and parks.
      while ((sched.worker_at(2).home()->held_by.load() != 0 || sched.parked_workers() == 0) &&
             before_deadline()) {
        std::this_thread::yield();
      }
      EXPECT_EQ(sched.worker_at(2).home()->held_by.load(), 0u);
      s.proceed.store(true);
      while (s.children.ran.load() != 3 && before_deadline()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      EXPECT_EQ(s.children.ran.load(), 3u)
          << "a task moved to the pool of a thief deactivated meanwhile waited for its new "
             "owner's park timeout";
    }
    s.release_blocker.store(true);
    s.proceed.store(true);
    detail::test_hooks::steal_answering.store(nullptr);
    detail::test_hooks::steal_requested.store(nullptr);
    detail::test_hooks::park_timeout_ns.store(0);
    EXPECT_TRUE(reached) << "worker 2 never asked worker 1 for tasks of its home pool";
    r.detach(g);  // stop() below drains it; not waited for, so that a failure cannot hang
    r.stop();  // wakes every worker (stop() activates them all), so a failure does not hang
    EXPECT_EQ(s.children.ran.load(), 3u);
  }
  st = nullptr;
}

/// The interleaving forced with test hooks: worker 1 is on its way to park (not yet counted as
/// parked) when worker 0 publishes more than one queued task and checks for parked peers; it
/// finds none and wakes nobody, then runs a task that waits for a thief. Worker 1 must ask
/// worker 0 for work as it parks, instead of sleeping until the park timeout (50 ms; set to an
/// hour here). Otherwise it sleeps: the queued tasks wait for the park timeout, or, in the test
/// above, for ever.
TEST(stealing_race, a_worker_that_parks_just_after_a_peer_published_work_asks_for_it) {
  struct shared {
    std::atomic<bool> armed{true};
    std::atomic<bool> parking{false};    // worker 1 is held at the start of park()
    std::atomic<bool> published{false};  // worker 0 published its queue and checked for sleepers
    three_children children;
  };
  static shared* st = nullptr;
  shared s;
  st = &s;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto before_deadline = [&] { return std::chrono::steady_clock::now() < deadline; };
  detail::test_hooks::park_timeout_ns.store(3'600'000'000'000ull);
  detail::test_hooks::parking.store(
      +[](detail::worker& w) {
        if (w.index() != 1 || !st->armed.exchange(false)) return;
        st->parking.store(true);
        hold_until(st->published);
      },
      std::memory_order_release);
  const requests_seen seen;
  const std::atomic<bool>& requested = requests_seen::asked[0][1];  // worker 1 asked worker 0
  {
    runtime r(parking_at_once(2));
    const group g = r.make_group();
    while (!s.parking.load() && before_deadline()) std::this_thread::yield();
    const bool held = s.parking.load();
    // Worker 0 runs three children from its work-first stack; periodic() after the root has
    // published two queued (the stack's count) and found no parked peer by the time the first
    // child starts. The first child waits for worker 1's request.
    r.spawn(s.children.root(r, wid(0), requested, &s.published), g);
    r.wait(g);
    EXPECT_TRUE(held) << "worker 1 never parked";
    EXPECT_TRUE(requested.load())
        << "worker 1 parked without asking worker 0, which had queued tasks, for work";
    EXPECT_EQ(s.children.ran.load(), 3u);
    s.published.store(true);
    detail::test_hooks::parking.store(nullptr);
    detail::test_hooks::park_timeout_ns.store(0);
    r.stop();
  }
  st = nullptr;
}

/// Waits until both workers of `r` are parked (counted in the scheduler), or 20 s have passed.
bool both_parked(runtime& r) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (r.internals().parked_workers() < 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  return r.internals().parked_workers() >= 2;
}

/// The hook that holds periodic() within its once-per-millisecond limit on waking parked peers,
/// and the park timeout set to an hour, for the two tests below; both undone at the end.
struct wake_limit_in_force {
  wake_limit_in_force() {
    detail::test_hooks::park_timeout_ns.store(3'600'000'000'000ull);
    detail::test_hooks::peer_wake_limited.store(true);
  }
  ~wake_limit_in_force() {
    detail::test_hooks::peer_wake_limited.store(false);
    detail::test_hooks::park_timeout_ns.store(0);
  }
};

/// Worker 1 parked blind (no peer had more than one task queued when it looked). Worker 0 then
/// queues tasks while its limit on waking parked peers is in force (as within a millisecond of
/// another wake-up), and its first task waits for worker 1 to ask for work. Worker 0 must wake
/// worker 1 despite the limit; otherwise worker 1 sleeps until its park timeout (50 ms; an hour
/// here) while the queued tasks wait.
TEST(stealing_race, a_peer_within_its_wake_limit_still_wakes_a_worker_that_parked_blind) {
  const requests_seen seen;
  const std::atomic<bool>& asked = requests_seen::asked[0][1];
  three_children children;
  const wake_limit_in_force limit;
  runtime r(parking_at_once(2));
  const group g = r.make_group();
  EXPECT_TRUE(both_parked(r)) << "the idle workers never parked";
  // Worker 0 is woken by the spawn (into its own pool) and runs three children from its
  // work-first stack; periodic() after the root sees two queued, worker 1 parked, and the limit.
  r.spawn(children.root(r, wid(0), asked), g);
  r.wait(g);
  EXPECT_TRUE(asked.load())
      << "worker 0 queued tasks and ran a long one without waking worker 1, parked blind";
  EXPECT_EQ(children.ran.load(), 3u);
  r.stop();
}

/// The limit's purpose, kept: tasks that may not move (targeted at worker 0) queued on worker 0
/// wake the parked worker 1 once (it parked blind), not at every periodic() of worker 0 (every
/// task here). Worker 1 asks for work, gets none, and parks again; that park is not blind (it
/// asked, or the queue it saw had more than one), so nothing wakes it again until the limit
/// has passed, which the hook holds off.
TEST(stealing_race, tasks_that_may_not_move_wake_a_parked_worker_once_within_the_limit) {
  const wake_limit_in_force limit;
  runtime r(parking_at_once(2));
  const group g = r.make_group();
  EXPECT_TRUE(both_parked(r)) << "the idle workers never parked";
  std::atomic<unsigned> ran{0};
  std::atomic<unsigned> ran_elsewhere{0};
  constexpr unsigned tasks = 2000;
  auto* root = make_fn(r, [&ran, &ran_elsewhere](context& ctx) {
    for (unsigned i = 0; i < tasks; ++i) {
      auto* t = make_fn(ctx, [&ran, &ran_elsewhere](context& c) {
        if (c.worker().value != 0) ran_elsewhere.fetch_add(1, std::memory_order_relaxed);
        pause_a_little(200);
        ran.fetch_add(1, std::memory_order_relaxed);
      });
      t->annotate(wid(0));
      ctx.spawn(t);
    }
  });
  root->annotate(wid(0));
  r.spawn(root, g);
  r.wait(g);
  r.wait_idle();  // the statistics are exact once the runtime is idle
  EXPECT_EQ(ran.load(), tasks);
  EXPECT_EQ(ran_elsewhere.load(), 0u) << "a task targeted at worker 0 ran on another";
  EXPECT_LE(r.statistics().workers[0].peers_woken, 2u)
      << "tasks that may not move woke the parked worker again and again";
  r.stop();
}

/// Worker 1 parked blind. One long task on worker 0 spawns two movable children and then keeps
/// running (as a parallel_for's first piece does: it spawns all its halves, then runs its own
/// piece) until worker 1 is awake. The second spawn must wake worker 1 (worker::offer_queued):
/// if only periodic(), 50 tasks later, did, worker 1 would sleep through the task (until its
/// park timeout, 50 ms; an hour here), and a parallel_for of 16 long pieces would run on one
/// worker of two.
TEST(stealing_race, a_long_task_that_spawns_work_wakes_a_parked_worker_before_it_ends) {
  const requests_seen seen;
  const std::atomic<bool>& asked = requests_seen::asked[0][1];
  const wake_limit_in_force limit;
  runtime r(parking_at_once(2));
  const group g = r.make_group();
  EXPECT_TRUE(both_parked(r)) << "the idle workers never parked";
  std::atomic<unsigned> children{0};
  auto* root = make_fn(r, [&](context& ctx) {
    for (int i = 0; i < 2; ++i) {
      ctx.spawn([&children, tok = live_token{}](context&) { children.fetch_add(1); });
    }
    // Worker 1, woken, asks this worker for work (answered once this task ends).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!asked.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
  });
  root->annotate(wid(0));
  r.spawn(root, g);
  r.wait(g);
  EXPECT_TRUE(asked.load())
      << "worker 1 slept while worker 0 ran a long task with work queued";
  EXPECT_EQ(children.load(), 2u);
  r.stop();
}

/// Workers 1 and 2 both parked blind (idle from the start: nobody had anything queued). Worker 0
/// then queues three movable tasks behind a task that keeps returning itself (so that worker 0
/// checks for parked peers after every run) until worker 2 has asked it for work; the wake limit
/// is held in force, so only the blind parks can wake anyone. Worker 1 is woken, asks, and is
/// held by the task it gets. Worker 2 must be woken too: were blind parks a count, and a change
/// of it woke the first parked worker in index order, worker 1 would take that wake-up, and
/// worker 2 would sleep until its park timeout (50 ms; an hour here) while worker 0 kept tasks
/// queued.
TEST(stealing_race, every_worker_that_parked_blind_is_woken_for_queued_work) {
  static std::atomic<unsigned> ran{0};
  ran.store(0);
  const requests_seen seen;
  const wake_limit_in_force limit;
  runtime_options options = parking_at_once(3);
  options.pools_per_worker = 1;
  runtime r(options);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (r.internals().parked_workers() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_EQ(r.internals().parked_workers(), 3u) << "the idle workers never parked";
  const group g = r.make_group();
  // Runs before the low-priority tasks, again and again (a follow-up without data stays on the
  // worker), until worker 2 has asked.
  struct until_asked final : task {
    std::chrono::steady_clock::time_point until;
    explicit until_asked(std::chrono::steady_clock::time_point u) : until(u) {}
    task* execute(context&) override {
      if (requests_seen::asked[0][2].load() || std::chrono::steady_clock::now() >= until)
        return nullptr;
      std::this_thread::yield();
      return this;
    }
  };
  auto* root = make_fn(r, [deadline](context& ctx) {
    for (int i = 0; i < 3; ++i) {
      auto* t = make_fn(ctx, [](context& c) {
        if (c.worker().value == 1) hold_until(requests_seen::asked[0][2]);  // asks no more
        ran.fetch_add(1);
      });
      t->annotate(priority::low);  // queued in the home pool, where a thief may take it
      ctx.spawn(t);
    }
    ctx.spawn(ctx.make_task<until_asked>(deadline));
  });
  root->annotate(wid(0));
  r.spawn(root, g);
  r.wait(g);
  EXPECT_TRUE(requests_seen::asked[0][2].load())
      << "worker 2, parked blind, slept while worker 0 kept movable tasks queued";
  EXPECT_EQ(ran.load(), 3u);
  r.stop();
}

/// Worker 1 asks worker 0 for work while worker 0 has only tasks that may not move queued (39
/// targeted at it): the answer is nothing, and worker 1 sleeps. The last of those tasks queues
/// ten movable ones, which keep returning themselves until one has run on worker 1 (so that worker
/// 0 keeps checking for parked peers and answering requests); the wake limit is held in force.
/// Worker 1 must be woken to ask again once worker 0 has paid for the walk that found nothing
/// (it ran as many tasks as the walk looked at). Otherwise nothing wakes it before the limit
/// passes (1 ms; here, the park timeout of an hour), and worker 0 runs every task alone.
TEST(stealing_race, a_thief_answered_with_nothing_is_woken_when_movable_work_follows) {
  static std::atomic<unsigned> ran_on_1{0};
  ran_on_1.store(0);
  const wake_limit_in_force limit;
  runtime r(parking_at_once(2));
  EXPECT_TRUE(both_parked(r)) << "the idle workers never parked";
  const group g = r.make_group();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  struct movable final : task {
    std::chrono::steady_clock::time_point until;
    explicit movable(std::chrono::steady_clock::time_point u) : until(u) {}
    task* execute(context& ctx) override {
      if (ctx.worker().value == 1) {
        ran_on_1.fetch_add(1);
        return nullptr;
      }
      if (ran_on_1.load() != 0 || std::chrono::steady_clock::now() >= until) return nullptr;
      std::this_thread::yield();
      return this;  // low priority: queued again behind the others
    }
  };
  auto* root = make_fn(r, [deadline](context& ctx) {
    // Normal priority, spawned first to last, run last to first: task 0 runs last.
    for (int i = 0; i < 40; ++i) {
      auto* t = make_fn(ctx, [i, deadline](context& c) {
        pause_a_little(50);
        if (i != 0) return;
        for (int k = 0; k < 10; ++k) {
          auto* m = c.make_task<movable>(deadline);
          m->annotate(priority::low);
          c.spawn(m);
        }
      });
      t->annotate(wid(0));
      ctx.spawn(t);
    }
  });
  root->annotate(wid(0));
  r.spawn(root, g);
  r.wait(g);
  EXPECT_GT(ran_on_1.load(), 0u)
      << "worker 1, answered with nothing, slept while worker 0 had movable tasks queued";
  r.stop();
}

/// Workers 0 and 1 have movable tasks queued (3 and 4 of low priority, plus the task that runs
/// next) and are each held inside a task; workers 2 and 3 are idle thieves. A victim answers only
/// between two tasks, so the first thief's request to worker 1 (the most queued) waits. The
/// other thief must pass over worker 1 and ask worker 0, not ask worker 1 again at every try, be
/// refused, and never ask worker 0 (on a 16-core VM, passing over such victims cut a 16-worker
/// tree's idle time by about a fifth; docs/performance-notes.md).
TEST(stealing_race, a_thief_passes_over_a_victim_another_thief_is_waiting_for) {
  static std::atomic<bool> release{false};
  static std::array<std::atomic<bool>, 2> holding{};
  release.store(false);
  for (auto& h : holding) h.store(false);
  runtime_options options;
  options.workers = 4;
  options.pools_per_worker = 1;
  options.epoch_interval_tasks = 1;  // queue lengths published after every task
  runtime r(options);
  const group g = r.make_group();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  // Worker 1 first: once it holds, its published count (5) stays above worker 0's (4), so a
  // thief that chooses by queue length alone always chooses worker 1.
  for (unsigned w : {1u, 0u}) {
    auto* root = make_fn(r, [w](context& ctx) {
      for (unsigned i = 0; i < 3 + w; ++i) {
        auto* t = make_fn(ctx, [](context&) {});
        t->annotate(priority::low);  // queued in the home pool, where a thief may take it
        ctx.spawn(t);
      }
      ctx.spawn([w](context&) {  // normal priority: runs next, before the queued ones
        holding[w].store(true);
        hold_until(release);
      });
    });
    root->annotate(wid(w));
    r.spawn(root, g);
    while (!holding[w].load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  }
  const detail::scheduler& sched = r.internals();
  auto asked = [&](unsigned w) {
    return sched.worker_at(w).steal_requested_by() != detail::worker::no_thief;
  };
  while (!(holding[0].load() && holding[1].load() && asked(0) && asked(1)) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_TRUE(holding[0].load() && holding[1].load()) << "a worker never ran its holding task";
  EXPECT_TRUE(asked(1)) << "no thief asked worker 1, the worker with the most queued";
  EXPECT_TRUE(asked(0)) << "the second thief never asked worker 0 while worker 1 kept it waiting";
  release.store(true);
  r.wait(g);
  r.stop();
}
#endif

}  // namespace
}  // namespace tessera::test
