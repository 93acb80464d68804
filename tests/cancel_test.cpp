// runtime::cancel(g): tasks of g not started are dropped (destroyed, never run), also those
// spawned into g afterwards; running ones finish and see context::cancelled(); the group still
// completes and closes as usual; a loop holding g skips its pieces not started; a slot reused
// after a cancelled group is an ordinary group again.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "test_support.h"
#include "tessera/tessera.h"

namespace tessera::test {
namespace {

class cancel_test : public runtime_fixture {};

/// Holds workers `first` .. workers()-1 at `gt`, each in a task of `g`, and returns once all
/// arrived; each task that sees its group cancelled once released counts in `saw_cancel`.
void hold_workers(runtime& r, gate& gt, group g, unsigned first,
                  std::atomic<int>* saw_cancel = nullptr) {
  for (unsigned w = first; w < r.workers(); ++w) {
    auto* t = make_fn(r, [&gt, saw_cancel, tok = live_token{}](context& ctx) {
      gt.pass();
      if (saw_cancel != nullptr && ctx.cancelled()) saw_cancel->fetch_add(1);
    });
    t->annotate(wid(w));
    r.spawn(t, g);
  }
  gt.wait_for_arrivals(r.workers() - first);
}

TEST_P(cancel_test, tasks_not_started_are_dropped_and_running_ones_see_it) {
  auto& r = start();
  const std::uint64_t executed_before = r.statistics().total().executed;
  gate gt;
  std::atomic<int> saw_cancel{0};
  std::atomic<int> ran{0};
  const group g = r.make_group();
  hold_workers(r, gt, g, 0, &saw_cancel);
  for (int i = 0; i < 1000; ++i) r.spawn([&ran, tok = live_token{}](context&) { ran.fetch_add(1); }, g);
  EXPECT_TRUE(r.cancel(g));
  EXPECT_FALSE(r.cancel(g)) << "a second cancel has nothing left to cancel";
  // spawned after the cancellation: dropped too
  for (int i = 0; i < 10; ++i) r.spawn([&ran, tok = live_token{}](context&) { ran.fetch_add(1); }, g);
  gt.release();
  r.wait(g);  // completes as any group does
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(saw_cancel.load(), static_cast<int>(r.workers()));
  EXPECT_EQ(live_objects.load(), 0) << "a dropped task was not destroyed";
  r.wait_idle();
  const worker_statistics s = r.statistics().total();
  EXPECT_EQ(s.cancelled, 1010u);
  EXPECT_EQ(s.executed - executed_before, r.workers()) << "dropped tasks counted as executed";
}

// The other workers are held at a gate until the children exist, so that each of them is inside
// a task when the cancellation is made and looks at it before taking the next task.
TEST_P(cancel_test, a_task_cancels_its_own_group_and_the_children_it_spawns_then_are_dropped) {
  auto& r = start();
  gate gt;
  const group held = r.make_group();
  hold_workers(r, gt, held, 1);  // worker 0 runs the task below
  std::atomic<int> children{0};
  std::atomic<bool> saw{false};
  const group g = r.make_group();
  auto* first = make_fn(r, [&, g](context& ctx) {
    EXPECT_FALSE(ctx.cancelled());
    EXPECT_TRUE(ctx.runtime().cancel(g));  // its own group
    saw.store(ctx.cancelled());
    for (int i = 0; i < 100; ++i) {
      ctx.spawn([&children, tok = live_token{}](context&) { children.fetch_add(1); });
    }
    gt.release();
  });
  first->annotate(wid(0));
  r.spawn(first, g);
  r.wait(g);
  r.wait(held);
  EXPECT_TRUE(saw.load());
  EXPECT_EQ(children.load(), 0);
}

// Workers 1.. are held at a gate while the task on worker 0 fills the inner group and cancels
// it, so none of inner's tasks can have started: they are all dropped.
TEST_P(cancel_test, a_cancelled_group_still_continues_and_reports_an_earlier_exception) {
  auto& r = start();
  gate gt;
  const group held = r.make_group();
  hold_workers(r, gt, held, 1);  // worker 0 runs the task below
  std::atomic<bool> continued{false};
  std::atomic<int> ran{0};
  const group outer = r.make_group();
  auto* first = make_fn(r, [&](context& ctx) {
    const group inner = ctx.runtime().make_group();
    ctx.spawn([](context&) { throw std::runtime_error("before the cancel"); });  // outer's
    for (int i = 0; i < 200; ++i) {
      auto* t = make_fn(ctx, [&ran, tok = live_token{}](context&) { ran.fetch_add(1); });
      t->annotate(inner);
      ctx.spawn(t);
    }
    EXPECT_TRUE(ctx.runtime().cancel(inner));
    ctx.when_done(inner, [&continued](context&) { continued.store(true); });
    gt.release();
  });
  first->annotate(wid(0));
  r.spawn(first, outer);
  EXPECT_THROW(r.wait(outer), std::runtime_error);
  r.wait(held);
  EXPECT_TRUE(continued.load());
  EXPECT_EQ(ran.load(), 0);
}

/// Returns itself as its follow-up for ever (a poller): each turn is a new start, so a cancel of
/// its group drops it at its next turn.
class poller final : public counted_task {
 public:
  explicit poller(std::atomic<int>& turns) noexcept : m_turns(&turns) {}
  task* execute(context&) override {
    m_turns->fetch_add(1);
    return this;
  }

 private:
  std::atomic<int>* m_turns;
};

TEST_P(cancel_test, a_task_that_returns_itself_for_ever_is_dropped_at_its_next_turn) {
  auto& r = start();
  std::atomic<int> turns{0};
  const group g = r.make_group();
  r.spawn(r.make_task<poller>(turns), g);
  while (turns.load() < 1000) std::this_thread::yield();
  EXPECT_TRUE(r.cancel(g));
  r.wait(g);  // returns: the poller was dropped (and destroyed: the fixture counts it)
  const int after = turns.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(turns.load(), after);
}

TEST_P(cancel_test, cancel_of_a_completed_or_unnamed_group) {
  auto& r = start();
  const group g = r.make_group();
  r.spawn([](context&) {}, g);
  r.wait(g);
  EXPECT_FALSE(r.cancel(g)) << "completed and released: nothing to cancel";
  EXPECT_THROW(r.cancel(group{}), std::logic_error);
  // the slot's next group (maybe g's) is an ordinary one
  std::atomic<int> ran{0};
  const group next = r.make_group();
  for (int i = 0; i < 100; ++i) r.spawn([&ran](context&) { ran.fetch_add(1); }, next);
  r.wait(next);
  EXPECT_EQ(ran.load(), 100);
}

// The first piece to run cancels the loop's group; every other piece waits until the cancel
// returned. A participant that saw it return sees the cancellation at its next piece, so each of
// the (at most active_workers()) participants runs at most one piece: the loop's other 99,99x
// pieces are skipped, whatever the scheduling (no timing in the assertion).
TEST_P(cancel_test, a_loop_holding_a_cancelled_group_skips_its_pieces_not_started) {
  auto& r = start();
  const std::size_t n = 100'000;
  std::atomic<std::size_t> ran{0};
  std::atomic<bool> cancel_returned{false};
  std::atomic<bool> continued{false};
  const group outer = r.make_group();
  r.spawn(
      [&](context& ctx) {
        const group loop = ctx.runtime().make_group();
        runtime* rt = &ctx.runtime();
        parallel_for(
            ctx, loop, 0, n,
            [&ran, &cancel_returned, rt, loop](std::size_t) {
              if (ran.fetch_add(1) == 0) {
                EXPECT_TRUE(rt->cancel(loop));
                cancel_returned.store(true, std::memory_order_release);
                return;
              }
              while (!cancel_returned.load(std::memory_order_acquire)) std::this_thread::yield();
            },
            {.grain = 1});
        ctx.when_done(loop, [&continued](context&) { continued.store(true); });
      },
      outer);
  r.wait(outer);
  EXPECT_TRUE(continued.load());
  EXPECT_LE(ran.load(), std::size_t{r.workers()}) << "pieces ran after the cancellation was seen";
}

// One-index pieces before the cancellation: a participant's claims have grown to batches of
// many pieces. The piece that cancels is the last its thread starts (each piece of a batch is
// tested before it starts, as a piece claimed alone is); others stop at their next piece.
TEST_P(cancel_test, a_cancellation_skips_the_rest_of_a_batch_of_short_pieces) {
  auto& r = start();
  const std::size_t n = 200'000;
  const std::size_t target = n / 4 + 17;
  std::atomic<std::thread::id> canceller{};
  std::atomic<bool> after_cancel_on_canceller{false};
  std::atomic<std::size_t> ran{0};
  std::atomic<bool> continued{false};
  const group outer = r.make_group();
  r.spawn(
      [&](context& ctx) {
        const group loop = ctx.runtime().make_group();
        runtime* rt = &ctx.runtime();
        parallel_for(
            ctx, loop, 0, n,
            [&, rt, loop](std::size_t i) {
              if (canceller.load() == std::this_thread::get_id()) {
                after_cancel_on_canceller.store(true);
              }
              ran.fetch_add(1);
              if (i == target) {
                canceller.store(std::this_thread::get_id());
                EXPECT_TRUE(rt->cancel(loop));
              }
            },
            {.grain = 1});
        ctx.when_done(loop, [&continued](context&) { continued.store(true); });
      },
      outer);
  r.wait(outer);
  EXPECT_TRUE(continued.load());
  EXPECT_FALSE(after_cancel_on_canceller.load())
      << "a piece ran after the cancellation on the thread that cancelled";
  EXPECT_LE(ran.load(), n);
  if (r.workers() == 1) {
    EXPECT_EQ(ran.load(), target + 1) << "one worker: the pieces in index order, then none";
  }
}

// A body with the context runs in pieces that are tasks of the loop's group: dropped, they
// still free the state they share, and the body is gone before the group completes.
TEST_P(cancel_test, a_loop_of_tasks_whose_group_is_cancelled_frees_its_body) {
  auto& r = start();
  std::atomic<int> ran{0};
  std::atomic<long> live_at_continuation{-1};
  const group outer = r.make_group();
  r.spawn(
      [&](context& ctx) {
        const group loop = ctx.runtime().make_group();
        parallel_for(
            ctx, loop, 0, 1000,
            [&ran, tok = live_token{}](context&, std::size_t f, std::size_t l) {
              ran.fetch_add(static_cast<int>(l - f));
            },
            {.grain = 1});
        // The loop's first piece waits on this worker, which answers no thief while this task
        // runs: it has not started.
        EXPECT_TRUE(ctx.runtime().cancel(loop));
        ctx.when_done(loop, [&](context&) { live_at_continuation.store(live_objects.load()); });
      },
      outer);
  r.wait(outer);
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(live_at_continuation.load(), 0) << "the body outlived its loop's group";
}

// A group cancelled and never closed stays "in force" (it cannot complete without its one wait),
// so the workers keep checking every task; the runtime still runs other groups' tasks, resizes,
// and stops without hanging (the destructor then reports the group left open).
TEST_P(cancel_test, a_cancellation_in_force_does_not_stop_other_work_resizing_or_stop) {
  auto& r = start();
  const group left_open = r.make_group();
  gate gt;
  std::atomic<int> saw_cancel{0};
  hold_workers(r, gt, left_open, 0, &saw_cancel);
  EXPECT_TRUE(r.cancel(left_open));
  gt.release();
  for (int round = 0; round < 20; ++round) {
    r.set_active_workers(1 + round % r.workers());
    std::atomic<int> ran{0};
    const group g = r.make_group();
    for (int i = 0; i < 100; ++i) r.spawn([&ran](context&) { ran.fetch_add(1); }, g);
    r.wait(g);
    ASSERT_EQ(ran.load(), 100) << "round " << round;
  }
  r.set_active_workers(r.workers());
  r.stop();  // left_open was never waited for: stop() returns all the same
  EXPECT_EQ(saw_cancel.load(), static_cast<int>(r.workers()));
}

// Cancellations racing with the group's own progress and completion: every task either ran or
// was dropped, each exactly once, and every one was destroyed before the wait returned; groups
// made afterwards (reusing the slots) run every task.
TEST_P(cancel_test, cancels_racing_with_the_groups_progress_lose_nothing) {
  auto& r = start();
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> ran{0};
    const group g = r.make_group();
    constexpr int tasks = 300;
    std::thread canceller([&r, g, round] {
      for (int spin = 0; spin < round % 50; ++spin) std::this_thread::yield();
      r.cancel(g);
    });
    for (int i = 0; i < tasks; ++i) {
      r.spawn([&ran, tok = live_token{}](context&) { ran.fetch_add(1); }, g);
    }
    canceller.join();
    r.wait(g);
    ASSERT_LE(ran.load(), tasks) << "round " << round;
    ASSERT_EQ(live_objects.load(), 0) << "round " << round;
  }
  r.wait_idle();
  const worker_statistics before = r.statistics().total();
  std::atomic<int> ran{0};
  const group g = r.make_group();
  for (int i = 0; i < 1000; ++i) r.spawn([&ran](context&) { ran.fetch_add(1); }, g);
  r.wait(g);
  r.wait_idle();
  EXPECT_EQ(ran.load(), 1000);
  EXPECT_EQ(r.statistics().total().cancelled, before.cancelled);
}

TESSERA_INSTANTIATE_WORKER_COUNTS(cancel_test);

}  // namespace
}  // namespace tessera::test
