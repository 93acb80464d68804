// The idle hook (tessera/idle_hook.h): idle workers wait for the application's events, turn them
// into tasks, and are woken out of that wait by the runtime's own wake-ups (a spawn, stop()).
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>

#include "test_support.h"

namespace tessera::test {
namespace {

/// An event source as a server has one: events counted in an eventfd, taken by one worker at a
/// time (the others decline and park), and a second eventfd for the runtime's wake-ups, shared
/// by the workers (the wake-up of worker B may be read from the eventfd by worker A's wait;
/// idle_woken() still ends B's next wait: idle_hook.h). The blocking wait
/// ignores the runtime's timeout and waits for ever: a lost wake-up hangs the test (caught by
/// the ctest TIMEOUT) instead of being rescued 50 ms later.
struct event_source {
  int events = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  std::atomic<bool> role{false};
  runtime* rt = nullptr;
  std::atomic<std::uint64_t> ran{0};
  std::atomic<std::uint64_t> waits{0};
  std::atomic<std::uint64_t> polls{0};
  std::atomic<std::uint64_t> wakes{0};

  event_source() = default;
  event_source(const event_source&) = delete;
  event_source& operator=(const event_source&) = delete;
  ~event_source() {
    ::close(events);
    ::close(wake_fd);
  }

  void post(std::uint64_t n) const {
    [[maybe_unused]] const auto w = ::write(events, &n, sizeof(n));
  }

  idle_wait wait(worker_id /*w*/, std::chrono::nanoseconds timeout) {
    const bool poll = timeout.count() == 0;
    (poll ? polls : waits).fetch_add(1, std::memory_order_relaxed);
    if (role.exchange(true, std::memory_order_acquire)) {
      return poll ? idle_wait::waited : idle_wait::declined;
    }
    // With the role, before blocking: a wake-up of this worker whose eventfd write another
    // worker's wait read. One not seen here writes the eventfd after this point, and only the
    // role's holder reads it.
    const bool woken_already = !poll && idle_woken();
    pollfd fds[2] = {{events, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    ::poll(fds, 2, poll || woken_already ? 0 : -1);
    std::uint64_t v = 0;
    if (::read(wake_fd, &v, sizeof(v)) < 0) v = 0;
    std::uint64_t n = 0;
    if (::read(events, &n, sizeof(n)) < 0) n = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      // From the worker's thread outside any task (a fresh operation), into its own pools.
      rt->spawn([this, tok = live_token{}](context&) { ran.fetch_add(1, std::memory_order_relaxed); });
    }
    role.store(false, std::memory_order_release);
    return idle_wait::waited;
  }

  void wake(worker_id /*w*/) {
    wakes.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(wake_fd, &one, sizeof(one));
  }

  runtime_options options(std::chrono::microseconds spin = std::chrono::microseconds{200}) {
    runtime_options o;
    o.spin_before_park = spin;
    o.idle.wait = [this](worker_id w, std::chrono::nanoseconds t) { return wait(w, t); };
    o.idle.wake = [this](worker_id w) { wake(w); };
    return o;
  }

  void wait_for_ran(std::uint64_t n) const {
    while (ran.load(std::memory_order_relaxed) < n) std::this_thread::yield();
  }
};

class idle_hook_test : public runtime_fixture {};

TEST_P(idle_hook_test, events_become_tasks_on_the_workers_without_a_thread_of_ours) {
  event_source src;
  auto& rt = start(src.options());
  src.rt = &rt;
  const std::uint64_t rounds = scaled(2000, 200);
  for (std::uint64_t i = 0; i < rounds; ++i) {
    src.post(1 + i % 3);
    if (i % 64 == 0) std::this_thread::yield();
  }
  std::uint64_t expected = 0;
  for (std::uint64_t i = 0; i < rounds; ++i) expected += 1 + i % 3;
  src.wait_for_ran(expected);
  rt.stop();  // before src goes: the workers call its hook until they are joined
  EXPECT_EQ(src.ran.load(), expected);
  EXPECT_GT(src.waits.load() + src.polls.load(), 0u);
}

TEST_P(idle_hook_test, a_spawn_from_outside_wakes_a_worker_waiting_in_the_hook) {
  // Without spinning, every idle worker goes straight to the hook (or, declined, to the futex);
  // the hook's wait never times out, so each of these tasks is run only if the spawn's wake-up
  // reached the hook.
  event_source src;
  auto& rt = start(src.options(std::chrono::microseconds{0}));
  src.rt = &rt;
  const int n = static_cast<int>(scaled(500, 100));
  for (int i = 0; i < n; ++i) {
    group g = rt.make_group();
    rt.spawn([&src, tok = live_token{}](context&) { src.ran.fetch_add(1, std::memory_order_relaxed); },
             g);
    rt.wait(g);
    if (i % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));  // all idle
  }
  rt.stop();
  EXPECT_EQ(src.ran.load(), static_cast<std::uint64_t>(n));
}

TEST_P(idle_hook_test, stop_ends_a_wait_in_the_hook) {
  event_source src;
  auto& rt = start(src.options(std::chrono::microseconds{0}));
  src.rt = &rt;
  src.post(3);
  src.wait_for_ran(3);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the workers wait in the hook
  rt.stop();  // hangs (TIMEOUT) unless stop's wake-up reaches the hook
  EXPECT_EQ(src.ran.load(), 3u);
}

TEST(idle_hook_options, a_wait_without_a_wake_is_refused) {
  runtime_options o;
  o.workers = 1;
  o.idle.wait = [](worker_id, std::chrono::nanoseconds) { return idle_wait::declined; };
  EXPECT_THROW(runtime{o}, std::invalid_argument);
}

TESSERA_INSTANTIATE_WORKER_COUNTS(idle_hook_test);

}  // namespace
}  // namespace tessera::test
