// Programmer errors that debug checks (TESSERA_DEBUG_CHECKS: the dev, asan and tsan presets) turn
// into a clear error instead of a corrupted queue: a task handed to the runtime twice — spawned
// twice, spawned while it runs, spawned and also returned as a follow-up or given to when_done.
// The runtime owns a task from its spawn until it is done; the first hand-over wins and the task
// runs exactly once.
#include <array>
#include <atomic>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "test_support.h"
#include "tessera/tessera.h"

#if defined(TESSERA_DEBUG_CHECKS)

namespace tessera::test {
namespace {

class misuse_test : public runtime_fixture {};

/// Rethrows what wait(g) throws as a logic_error's message ("" if nothing was thrown).
std::string error_of_wait(runtime& r, group g) {
  try {
    r.wait(g);
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "";
}

TEST_P(misuse_test, spawning_a_running_task_again_from_outside_is_an_error) {
  auto& r = start();
  gate held;
  std::atomic<int> runs{0};
  const group g = r.make_group();
  auto* t = make_fn(r, [&, tok = live_token{}](context&) {
    runs.fetch_add(1);
    held.pass();
  });
  r.spawn(t, g);
  held.wait_for_arrivals(1);  // t runs (and is alive) until the gate opens
  try {
    r.spawn(t);
    ADD_FAILURE() << "the second spawn was accepted";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("spawned already"), std::string::npos) << e.what();
  }
  held.release();
  r.wait(g);
  EXPECT_EQ(runs.load(), 1);
}

/// Runs once in the group it was spawned into, then moves itself to `to` and returns itself (or
/// nothing).
class group_mover final : public counted_task {
 public:
  group_mover(group from, group to, bool return_itself, std::atomic<int>& runs) noexcept
      : m_from(from), m_to(to), m_return_itself(return_itself), m_runs(&runs) {}
  task* execute(context&) override {
    m_runs->fetch_add(1);
    annotate(m_from);  // its own group again: allowed
    annotate(m_to);
    return m_return_itself ? this : nullptr;
  }

 private:
  group m_from;
  group m_to;
  bool m_return_itself;
  std::atomic<int>* m_runs;
};

TEST_P(misuse_test, changing_the_group_of_a_spawned_task_is_an_error) {
  // A task counts in the group it was spawned into until it is done; moving itself to another
  // group (then returning itself, or nothing, or spawning) would leave one group a count short
  // and the other one over, and a wait would never return. The error reaches the task's own
  // group, both groups complete, and the task ran once.
  auto& r = start();
  for (const bool return_itself : {true, false}) {
    std::atomic<int> runs{0};
    const group g1 = r.make_group();
    const group g2 = r.make_group();
    r.spawn(r.make_task<group_mover>(g1, g2, return_itself, runs), g1);
    EXPECT_NE(error_of_wait(r, g1).find("annotate(group) on a task that was spawned already"),
              std::string::npos);
    EXPECT_EQ(error_of_wait(r, g2), "");
    r.wait_idle();
    EXPECT_EQ(runs.load(), 1);
  }
}

/// One worker: a child spawned by a task stays queued behind it until the task returns, so the
/// child is alive when the task hands it over a second time (with more workers another one could
/// already run and free it, and the second hand-over would read freed memory).
class misuse_one_worker : public runtime_fixture {};

TEST_P(misuse_one_worker, spawning_a_child_twice_is_an_error_and_it_runs_once) {
  auto& r = start();
  std::atomic<int> child_runs{0};
  const group g = r.make_group();
  r.spawn(
      [&, tok = live_token{}](context& ctx) {
        auto* child = make_fn(ctx, [&, tok2 = live_token{}](context&) { child_runs.fetch_add(1); });
        ctx.spawn(child);
        ctx.spawn(child);
      },
      g);
  EXPECT_NE(error_of_wait(r, g).find("spawn of a task that was spawned already"),
            std::string::npos);
  EXPECT_EQ(child_runs.load(), 1);
}

TEST_P(misuse_one_worker, returning_a_spawned_task_as_follow_up_is_an_error_and_it_runs_once) {
  auto& r = start();
  std::atomic<int> child_runs{0};
  const group g = r.make_group();
  r.spawn(
      [&, tok = live_token{}](context& ctx) -> task* {
        auto* child = make_fn(ctx, [&, tok2 = live_token{}](context&) { child_runs.fetch_add(1); });
        ctx.spawn(child);
        return child;  // the runtime holds it already
      },
      g);
  EXPECT_NE(error_of_wait(r, g).find("follow-up of a task that was spawned already"),
            std::string::npos);
  EXPECT_EQ(child_runs.load(), 1);
}

TEST_P(misuse_one_worker, when_done_with_a_spawned_continuation_is_an_error) {
  auto& r = start();
  std::atomic<int> continuation_runs{0};
  const group outer = r.make_group();
  r.spawn(
      [&, tok = live_token{}](context& ctx) {
        const group inner = ctx.runtime().make_group();
        auto* cont =
            make_fn(ctx, [&, tok2 = live_token{}](context&) { continuation_runs.fetch_add(1); });
        ctx.spawn(cont);
        try {
          ctx.when_done(inner, cont);  // throws: cont belongs to the runtime since its spawn
        } catch (...) {
          ctx.runtime().detach(inner);  // else the runtime reports it never waited for at its end
          throw;
        }
      },
      outer);
  EXPECT_NE(error_of_wait(r, outer).find("when_done of a task that was spawned already"),
            std::string::npos);
  EXPECT_EQ(continuation_runs.load(), 1);
}

// destroy_resource is noexcept too: freeing a resource twice, or one that was retired (the epochs
// free it later), stops the process with a message instead of corrupting the heap.
TEST(misuse_death_test, destroying_a_resource_twice_or_after_retiring_it_stops_the_process) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  struct counter {
    long value = 0;
  };
  EXPECT_DEATH(
      {
        runtime r({.workers = 1});
        auto* c = r.make_resource<counter>(resource_hints{});
        r.destroy_resource(c);
        r.destroy_resource(c);
      },
      "destroy_resource of memory that make_resource did not return, or of a resource destroyed "
      "or retired already");
  EXPECT_DEATH(
      {
        runtime r({.workers = 1});
        auto* c = r.make_resource<counter>(resource_hints{});
        r.retire_resource(c);
        r.destroy_resource(c);
      },
      "destroyed or retired already");
}

TEST(misuse_death_test, discarding_a_spawned_task_stops_the_process_with_a_message) {
  // discard is noexcept (it is how a task made but never spawned is given back), so the check
  // aborts. The runtime lives in the child process of the death test only.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        runtime r({.workers = 1});
        gate held;
        auto* t = make_fn(r, [&](context&) { held.pass(); });
        r.spawn(t);
        held.wait_for_arrivals(1);
        r.discard(t);
      },
      "discard of a task that was spawned");
}

struct plain {
  int value;
};

/// Runs once unannotated, then annotates itself with `p` and returns itself.
class self_annotating final : public counted_task {
 public:
  explicit self_annotating(plain* p) noexcept : m_p(p) {}
  task* execute(context&) override {
    if (m_ran) return nullptr;
    m_ran = true;
    annotate_resource(m_p, access::write);
    return this;
  }

 private:
  plain* m_p;
  bool m_ran = false;
};

/// A resource annotation on memory that make_resource did not make: the runtime would read a
/// primitive and a pool index out of whatever lies before it. An error at the spawn instead,
/// from outside (the task stays the caller's), from a task and as a follow-up (both reach the
/// group's waiter).
TEST_P(misuse_test, annotate_resource_on_memory_make_resource_did_not_make_is_an_error) {
  auto& r = start();
  // The 64 bytes before `p` are readable (zeros): under ASan too, the check reads no redzone.
  alignas(64) static std::array<std::byte, 256> memory{};
  auto* p = reinterpret_cast<plain*>(memory.data() + 128);
  std::atomic<int> ran{0};
  auto* t = make_fn(r, [&ran, tok = live_token{}](context&) { ran.fetch_add(1); });
  t->annotate_resource(p, access::write);
  const std::string error = refused_spawn(r, t);
  EXPECT_NE(error.find("make_resource"), std::string::npos) << "'" << error << "'";
  const group g = r.make_group();
  r.spawn(
      [p, &ran](context& ctx) {
        auto* c = make_fn(ctx, [&ran, tok = live_token{}](context&) { ran.fetch_add(1); });
        c->annotate_resource(p, access::read);
        try {
          ctx.spawn(c);
        } catch (...) {
          ctx.runtime().discard(c);
          throw;
        }
      },
      g);
  EXPECT_NE(error_of_wait(r, g).find("make_resource"), std::string::npos);
  // A task that re-annotates itself (a traversal's next step) and returns itself.
  const group g2 = r.make_group();
  r.spawn(r.make_task<self_annotating>(p), g2);
  EXPECT_NE(error_of_wait(r, g2).find("make_resource"), std::string::npos);
  // A new task returned as the follow-up: the runtime's from the return on, so it is freed (the
  // fixture's live-object count finds a leak).
  const group g3 = r.make_group();
  r.spawn(
      [p, &ran](context& ctx) -> task* {
        auto* f = make_fn(ctx, [&ran, tok = live_token{}](context&) { ran.fetch_add(1); });
        f->annotate_resource(p, access::write);
        return f;
      },
      g3);
  EXPECT_NE(error_of_wait(r, g3).find("make_resource"), std::string::npos);
  r.wait_idle();
  EXPECT_EQ(ran.load(), 0);
}

/// Declares validates_first (tessera/task.h) and keeps the promise or not, as told.
class promising_reader final : public counted_task {
 public:
  static constexpr bool validates_first = true;
  enum class how {
    change_then_validate,
    change_and_never_validate,
    change_and_hand_over,
    validate_then_change
  };
  promising_reader(plain* obj, how h, std::atomic<int>& done) : m_how(h), m_done(&done) {
    annotate_resource(obj, access::read);
  }

  task* execute(context& ctx) override {
    switch (m_how) {
      case how::change_then_validate:
        ++m_step;
        if (!ctx.validate()) return nullptr;
        break;
      case how::change_and_never_validate: ++m_step; break;
      case how::change_and_hand_over:
        ++m_step;
        return make_fn(ctx, [tok = live_token{}](context&) {});
      case how::validate_then_change:
        if (!ctx.validate()) return nullptr;
        if (++m_step == 1) return this;  // again, re-annotated as it is
        break;
    }
    m_done->fetch_add(1);
    return nullptr;
  }

 private:
  how m_how;
  std::atomic<int>* m_done;
  unsigned m_step = 0;
};

/// A task that declares validates_first and changes itself before validating would be rerun
/// changed after a failed read: with debug checks that is an error for its group's waiter,
/// whether the read failed or not, and the runtime keeps running.
TEST_P(misuse_test, a_task_that_declares_validates_first_and_changes_first_is_an_error) {
  auto& r = start();
  auto* obj = r.make_resource<plain>({.primitive = primitive::optimistic_latch});
  using how = promising_reader::how;
  std::atomic<int> done{0};
  for (how h :
       {how::change_then_validate, how::change_and_never_validate, how::change_and_hand_over}) {
    const group g = r.make_group();
    r.spawn(r.make_task<promising_reader>(obj, h, done), g);
    EXPECT_NE(error_of_wait(r, g).find("validates_first"), std::string::npos);
  }
  const group g = r.make_group();
  r.spawn(r.make_task<promising_reader>(obj, how::validate_then_change, done), g);
  EXPECT_EQ(error_of_wait(r, g), "");
  r.wait_idle();
  EXPECT_EQ(done.load(), 3);  // all but change_and_hand_over ran to their end
  r.retire_resource(obj);
}

/// A handle of a group that completed (its slot possibly reused by a new group) is refused from
/// inside a task too, never joined: a spawn into it and a follow-up annotated with it fail the
/// task, a when_done continuation annotated with it makes when_done throw (the continuation
/// stays the caller's). Unchecked, the task would join whatever group had the slot now.
TEST_P(misuse_test, a_stale_group_used_inside_a_task_is_an_error) {
  auto& r = start();
  const group old = r.make_group();
  r.wait(old);
  const group fresh = r.make_group();  // may reuse old's slot
  std::atomic<int> ran{0};
  for (int variant = 0; variant < 3; ++variant) {
    const group g = r.make_group();
    r.spawn(
        [&, old, variant, tok = live_token{}](context& ctx) -> task* {
          auto* t = make_fn(ctx, [&, tok2 = live_token{}](context&) { ran.fetch_add(1); });
          t->annotate(old);
          if (variant == 0) ctx.spawn(t);
          if (variant == 1) return t;
          if (variant == 2) {
            const group inner = ctx.runtime().make_group();
            try {
              ctx.when_done(inner, t);
            } catch (...) {
              ctx.runtime().discard(t);
              ctx.when_done(inner, make_fn(ctx, [tok3 = live_token{}](context&) {}));
              throw;
            }
          }
          return nullptr;
        },
        g);
    EXPECT_NE(error_of_wait(r, g).find("stale or completed group"), std::string::npos)
        << "variant " << variant;
  }
  r.wait(fresh);  // at once: nothing joined the group that may have old's slot
  EXPECT_EQ(ran.load(), 0);
}

/// What an optimistic reader does outside itself before validate() returned true (a spawn,
/// when_done, a loop) the rerun of a torn read would do again: each is refused with
/// std::logic_error for the group's waiter (a spawned task freed, a continuation left to the
/// caller, a loop not started), and the runtime keeps running. After a successful validate()
/// all three are accepted.
TEST_P(misuse_test, acting_before_an_optimistic_reader_validates_is_an_error) {
  auto& r = start();
  auto* obj = r.make_resource<plain>({.primitive = primitive::optimistic_latch});
  std::atomic<int> ran{0};
  for (int variant = 0; variant < 3; ++variant) {
    const group g = r.make_group();
    auto* reader = make_fn(r, [&ran, variant](context& ctx) {
      auto* t = make_fn(ctx, [&ran, tok = live_token{}](context&) { ran.fetch_add(1); });
      if (variant == 0) ctx.spawn(t);
      if (variant == 1) {
        const group inner = ctx.runtime().make_group();
        try {
          ctx.when_done(inner, t);
        } catch (...) {
          ctx.runtime().discard(t);
          ctx.runtime().detach(inner);
          throw;
        }
      }
      if (variant == 2) {
        ctx.runtime().discard(t);
        parallel_for(ctx, group{}, 0, 100, [&ran](std::size_t) { ran.fetch_add(1); });
      }
    });
    reader->annotate_resource(obj, access::read);
    r.spawn(reader, g);
    EXPECT_NE(error_of_wait(r, g).find("from an optimistic reader before context::validate()"),
              std::string::npos)
        << "variant " << variant;
  }
  r.wait_idle();
  EXPECT_EQ(ran.load(), 0);

  const group g = r.make_group();
  auto* reader = make_fn(r, [&ran](context& ctx) {
    if (!ctx.validate()) return;  // torn: run again
    ctx.spawn(make_fn(ctx, [&ran](context&) { ran.fetch_add(1); }));
    const group inner = ctx.runtime().make_group();
    ctx.when_done(inner, make_fn(ctx, [&ran](context&) { ran.fetch_add(1); }));
    parallel_for(ctx, group{}, 0, 100, [&ran](std::size_t) { ran.fetch_add(1); });
  });
  reader->annotate_resource(obj, access::read);
  r.spawn(reader, g);
  EXPECT_EQ(error_of_wait(r, g), "");  // covers all three: they join the reader's group
  EXPECT_EQ(ran.load(), 102);
  r.retire_resource(obj);
}

TESSERA_INSTANTIATE_WORKER_COUNTS(misuse_test);
INSTANTIATE_TEST_SUITE_P(one, misuse_one_worker, testing::Values(1u), worker_count_name);

}  // namespace
}  // namespace tessera::test

#endif  // TESSERA_DEBUG_CHECKS
