// Mistakes a user makes in the first hour, each answered by a clear error (or defined behaviour)
// instead of a hang, a crash or a silent wrong result. Unchecked, each of these would hang, crash,
// give a wrong answer or (retire after stop) leak, which LeakSanitizer reports in the asan
// preset.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>

#include "test_support.h"

namespace tessera::test {
namespace {

class api_errors_test : public runtime_fixture {};

TEST_P(api_errors_test, when_done_on_the_callers_own_group_throws_instead_of_hanging) {
  // The continuation joins the running task's group, g: g would wait for it, and it for g.
  auto& r = start();
  const group g = r.make_group();
  std::atomic<int> threw{0};
  r.spawn(
      [&, g, tok = live_token{}](context& ctx) {
        auto* c = make_fn(ctx, [tok2 = live_token{}](context&) {});
        try {
          ctx.when_done(g, c);
        } catch (const std::logic_error& e) {
          if (std::string(e.what()).find("wait for itself") != std::string::npos) threw.fetch_add(1);
          ctx.runtime().discard(c);
        }
      },
      g);
  r.wait_idle();  // not wait(g): that closes g, and the task's when_done would throw for that
  EXPECT_EQ(threw.load(), 1);
  r.wait(g);
}

TEST_P(api_errors_test, a_runtime_made_and_waited_for_inside_a_task_of_another_works) {
  auto& outer = start();
  std::atomic<int> inner_ran{0};
  const group g = outer.make_group();
  outer.spawn(
      [&, tok = live_token{}](context&) {
        runtime inner({.workers = 1});
        const group h = inner.make_group();
        inner.spawn([&](context&) { inner_ran.fetch_add(1); }, h);
        inner.wait(h);      // a worker of `outer`, not of `inner`: allowed
        inner.wait_idle();  // and so is this, and the destructor's stop()
      },
      g);
  outer.wait(g);
  EXPECT_EQ(inner_ran.load(), 1);
}

TEST_P(api_errors_test, spawning_nullptr_throws_and_discarding_it_does_nothing) {
  auto& r = start();
  EXPECT_THROW(r.spawn(static_cast<task*>(nullptr)), std::invalid_argument);
  r.discard(nullptr);
  r.wait_idle();
}

TEST_P(api_errors_test, a_group_of_another_runtime_is_not_taken_for_one_of_this_runtime) {
  auto& a = start();
  runtime b({.workers = 1});
  const group ga = a.make_group();
  const group gb = b.make_group();
  EXPECT_NE(ga, gb);
  EXPECT_THROW(a.wait(gb), std::logic_error);
  a.wait(ga);  // still a's own, untouched
  b.wait(gb);
}

struct plain_object {
  long value = 0;
};

TEST_P(api_errors_test, retiring_a_resource_twice_throws_and_frees_it_once) {
  auto& r = start();
  auto* o = r.make_resource<plain_object>(resource_hints{});
  r.retire_resource(o);
  EXPECT_THROW(r.retire_resource(o), std::logic_error);
  r.stop();  // frees it once (ASan: no double free)
}

TEST_P(api_errors_test, a_resource_retired_after_stop_is_freed_at_once) {
  auto& r = start();
  auto* o = r.make_resource<plain_object>(resource_hints{});
  r.stop();
  r.retire_resource(o);  // LeakSanitizer: nothing left
}

TEST_P(api_errors_test, retiring_nullptr_does_nothing_and_memory_not_from_make_resource_throws) {
  auto& r = start();
  r.retire_resource(static_cast<plain_object*>(nullptr));
  r.destroy_resource(static_cast<plain_object*>(nullptr));
  // Accepted, it would be freed by stop() (free(): invalid pointer).
  alignas(64) static std::byte memory[512]{};
  EXPECT_THROW(r.retire_resource(reinterpret_cast<plain_object*>(memory + 256)),
               std::invalid_argument);
  r.stop();
}

// move_resource checks what retire_resource checks: unchecked, nullptr would crash, foreign
// memory would be written to (and index the pools with what it holds), and a retired
// resource's weight would be taken off its pool a second time.
TEST_P(api_errors_test, move_resource_refuses_nullptr_foreign_memory_and_a_retired_resource) {
  auto& r = start();
  EXPECT_THROW(r.move_resource(static_cast<plain_object*>(nullptr), wid(0)), std::invalid_argument);
  alignas(64) static std::byte memory[512]{};
  EXPECT_THROW(r.move_resource(reinterpret_cast<plain_object*>(memory + 256), wid(0)),
               std::invalid_argument);
  for (const std::byte b : memory) ASSERT_EQ(b, std::byte{0}) << "the foreign memory was written";
  auto* o = r.make_resource<plain_object>(resource_hints{});
  r.move_resource(o, wid(0));
  EXPECT_THROW(r.move_resource(o, wid(static_cast<std::uint16_t>(r.workers()))), std::out_of_range);
  r.retire_resource(o);
  EXPECT_THROW(r.move_resource(o, wid(0)), std::logic_error);
  r.stop();
}

/// Pointers whose 64 bytes before them cannot be read safely: the start of a mapping with nothing
/// mapped before it, a misaligned one, a heap object (under ASan its redzone lies before it). Each
/// is refused with the error, not a crash: a check that read the header line before any pointer
/// would fault on the first and stop UBSan (the asan preset) on the second. With debug checks, a
/// spawn annotated with one is refused the same way.
TEST_P(api_errors_test, memory_not_from_make_resource_is_refused_where_nothing_lies_before_it) {
  auto& r = start();
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  auto* map = static_cast<std::byte*>(
      ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(map, MAP_FAILED);
  ASSERT_EQ(::munmap(map, page), 0);  // the page before the object: not mapped
  alignas(64) static std::byte memory[512]{};
  auto* heap = new plain_object{};
  plain_object* const objects[] = {reinterpret_cast<plain_object*>(map + page),
                                   reinterpret_cast<plain_object*>(memory + 200), heap};
  for (plain_object* o : objects) {
    EXPECT_THROW(r.retire_resource(o), std::invalid_argument);
    EXPECT_THROW(r.move_resource(o, wid(0)), std::invalid_argument);
#if defined(TESSERA_DEBUG_CHECKS)
    auto* t = make_fn(r, [](context&) {});
    t->annotate_resource(o, access::write);
    const std::string error = refused_spawn(r, t);
    EXPECT_NE(error.find("make_resource"), std::string::npos) << "'" << error << "'";
#endif
  }
  delete heap;
  ::munmap(map + page, page);
  r.stop();
}

// Accepted, a primitive outside the enum would run its tasks with no synchronization, and a read
// ratio of NaN or 7 would choose a primitive from nonsense.
TEST_P(api_errors_test, resource_hints_outside_their_ranges_are_refused) {
  auto& r = start();
  const auto bad = [](auto field) {
    resource_hints h{};
    field(h);
    return h;
  };
  EXPECT_THROW(r.make_resource<plain_object>(
                   bad([](resource_hints& h) { h.primitive = static_cast<primitive>(42); })),
               std::invalid_argument);
  EXPECT_THROW(r.make_resource<plain_object>(
                   bad([](resource_hints& h) { h.isolation = static_cast<isolation>(9); })),
               std::invalid_argument);
  EXPECT_THROW(r.make_resource<plain_object>(
                   bad([](resource_hints& h) { h.frequency = static_cast<frequency>(9); })),
               std::invalid_argument);
  for (const double ratio : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_THROW(r.make_resource<plain_object>({.read_ratio = ratio}), std::invalid_argument)
        << ratio;
  }
  for (const double ratio : {0.0, 1.0}) {
    auto* o = r.make_resource<plain_object>({.read_ratio = ratio});
    r.retire_resource(o);
  }
  r.stop();
}

/// stop() from one of the runtime's own tasks throws, as wait() and wait_idle() do there (the
/// task would wait for itself), and the runtime runs on.
TEST_P(api_errors_test, stop_from_a_task_of_the_runtime_throws_and_the_runtime_runs_on) {
  auto& r = start();
  std::atomic<int> threw{0};
  const group g = r.make_group();
  r.spawn(
      [&r, &threw](context&) {
        try {
          r.stop();
        } catch (const std::logic_error&) {
          threw.fetch_add(1);
        }
      },
      g);
  r.wait(g);
  EXPECT_EQ(threw.load(), 1);
  EXPECT_TRUE(r.running());
}

/// A second wait, and a wait on group{}, say what is wrong (both said "stale or unknown group").
TEST_P(api_errors_test, a_second_wait_and_a_wait_on_no_group_say_what_is_wrong) {
  auto& r = start();
  const auto message = [&r](group g) -> std::string {
    try {
      r.wait(g);
    } catch (const std::logic_error& e) {
      return e.what();
    }
    return "";
  };
  const group g = r.make_group();
  r.wait(g);
  EXPECT_NE(message(g).find("waited for already"), std::string::npos) << message(g);
  EXPECT_NE(message(group{}).find("names no group"), std::string::npos) << message(group{});
}

TEST(api_errors, durations_in_the_options_must_be_between_zero_and_an_hour) {
  EXPECT_THROW(runtime({.workers = 1, .spin_before_park = std::chrono::microseconds(-1)}),
               std::invalid_argument);
  EXPECT_THROW(runtime({.workers = 1, .epoch_period = std::chrono::microseconds(-1)}),
               std::invalid_argument);
  // Used in nanoseconds: microseconds::max() would overflow there (undefined behaviour).
  EXPECT_THROW(runtime({.workers = 1, .spin_before_park = std::chrono::microseconds::max()}),
               std::invalid_argument);
  EXPECT_THROW(runtime({.workers = 1, .epoch_period = std::chrono::microseconds::max()}),
               std::invalid_argument);
  runtime({.workers = 1, .epoch_period = std::chrono::hours(1)}).stop();
}

TEST(api_errors, pools_per_worker_must_be_between_1_and_64) {
  EXPECT_THROW(runtime({.workers = 1, .pools_per_worker = 0}), std::invalid_argument);
  EXPECT_THROW(runtime({.workers = 1, .pools_per_worker = 65}), std::invalid_argument);
  // workers x pools_per_worker wrapped to 0 and the constructor indexed no pools (a crash).
  EXPECT_THROW(runtime({.workers = 2, .pools_per_worker = 0x80000000u}), std::invalid_argument);
  runtime({.workers = 1, .pools_per_worker = 64}).stop();
}

TEST(api_errors, a_cpu_the_machine_does_not_have_is_rejected) {
  try {
    runtime r({.cpus = {0, 1u << 20}});
    ADD_FAILURE() << "a runtime on CPU 1048576 was made";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("names CPU 1048576"), std::string::npos) << e.what();
  }
}

TESSERA_INSTANTIATE_WORKER_COUNTS(api_errors_test);

}  // namespace
}  // namespace tessera::test
