// Epoch-based reclamation of retired resources ([MxTasks] §4.4; src/memory/epoch.h and
// reclamation.h).
//
// Resources are linked from a shared array; reader tasks find them there and read them as
// optimistic readers, writer tasks update them, and replacing tasks mark one dead, link a new
// one in its place and retire the old one while other tasks may still be queued on it. Nothing
// may be freed while a task that could have seen it still exists (AddressSanitizer turns such a
// read into a heap-use-after-free; in other builds the destructor's "dead" mark is checked),
// everything retired must be freed (destructor count == construction count after stop(), and
// LeakSanitizer checks the memory), and resources retired by tasks must be freed while the
// runtime runs, not only at stop().
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/scheduler.h"
#include "runtime/test_hooks.h"
#include "runtime/worker.h"
#include "test_support.h"

namespace tessera::test {
namespace {

constexpr auto eventually = std::chrono::seconds(60);
constexpr std::int64_t live_mark = 0x11FE11FE;
constexpr std::int64_t dead_mark = 0xDEADDEAD;

/// A resource that counts its constructions and destructions and marks itself dead.
struct node {
  static inline std::atomic<long> constructed{0};
  static inline std::atomic<long> destroyed{0};
  static inline std::atomic<long> torn_at_destruction{0};
  /// Sum of the counters of every destroyed node: equals the number of updates made.
  static inline std::atomic<std::int64_t> updates_at_destruction{0};

  struct alignas(64) line {
    std::int64_t value = 0;
  };
  std::array<line, 4> fields{};
  std::int64_t alive = 1;  ///< 0 once a replacing task unlinked it (racy: readers share it)
  std::int64_t mark = live_mark;

  node() noexcept { constructed.fetch_add(1); }
  ~node() {
    const std::int64_t f = racy_load(fields[0].value);
    for (const auto& l : fields) {
      if (racy_load(l.value) != f) torn_at_destruction.fetch_add(1);
    }
    updates_at_destruction.fetch_add(f);
    racy_store(mark, dead_mark);
    destroyed.fetch_add(1);
  }

  static void reset() noexcept {
    constructed = 0;
    destroyed = 0;
    torn_at_destruction = 0;
    updates_at_destruction = 0;
  }
};

resource_hints hints_for(std::size_t slot) {
  return {.primitive =
              slot % 2 == 0 ? primitive::optimistic_latch : primitive::optimistic_scheduled};
}

struct shared_array {
  std::vector<std::atomic<node*>> slots;
  std::atomic<std::uint64_t> violations{0};
  std::atomic<std::uint64_t> lookups{0};
  std::atomic<std::uint64_t> updates{0};
  std::atomic<std::uint64_t> replaced{0};
  explicit shared_array(std::size_t n) : slots(n) {}
};

enum class op_kind : std::uint8_t { lookup, update, replace };

/// Finds its node in the array (first run, unannotated), then runs on it under the node's
/// primitive (second run): an optimistic read, an update, or a replacement that retires it.
class node_op final : public counted_task {
 public:
  node_op(shared_array& a, std::size_t slot, op_kind kind) noexcept
      : m_a(&a), m_slot(slot), m_kind(kind) {}

  task* execute(context& ctx) override {
    if (m_node == nullptr) {
      // acquire: the node's construction happens-before we use it.
      m_node = m_a->slots[m_slot].load(std::memory_order_acquire);
      if (m_node == nullptr) return nullptr;
      annotate_resource(m_node, m_kind == op_kind::lookup ? access::read : access::write);
      return this;
    }
    node& n = *m_node;
    switch (m_kind) {
      case op_kind::lookup: {
        const std::int64_t mark = racy_load(n.mark);
        const std::int64_t alive = racy_load(n.alive);
        std::array<std::int64_t, 4> seen{};
        for (std::size_t i = 0; i < seen.size(); ++i) seen[i] = racy_load(n.fields[i].value);
        if (!ctx.validate()) return nullptr;                  // restored and re-run
        if (mark != live_mark) m_a->violations.fetch_add(1);  // freed under a reader
        if (alive != 0 && (seen[0] != seen[1] || seen[1] != seen[2] || seen[2] != seen[3])) {
          m_a->violations.fetch_add(1);
        }
        m_a->lookups.fetch_add(1, std::memory_order_relaxed);
        return nullptr;
      }
      case op_kind::update:
        if (racy_load(n.mark) != live_mark) m_a->violations.fetch_add(1);
        if (racy_load(n.alive) == 0) return nullptr;  // replaced meanwhile
        for (auto& f : n.fields) racy_store(f.value, racy_load(f.value) + 1);
        m_a->updates.fetch_add(1, std::memory_order_relaxed);
        return nullptr;
      case op_kind::replace: {
        if (racy_load(n.mark) != live_mark) m_a->violations.fetch_add(1);
        if (racy_load(n.alive) == 0) return nullptr;  // someone else replaced it
        racy_store(n.alive, std::int64_t{0});
        // Only the task that marked the current node dead changes the slot.
        auto* fresh = ctx.runtime().make_resource<node>(hints_for(m_slot));
        // release: the new node's construction is visible to whoever loads it.
        m_a->slots[m_slot].store(fresh, std::memory_order_release);
        ctx.runtime().retire_resource(m_node);  // other tasks may still be queued on it
        m_a->replaced.fetch_add(1, std::memory_order_relaxed);
        return nullptr;
      }
    }
    return nullptr;
  }

 private:
  shared_array* m_a;
  std::size_t m_slot;
  op_kind m_kind;
  node* m_node = nullptr;
};

class reclamation_test : public runtime_fixture {
 protected:
  void SetUp() override {
    runtime_fixture::SetUp();
    node::reset();
  }
  void TearDown() override {
    runtime_fixture::TearDown();
    EXPECT_EQ(node::destroyed.load(), node::constructed.load())
        << "retired resources were not all released by stop()";
    EXPECT_EQ(node::torn_at_destruction.load(), 0);
  }

  /// Aggressive reclamation: the epoch may advance at every try, workers publish often.
  runtime& start_fast_epochs() {
    return start({.epoch_interval_tasks = 4, .epoch_period = std::chrono::microseconds(0)});
  }

  /// Spawns a no-op on every worker until `done()`; fails after a generous deadline.
  template <class Done>
  void nudge_until(runtime& r, Done done, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + eventually;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << what;
        return;
      }
      run_an_empty_task_on_each_worker(r);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
};

TEST_P(reclamation_test, concurrent_deletes_with_optimistic_readers) {
  auto& r = start_fast_epochs();
  shared_array a(16);
  for (std::size_t i = 0; i < a.slots.size(); ++i) {
    a.slots[i].store(r.make_resource<node>(hints_for(i)));
  }
  const std::size_t ops = scaled(20000, 4000);
  const group g = r.make_group();
  // From this thread, so every operation starts in the epoch current at its spawn.
  for (std::size_t k = 0; k < ops; ++k) {
    const std::uint64_t h = mix(k);
    const std::size_t slot = h % a.slots.size();
    const unsigned roll = static_cast<unsigned>((h >> 32) % 100);
    const op_kind kind = roll < 70   ? op_kind::lookup
                         : roll < 90 ? op_kind::update
                                     : op_kind::replace;
    r.spawn(r.make_task<node_op>(a, slot, kind), g);
  }
  r.wait(g);
  EXPECT_EQ(a.violations.load(), 0u);
  EXPECT_GT(a.replaced.load(), 0u);
  EXPECT_GT(a.lookups.load(), 0u);

  // What tasks retired is freed while the runtime runs (the epoch moves on as work flows).
  const long replaced = static_cast<long>(a.replaced.load());
  nudge_until(
      r, [&] { return node::destroyed.load() == replaced; },
      "resources retired by tasks were not freed while the runtime ran");
  EXPECT_EQ(node::destroyed.load(), replaced);

  // The nodes still linked are retired from this thread; stop() frees them (checked in
  // TearDown), and every update is found in exactly one destroyed node.
  for (auto& s : a.slots) r.retire_resource(s.exchange(nullptr));
  r.stop();
  EXPECT_EQ(node::updates_at_destruction.load(), static_cast<std::int64_t>(a.updates.load()));
}

/// The holder occupies one worker; the retirer needs another.
class reclamation_test_two_workers : public reclamation_test {};

TEST_P(reclamation_test_two_workers, a_resource_outlives_every_task_that_could_have_seen_it) {
  auto& r = start_fast_epochs();
  shared_array a(1);
  node* victim = r.make_resource<node>(hints_for(0));
  a.slots[0].store(victim);
  std::atomic<int> holding{-1};
  std::atomic<bool> release{false};
  std::atomic<std::int64_t> mark_seen{0};
  const group holder_group = r.make_group();
  // The holder loads the pointer, then stays on its worker until released: its operation's
  // epoch stays open the whole time.
  r.spawn(
      [&, tok = live_token{}](context& ctx) {
        node* p = a.slots[0].load(std::memory_order_acquire);
        holding.store(ctx.worker().value);
        while (!release.load()) std::this_thread::yield();
        mark_seen.store(racy_load(p->mark));
      },
      holder_group);
  while (holding.load() < 0) std::this_thread::yield();
  const unsigned held = static_cast<unsigned>(holding.load());
  const unsigned other = (held + 1) % r.workers();

  const group retire_group = r.make_group();
  auto* retirer = make_fn(r, [&, tok = live_token{}](context& ctx) {
    node* p = a.slots[0].exchange(nullptr);
    ctx.runtime().retire_resource(p);
  });
  retirer->annotate(wid(other));
  r.spawn(retirer, retire_group);
  r.wait(retire_group);

  // Plenty of later operations finish on the other workers; the epoch tries to advance.
  for (int round = 0; round < static_cast<int>(scaled(300, 60)); ++round) {
    const group g = r.make_group();
    for (unsigned w = 0; w < r.workers(); ++w) {
      if (w == held) continue;
      auto* t = make_fn(r, [tok = live_token{}](context&) {});
      t->annotate(wid(w));
      r.spawn(t, g);
    }
    r.wait(g);
  }
  EXPECT_EQ(node::destroyed.load(), 0) << "freed while a task that had loaded it still ran";
  release.store(true);
  r.wait(holder_group);
  EXPECT_EQ(mark_seen.load(), live_mark);
  nudge_until(
      r, [&] { return node::destroyed.load() == 1; },
      "the retired resource was not freed after the last task that could see it");
}

/// A task registering a when_done continuation, the group's task, and a worker for the rest.
class reclamation_test_three_workers : public reclamation_test {};

TEST_P(reclamation_test_three_workers, a_when_done_continuation_keeps_its_operation_open) {
  // P, an operation of epoch A, unlinks and retires a resource and registers a continuation that
  // reads it on a group whose only task belongs to a later operation. P then finishes, long
  // before the continuation runs. Were the continuation counted only when the group completed,
  // slot A would balance, and the epoch would move on by four and free the resource under the
  // waiting continuation.
  auto& r = start_fast_epochs();
  auto& sched = r.internals();
  std::atomic<node*> link{r.make_resource<node>(hints_for(0))};
  gate p_gate;
  gate t_gate;
  std::atomic<std::uint64_t> retired_by{0};  // the epoch after the retirement
  std::atomic<std::int64_t> mark_seen{0};
  const group g = r.make_group();
  const group p_group = r.make_group();
  const group cont_group = r.make_group();
  // Empty operations on workers 0 and 2 (1 holds g's task): the epoch tries to advance.
  auto nudge = [&](int rounds) {
    for (int i = 0; i < rounds; ++i) {
      const group n = r.make_group();
      for (const unsigned w : {0u, 2u}) {
        auto* t = make_fn(r, [tok = live_token{}](context&) {});
        t->annotate(wid(w));
        r.spawn(t, n);
      }
      r.wait(n);
    }
  };
  auto* p = make_fn(r, [&, tok = live_token{}](context& ctx) {
    node* n = link.exchange(nullptr);
    ctx.runtime().retire_resource(n);
    retired_by.store(sched.global_epoch());
    p_gate.pass();  // the test starts g's task in a later epoch meanwhile
    auto* continuation = make_fn(ctx, [&mark_seen, n, tok2 = live_token{}](context&) {
      mark_seen.store(racy_load(n->mark));
    });
    continuation->annotate(cont_group);  // else it joins p_group, whose wait would wait for it
    ctx.when_done(g, continuation);
  });
  p->annotate(wid(0));
  r.spawn(p, p_group);
  p_gate.wait_for_arrivals(1);
  // Worker 2 alone advances the epoch past the retirement (P's own slot blocks only A + 4).
  const auto deadline = std::chrono::steady_clock::now() + eventually;
  while (sched.global_epoch() <= retired_by.load()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the epoch did not advance";
    const group n = r.make_group();
    auto* t = make_fn(r, [tok = live_token{}](context&) {});
    t->annotate(wid(2));
    r.spawn(t, n);
    r.wait(n);
  }
  auto* held = make_fn(r, [&, tok = live_token{}](context&) { t_gate.pass(); });
  held->annotate(wid(1));
  r.spawn(held, g);  // an operation of a later epoch than P's
  t_gate.wait_for_arrivals(1);
  p_gate.release();
  r.wait(p_group);  // P registered the continuation and finished
  nudge(static_cast<int>(scaled(300, 60)));
  EXPECT_EQ(node::destroyed.load(), 0) << "freed while a continuation that may read it waited";
  t_gate.release();
  r.wait(cont_group);  // g's task, then the continuation
  EXPECT_EQ(mark_seen.load(), live_mark);
  nudge_until(
      r, [&] { return node::destroyed.load() == 1; },
      "the retired resource was not freed after the continuation ran");
}

TEST_P(reclamation_test, stop_releases_everything_still_retired) {
  // Many short lives, each ending right after its work: resources retired by tasks (some freed
  // by reclamation tasks, some still in a worker's list when stop() comes) and from outside.
  // Every resource is retired exactly once; stop() must free all of them, also when the epoch
  // moves on (and a reclamation task is due) while stop() drains.
  const int lives = static_cast<int>(scaled(60, 12));
  for (int life = 0; life < lives; ++life) {
    node::reset();
    {
      auto& r = start_fast_epochs();
      shared_array a(8);
      for (std::size_t i = 0; i < a.slots.size(); ++i) {
        a.slots[i].store(r.make_resource<node>(hints_for(i)));
      }
      const std::size_t ops = scaled(400, 100);
      for (std::size_t k = 0; k < ops; ++k) {
        const std::uint64_t h = mix(k + static_cast<std::uint64_t>(life) * ops);
        const op_kind kind = (h >> 40) % 4 == 0 ? op_kind::replace : op_kind::lookup;
        r.spawn(r.make_task<node_op>(a, h % a.slots.size(), kind));
      }
      r.wait_idle();
      for (auto& s : a.slots) r.retire_resource(s.exchange(nullptr));
      r.stop();
      EXPECT_EQ(a.violations.load(), 0u);
      m_rt.reset();
    }
    ASSERT_EQ(node::destroyed.load(), node::constructed.load()) << "life " << life;
    ASSERT_EQ(live_objects.load(), 0) << "life " << life << ": a task object leaked";
  }
}

/// A resource whose destructor retires another one (a composite that owns a part).
struct holder {
  holder(runtime* r, node* p) : rt(r), part(p) {}
  runtime* rt;
  node* part;
  ~holder() { rt->retire_resource(part); }
};

/// Waits (with the runtime running) until `n` nodes were destroyed; false at the deadline.
bool destroyed_eventually(long n) {
  const auto deadline = std::chrono::steady_clock::now() + eventually;
  while (node::destroyed.load() < n && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return node::destroyed.load() >= n;
}

/// Resources retired by a thread that is not a worker are taken over by a worker: left for
/// stop(), a server's I/O thread retiring them would grow without bound.
TEST(reclamation_external, a_resource_retired_from_outside_is_freed_while_the_runtime_runs) {
  node::reset();
  runtime r({.workers = 2, .epoch_period = std::chrono::microseconds(0)});
  for (int i = 0; i < 3; ++i) r.retire_resource(r.make_resource<node>(hints_for(0)));
  EXPECT_TRUE(destroyed_eventually(3))
      << "resources retired from outside the workers were not freed while the runtime ran";
  EXPECT_TRUE(r.running());
}

/// A worker deactivated after it retired resources reclaims nothing while inactive; the active
/// worker frees them, so they do not wait for its reactivation or for stop().
TEST(reclamation_resize, what_a_deactivated_worker_retired_is_freed_while_it_is_inactive) {
  node::reset();
  runtime r({.workers = 2, .epoch_period = std::chrono::microseconds(0)});
  const int n = 50;
  std::vector<node*> nodes;
  for (int i = 0; i < n; ++i) nodes.push_back(r.make_resource<node>(hints_for(0)));
  const group g = r.make_group();
  auto* retirer = make_fn(r, [&nodes](context& ctx) {
    for (node* o : nodes) ctx.runtime().retire_resource(o);
  });
  retirer->annotate(wid(1));
  r.spawn(retirer, g);
  r.wait(g);
  r.set_active_workers(1);  // worker 1, which holds them, stops running tasks
  // Worker 0 keeps going (the epoch moves only while tasks run or workers go idle).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (node::destroyed.load() < n && std::chrono::steady_clock::now() < deadline) {
    r.spawn([](context&) {});
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_EQ(node::destroyed.load(), n)
      << "resources retired by a worker deactivated since were not freed while it was inactive";
  r.stop();
  EXPECT_EQ(node::destroyed.load(), node::constructed.load());
}

TEST(reclamation_external, a_resource_destructor_may_retire_another_one) {
  node::reset();
  runtime r({.workers = 2, .epoch_period = std::chrono::microseconds(0)});
  // retired from a task: the part is retired on a worker, from the reclamation task
  holder* h = r.make_resource<holder>(hints_for(0), &r, r.make_resource<node>(hints_for(0)));
  const group g = r.make_group();
  r.spawn(make_fn(r, [h](context& ctx) { ctx.runtime().retire_resource(h); }), g);
  r.wait(g);
  EXPECT_TRUE(destroyed_eventually(1)) << "the part retired by a destructor was never freed";
  // retired from outside
  r.retire_resource(r.make_resource<holder>(hints_for(0), &r, r.make_resource<node>(hints_for(0))));
  EXPECT_TRUE(destroyed_eventually(2));
}

/// stop() frees what is still retired on the stopping thread; a destructor may retire another
/// resource there (stop() frees outside the retired list's mutex: holding it, the destructor's
/// retire would deadlock on it).
TEST(reclamation_external, a_resource_destructor_may_retire_another_one_during_stop) {
  node::reset();
  {
    runtime r({.workers = 2});
    for (int i = 0; i < 8; ++i) {
      r.retire_resource(
          r.make_resource<holder>(hints_for(0), &r, r.make_resource<node>(hints_for(0))));
    }
    r.stop();
    EXPECT_EQ(node::destroyed.load(), 8) << "stop() left parts retired by destructors";
    // after stop(), a retire frees at once, from a destructor too
    r.retire_resource(
        r.make_resource<holder>(hints_for(0), &r, r.make_resource<node>(hints_for(0))));
    EXPECT_EQ(node::destroyed.load(), 9);
  }
  EXPECT_EQ(node::destroyed.load(), node::constructed.load());
}

/// A worker that is never idle still frees what was retired: the reclamation task runs behind
/// the tasks queued when it was made. At low priority it would wait for a moment with nothing
/// else to run; a client that keeps the worker's queue fed never gives it one, and the task,
/// counted in its epoch, would keep the epoch from moving for the whole runtime.
/// The freeze is not certain here: a low-priority task also runs when the worker's local queue
/// runs dry between two drains of its inbox, and at low priority this test passed after
/// 0.4-12 s instead of 0.06-0.2 (a closed-loop client saw 0 of 287,230 freed in 3.5 s).
/// It fails on a freeze that lasts its 20 s, and cannot fail for a correct runtime.
TEST(reclamation_busy, a_worker_that_is_never_idle_still_frees_what_was_retired) {
  node::reset();
  {
    runtime r(
        {.workers = 1, .epoch_interval_tasks = 4, .epoch_period = std::chrono::microseconds(0)});
    r.retire_resource(r.make_resource<node>(hints_for(0)));  // from outside: the worker takes it
    std::atomic<int> queued{0};
    const group g = r.make_group();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (node::destroyed.load() == 0 && std::chrono::steady_clock::now() < deadline) {
      if (queued.load() >= 512) continue;
      queued.fetch_add(1);
      r.spawn(
          [&queued](context&) {
            const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
            while (std::chrono::steady_clock::now() < until) {
            }
            queued.fetch_sub(1);
          },
          g);
    }
    const long freed = node::destroyed.load();
    r.wait(g);
    EXPECT_EQ(freed, 1) << "nothing retired was freed in 20 s while the worker was kept busy";
  }
  EXPECT_EQ(node::destroyed.load(), node::constructed.load());
}

#if defined(TESSERA_DEBUG_CHECKS)
/// The interleaving the fences in worker::maybe_reclaim and scheduler::stop() exist for, forced
/// with a test hook (src/runtime/test_hooks.h): an idle worker makes a reclamation task, and
/// before it counts the task, stop() drains (it sees nothing in flight) and asks the workers to
/// exit. A task routed now would never run and the resource would never be freed; the worker
/// must see `stopping` and free it itself. The stress test above reaches this window by chance.
TEST(reclamation_race, a_reclamation_task_made_while_stop_drains_still_frees) {
  node::reset();
  static std::atomic<bool> arrived{false};
  arrived.store(false);
  {
    runtime r(
        {.workers = 1, .epoch_interval_tasks = 4, .epoch_period = std::chrono::microseconds(0)});
    node* n = r.make_resource<node>(hints_for(0));
    const group g = r.make_group();
    r.spawn(make_fn(r, [n](context& ctx) { ctx.runtime().retire_resource(n); }), g);
    r.wait(g);  // n is in the worker's retired list now
    // From here on the worker's idle rounds advance the epoch; a few epochs later its next idle
    // round makes the reclamation task and stops in the hook until stop() asks it to exit.
    detail::test_hooks::reclaim_task_made.store(
        +[](detail::worker& w) {
          arrived.store(true);
          while (!w.exit_requested()) std::this_thread::yield();
        },
        std::memory_order_release);
    const auto deadline = std::chrono::steady_clock::now() + eventually;
    while (!arrived.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const bool reached = arrived.load();
    if (reached) {
      EXPECT_EQ(node::destroyed.load(), 0) << "freed before its reclamation task existed";
      r.stop();  // the hook returns once stop() has drained and raised the exit bit
      EXPECT_EQ(node::destroyed.load(), 1)
          << "a reclamation task made while stop() let the workers exit never ran";
    }
    detail::test_hooks::reclaim_task_made.store(nullptr);
    ASSERT_TRUE(reached) << "the worker never made a reclamation task (the epoch did not advance)";
  }
  EXPECT_EQ(node::destroyed.load(), node::constructed.load());
  EXPECT_EQ(live_objects.load(), 0) << "a task object leaked";
}

/// What the hooks of the test below share with it.
struct slot_race {
  static constexpr std::uint64_t none = ~std::uint64_t{0};
  std::array<std::atomic<bool>, 3> hold_parking{};  // workers held at the start of park()
  std::array<std::atomic<bool>, 3> at_parking{};
  std::atomic<std::uint64_t> read_epoch{none};  // what the spawner read before counting
  std::atomic<bool> spawner_open{false};
  std::atomic<bool> advance_held{false};  // an advance from read_epoch + 3 is held
  std::atomic<bool> advance_open{false};
  static inline slot_race* current = nullptr;
  static inline thread_local bool is_spawner = false;

  slot_race() {
    current = this;
    for (auto& h : hold_parking) h.store(true);
    detail::test_hooks::parking.store(
        +[](detail::worker& w) {
          slot_race& s = *current;
          if (w.index() >= s.hold_parking.size()) return;
          s.at_parking[w.index()].store(true);
          while (s.hold_parking[w.index()].load()) std::this_thread::yield();
        },
        std::memory_order_release);
    detail::test_hooks::epoch_read_for_count.store(
        +[](std::uint64_t e) {
          if (!is_spawner) return;  // the test's other spawns, reclamation tasks
          slot_race& s = *current;
          std::uint64_t expected = none;
          if (!s.read_epoch.compare_exchange_strong(expected, e)) return;  // a second try
          while (!s.spawner_open.load()) std::this_thread::yield();
        },
        std::memory_order_release);
    detail::test_hooks::epoch_advance_checked.store(
        +[](std::uint64_t e) {
          slot_race& s = *current;
          const std::uint64_t read = s.read_epoch.load();
          if (read == none || e != read + 3 || s.advance_held.exchange(true)) return;
          while (!s.advance_open.load()) std::this_thread::yield();
        },
        std::memory_order_release);
  }
  /// Lets every held thread go (also when the test failed half-way).
  void open_all() noexcept {
    for (auto& h : hold_parking) h.store(false);
    spawner_open.store(true);
    advance_open.store(true);
  }
  ~slot_race() {
    open_all();
    detail::test_hooks::epoch_advance_checked.store(nullptr);
    detail::test_hooks::epoch_read_for_count.store(nullptr);
    detail::test_hooks::parking.store(nullptr);
    current = nullptr;
  }
  slot_race(const slot_race&) = delete;
  slot_race& operator=(const slot_race&) = delete;
};

/// The interleaving epoch_clock::count_in_current_slot exists for, forced with test hooks: a thread
/// spawning a task from outside reads the epoch E and is held before it counts the task; the
/// epoch moves to E+3, and an advance finds slot E % 4 balanced (nothing counted there yet) and is
/// held before its compare-and-swap to E+4. Only then is the task counted. Counted in the slot it
/// read, E % 4, which the advance had just found empty, the task would pass for an operation of
/// epoch E+4, and a resource it had read, retired at E+3, would be freed at E+7 while it still
/// held it (no slot from E+1 to E+3 would wait for it). Counted in the slot of the
/// epoch it finds after counting, E+3, it keeps the epoch below E+7 until it ends.
/// Workers: 0 moves the epoch, 1 runs the task, 2 retires the resource (and would free it).
TEST(reclamation_race, an_operation_counted_after_an_advance_checked_its_slot_keeps_what_it_reads) {
  node::reset();
  slot_race s;
  const auto deadline = std::chrono::steady_clock::now() + eventually;
  auto before_deadline = [&] { return std::chrono::steady_clock::now() < deadline; };
  {
    runtime r(
        {.workers = 3, .epoch_interval_tasks = 4, .epoch_period = std::chrono::microseconds(0)});
    auto& sched = r.internals();
    std::atomic<node*> link{r.make_resource<node>(hints_for(0))};
    gate reader_gate;
    std::atomic<std::int64_t> mark_seen{0};
    // All three workers held on their way to park: nothing moves the epoch while the spawner
    // reads it.
    for (auto& a : s.at_parking) {
      while (!a.load() && before_deadline()) std::this_thread::yield();
    }
    const std::uint64_t e0 = sched.global_epoch();
    const group reader_group = r.make_group();
    auto* reader = make_fn(r, [&, tok = live_token{}](context&) {
      node* p = link.load(std::memory_order_acquire);
      reader_gate.pass();  // worker 2 retires p meanwhile, and the epoch moves on
      mark_seen.store(racy_load(p->mark));
    });
    reader->annotate(wid(1));
    std::thread spawner([&] {
      slot_race::is_spawner = true;
      r.spawn(reader, reader_group);
    });
    while (s.read_epoch.load() == slot_race::none && before_deadline()) std::this_thread::yield();
    EXPECT_EQ(s.read_epoch.load(), e0) << "the epoch moved while every worker was held";
    // Worker 0 alone moves the epoch three times, then checks slot e0 % 4 for the fourth move.
    s.hold_parking[0].store(false);
    // (No group wait: the held advance may be the periodic one after a nudge, before the
    // nudge's group learns that it completed.)
    // A nudge may run after the loop ended (the advance was held first): its counter lives as
    // long as the runtime's drain (a counter per round, on the loop's stack, was written after
    // its scope ended: AddressSanitizer's stack-use-after-scope, once in a fresh clone's run).
    std::atomic<unsigned> nudges_run{0};
    while (!s.advance_held.load() && before_deadline()) {
      const unsigned before = nudges_run.load();
      auto* t = make_fn(r, [&nudges_run, tok = live_token{}](context&) { nudges_run.fetch_add(1); });
      t->annotate(wid(0));
      r.spawn(t);
      while (nudges_run.load() == before && !s.advance_held.load()) std::this_thread::yield();
    }
    const bool raced = s.advance_held.load();
    EXPECT_TRUE(raced) << "no advance from epoch " << e0 + 3 << " was held";
    s.spawner_open.store(true);  // the spawner counts the reader now
    spawner.join();
    s.hold_parking[1].store(false);
    s.hold_parking[2].store(false);
    if (raced) {
      reader_gate.wait_for_arrivals(1);
      // Retired while the advance to e0 + 4 is held (at e0 + 3, unless a worker that found slot
      // e0 % 4 still balanced moved the epoch on).
      const group retire_group = r.make_group();
      auto* retirer = make_fn(r, [&, tok = live_token{}](context& ctx) {
        ctx.runtime().retire_resource(link.exchange(nullptr));
      });
      retirer->annotate(wid(2));
      r.spawn(retirer, retire_group);
      r.wait(retire_group);
      s.advance_open.store(true);
      // Later operations finish on workers 0 and 2; the epoch moves as far as the reader lets it.
      for (int round = 0; round < static_cast<int>(scaled(300, 60)) && node::destroyed.load() == 0;
           ++round) {
        const group g = r.make_group();
        for (const unsigned w : {0u, 2u}) {
          auto* t = make_fn(r, [tok = live_token{}](context&) {});
          t->annotate(wid(w));
          r.spawn(t, g);
        }
        r.wait(g);
      }
      EXPECT_EQ(node::destroyed.load(), 0) << "freed while a task that had read it still ran";
    }
    s.open_all();
    reader_gate.release();
    r.wait(reader_group);
    if (raced) {
      EXPECT_EQ(mark_seen.load(), live_mark);
    } else {
      r.retire_resource(link.exchange(nullptr));
    }
    r.stop();
  }
  EXPECT_EQ(node::destroyed.load(), node::constructed.load());
  EXPECT_EQ(live_objects.load(), 0) << "a task object leaked";
}

/// Worker 1 held by the idle_polling hook, once the task it ran (A) has ended.
struct idle_poll_race {
  std::atomic<bool> a_done{false};
  std::atomic<bool> at_poll{false};
  std::atomic<bool> poll_open{false};
  static inline idle_poll_race* current = nullptr;

  idle_poll_race() {
    current = this;
    detail::test_hooks::idle_polling.store(
        +[](detail::worker& w) {
          idle_poll_race& s = *current;
          if (w.index() != 1 || !s.a_done.load() || s.at_poll.exchange(true)) return;
          while (!s.poll_open.load()) std::this_thread::yield();
        },
        std::memory_order_release);
  }
  ~idle_poll_race() {
    poll_open.store(true);
    detail::test_hooks::idle_polling.store(nullptr);
    current = nullptr;
  }
  idle_poll_race(const idle_poll_race&) = delete;
  idle_poll_race& operator=(const idle_poll_race&) = delete;
};

/// A worker that ends a task A and, going idle, finds a long task B in its quick poll must have
/// published A's completion first: left unpublished while B runs, A's epoch slot stays
/// unbalanced, the epoch stops at A's epoch + 3, and a resource retired after A started (by
/// another worker, after every operation that could see it ended) is not freed until B ends.
/// (Forced with a hook: worker 1 is held just before its quick poll, B is queued for it, then
/// the poll finds B.) The task_tree_race test stalled so in about 1 run in 20 under load.
TEST(reclamation_race, a_task_found_by_the_idle_poll_does_not_hold_back_earlier_completions) {
  node::reset();
  idle_poll_race s;
  const auto deadline = std::chrono::steady_clock::now() + eventually;
  auto before_deadline = [&] { return std::chrono::steady_clock::now() < deadline; };
  {
    runtime r(
        {.workers = 2, .epoch_interval_tasks = 4, .epoch_period = std::chrono::microseconds(0)});
    auto& sched = r.internals();
    auto nudge_worker_0 = [&] {
      const group g = r.make_group();
      auto* t = make_fn(r, [tok = live_token{}](context&) {});
      t->annotate(wid(0));
      r.spawn(t, g);
      r.wait(g);
    };
    // A on worker 1; then worker 1 is held on its way to the quick poll.
    auto* a = make_fn(r, [&s, tok = live_token{}](context&) { s.a_done.store(true); });
    a->annotate(wid(1));
    r.spawn(a);
    while (!s.at_poll.load() && before_deadline()) std::this_thread::yield();
    ASSERT_TRUE(s.at_poll.load()) << "worker 1 never went idle after A";
    // Worker 0 retires a resource (no task sees it), in A's epoch or later.
    std::atomic<std::uint64_t> retired_by{0};
    const group retire_group = r.make_group();
    auto* retirer = make_fn(r, [&, tok = live_token{}](context& ctx) {
      ctx.runtime().retire_resource(ctx.runtime().make_resource<node>(hints_for(0)));
      retired_by.store(sched.global_epoch());
    });
    retirer->annotate(wid(0));
    r.spawn(retirer, retire_group);
    r.wait(retire_group);
    // B begins after the retirement: it keeps the epoch at most at its own + 3, late enough.
    while (sched.global_epoch() <= retired_by.load() && before_deadline()) nudge_worker_0();
    ASSERT_GT(sched.global_epoch(), retired_by.load()) << "the epoch did not advance";
    gate b_gate;
    const group b_group = r.make_group();
    auto* b = make_fn(r, [&b_gate, tok = live_token{}](context&) { b_gate.pass(); });
    b->annotate(wid(1));
    r.spawn(b, b_group);  // in worker 1's inbox now: its quick poll finds it
    s.poll_open.store(true);
    b_gate.wait_for_arrivals(1);
    while (node::destroyed.load() == 0 && before_deadline()) nudge_worker_0();
    EXPECT_EQ(node::destroyed.load(), 1)
        << "the resource was not freed while B ran (epoch " << sched.global_epoch()
        << ", retired by " << retired_by.load() << ")";
    b_gate.release();
    r.wait(b_group);
    r.stop();
  }
  EXPECT_EQ(node::destroyed.load(), node::constructed.load());
  EXPECT_EQ(live_objects.load(), 0) << "a task object leaked";
}

/// The same hole without idling: a worker that ends A and takes B, of another group, from its
/// pool flushes A's group batch before B runs (B may run long, worker::from_pool); its epoch
/// counts must go out with it. Left unpublished while B runs (the next periodic publish is
/// epoch_interval_tasks tasks away), A's slot stays unbalanced and a resource retired after A
/// started is not freed until B ends. Forced without a hook: worker 1 is held by a task G while
/// A and then B are queued for it, so it runs G, A and B back to back.
TEST(reclamation_race, a_task_of_another_group_from_the_pool_does_not_hold_back_earlier_completions) {
  node::reset();
  const auto deadline = std::chrono::steady_clock::now() + eventually;
  auto before_deadline = [&] { return std::chrono::steady_clock::now() < deadline; };
  gate g_gate;
  gate b_gate;
  {
    runtime r({.workers = 2,
               .epoch_interval_tasks = 1000,  // no periodic publish on worker 1 in this test
               .epoch_period = std::chrono::microseconds(0)});
    struct open_at_exit {  // an assertion's return must not leave worker 1 held
      gate& g;
      gate& b;
      ~open_at_exit() {
        g.release();
        b.release();
      }
    } guard{g_gate, b_gate};
    auto& sched = r.internals();
    auto nudge_worker_0 = [&] {
      const group g = r.make_group();
      auto* t = make_fn(r, [tok = live_token{}](context&) {});
      t->annotate(wid(0));
      r.spawn(t, g);
      r.wait(g);
    };
    const group g_group = r.make_group();
    auto* g_task = make_fn(r, [&g_gate, tok = live_token{}](context&) { g_gate.pass(); });
    g_task->annotate(wid(1));
    r.spawn(g_task, g_group);
    g_gate.wait_for_arrivals(1);
    std::atomic<bool> a_ran{false};
    const group a_group = r.make_group();
    auto* a = make_fn(r, [&a_ran, tok = live_token{}](context&) { a_ran.store(true); });
    a->annotate(wid(1));
    r.spawn(a, a_group);  // behind G in worker 1's inbox
    // Worker 0 retires a resource (no task sees it), in A's epoch or later.
    std::atomic<std::uint64_t> retired_by{0};
    const group retire_group = r.make_group();
    auto* retirer = make_fn(r, [&, tok = live_token{}](context& ctx) {
      ctx.runtime().retire_resource(ctx.runtime().make_resource<node>(hints_for(0)));
      retired_by.store(sched.global_epoch());
    });
    retirer->annotate(wid(0));
    r.spawn(retirer, retire_group);
    r.wait(retire_group);
    // B begins after the retirement: it keeps the epoch at most at its own + 3, late enough.
    while (sched.global_epoch() <= retired_by.load() && before_deadline()) nudge_worker_0();
    ASSERT_GT(sched.global_epoch(), retired_by.load()) << "the epoch did not advance";
    const group b_group = r.make_group();
    auto* b = make_fn(r, [&b_gate, tok = live_token{}](context&) { b_gate.pass(); });
    b->annotate(wid(1));
    r.spawn(b, b_group);  // behind A
    g_gate.release();
    b_gate.wait_for_arrivals(1);
    EXPECT_TRUE(a_ran.load()) << "B ran before A";
    while (node::destroyed.load() == 0 && before_deadline()) nudge_worker_0();
    EXPECT_EQ(node::destroyed.load(), 1)
        << "the resource was not freed while B ran (epoch " << sched.global_epoch()
        << ", retired by " << retired_by.load() << ")";
    b_gate.release();
    r.wait(b_group);
    r.wait(a_group);
    r.wait(g_group);
    r.stop();
  }
  EXPECT_EQ(node::destroyed.load(), node::constructed.load());
  EXPECT_EQ(live_objects.load(), 0) << "a task object leaked";
}

#endif

TESSERA_INSTANTIATE_WORKER_COUNTS(reclamation_test);
TESSERA_INSTANTIATE_MULTI_WORKER_COUNTS(reclamation_test_two_workers);
INSTANTIATE_TEST_SUITE_P(three, reclamation_test_three_workers, testing::Values(3u),
                         worker_count_name);

}  // namespace
}  // namespace tessera::test
