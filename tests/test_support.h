// tests/test_support.h — what every runtime test shares: worker-count parameters, loop scaling
// under sanitizers, a leak-checking fixture, live-object counters and a gate that holds workers.
//
// Habits (see /work/shared/STYLE.md): runtime tests are parameterized over worker counts
// {1, 2, 4, 2 * CPUs + 1}; the fixture checks that no task object leaked once the runtime
// stopped; tests assert behaviour, never timings (a hang is caught by the ctest TIMEOUT).
//
//   class my_test : public tessera::test::runtime_fixture {};
//   TEST_P(my_test, runs) {
//     auto& rt = start();                    // runtime with GetParam() workers
//     rt.spawn([t = live_token{}](tessera::context&) {});
//     rt.wait_idle();
//   }                                        // TearDown: stop(), then live objects == 0
//   TESSERA_INSTANTIATE_WORKER_COUNTS(my_test);
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::test {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool under_tsan = true;
#else
inline constexpr bool under_tsan = false;
#endif
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool under_asan = true;
#else
inline constexpr bool under_asan = false;
#endif
inline constexpr bool under_sanitizer = under_tsan || under_asan;

/// Loop count: `normal` in plain builds, `sanitized` under ASan/TSan (which run 5-20x slower).
constexpr std::size_t scaled(std::size_t normal, std::size_t sanitized) noexcept {
  return under_sanitizer ? sanitized : normal;
}

inline unsigned cpu_count() noexcept { return std::max(1u, std::thread::hardware_concurrency()); }

/// More workers than CPUs: pinning must wrap or run unpinned, and everything must still work.
inline unsigned oversubscribed_workers() noexcept { return 2 * cpu_count() + 1; }

inline std::vector<unsigned> worker_counts() {
  std::vector<unsigned> v{1, 2, 4, oversubscribed_workers()};
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

/// The counts of worker_counts() from 2 up: for tests that need two workers running at once.
inline std::vector<unsigned> multi_worker_counts() {
  std::vector<unsigned> v = worker_counts();
  std::erase_if(v, [](unsigned n) { return n < 2; });
  return v;
}

inline std::string worker_count_name(const testing::TestParamInfo<unsigned>& info) {
  return "workers_" + std::to_string(info.param) +
         (info.param > cpu_count() ? "_oversubscribed" : "");
}

// ---- live-object accounting ---------------------------------------------------------------------

/// Task objects (and lambda captures) alive right now; every test ends with zero.
inline std::atomic<long> live_objects{0};

/// Captured by value in lambdas: counts the function_task objects that hold it.
struct live_token {
  live_token() noexcept { live_objects.fetch_add(1, std::memory_order_relaxed); }
  live_token(const live_token&) noexcept { live_objects.fetch_add(1, std::memory_order_relaxed); }
  live_token& operator=(const live_token&) noexcept = default;
  ~live_token() { live_objects.fetch_sub(1, std::memory_order_relaxed); }
};

/// Base for the tests' task types: counts constructions and destructions (a non-trivial
/// destructor: the runtime runs it through the type's registered destroyer).
class counted_task : public task {
 public:
  counted_task() noexcept { live_objects.fetch_add(1, std::memory_order_relaxed); }

 protected:
  ~counted_task() { live_objects.fetch_sub(1, std::memory_order_relaxed); }
};

// ---- gate ---------------------------------------------------------------------------------------

/// Holds the workers that run `pass()` until `release()`: lets a test queue work behind them.
struct gate {
  std::atomic<bool> open{false};
  std::atomic<unsigned> arrived{0};

  void pass() noexcept {
    arrived.fetch_add(1, std::memory_order_acq_rel);
    while (!open.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  void wait_for_arrivals(unsigned n) const noexcept {
    while (arrived.load(std::memory_order_acquire) < n) std::this_thread::yield();
  }
  void release() noexcept { open.store(true, std::memory_order_release); }
};

/// A task that parks its worker at a gate (annotate it with a worker to hold that one).
class gate_task final : public counted_task {
 public:
  explicit gate_task(gate& g) noexcept : m_gate(&g) {}
  task* execute(context&) override {
    m_gate->pass();
    return nullptr;
  }

 private:
  gate* m_gate;
};

/// Allocates a lambda as a task (to annotate it before spawning) through a runtime or a context.
template <class Maker, class F>
function_task<std::decay_t<F>>* make_fn(Maker& maker, F&& f) {
  return maker.template make_task<function_task<std::decay_t<F>>>(std::forward<F>(f));
}

inline worker_id wid(unsigned w) noexcept { return worker_id(static_cast<std::uint16_t>(w)); }

/// Spawns `t` from outside and returns the std::logic_error's message if the spawn was refused
/// (the task is then still the caller's, and is discarded here), else "" (the spawn went ahead).
inline std::string refused_spawn(runtime& r, task* t) {
  try {
    r.spawn(t);
  } catch (const std::logic_error& e) {
    r.discard(t);
    return e.what();
  }
  return "";
}

/// Runs an empty task on every worker and waits for them: each worker wakes if it parked and,
/// having run a task, has published its counters and its epoch slot (both written by itself).
inline void run_an_empty_task_on_each_worker(runtime& r) {
  const group g = r.make_group();
  for (unsigned w = 0; w < r.workers(); ++w) {
    auto* t = make_fn(r, [tok = live_token{}](context&) {});
    t->annotate(wid(w));
    r.spawn(t, g);
  }
  r.wait(g);
}

// ---- fixture ------------------------------------------------------------------------------------

/// A runtime per test; TearDown stops it and checks that every task object was destroyed and
/// that no ungrouped task threw unless the test said it expects that.
class runtime_fixture : public testing::TestWithParam<unsigned> {
 protected:
  void SetUp() override {
    ASSERT_EQ(live_objects.load(), 0) << "a previous test leaked task objects";
  }

  void TearDown() override {
    if (m_rt) {
      m_rt->stop();
      if (!m_expect_unhandled) {
        EXPECT_TRUE(m_rt->take_unhandled_exceptions().empty())
            << "a task without a group threw unexpectedly";
      }
      m_rt.reset();
    }
    EXPECT_EQ(live_objects.load(), 0) << "task objects leaked (made but never destroyed)";
    live_objects.store(0);
  }

  /// Starts the runtime under test with GetParam() workers unless `options` names workers/cpus.
  runtime& start(runtime_options options = {}) {
    if (!options.workers && options.cpus.empty()) options.workers = GetParam();
    m_rt = std::make_unique<runtime>(std::move(options));
    return *m_rt;
  }

  unsigned worker_count() const { return GetParam(); }
  runtime& rt() { return *m_rt; }

  std::unique_ptr<runtime> m_rt;
  bool m_expect_unhandled = false;
};

/// Counts atomically per id; `exactly_once()` tells which id ran 0 or 2+ times.
class run_counts {
 public:
  explicit run_counts(std::size_t n) : m_counts(n) {}
  void hit(std::size_t id) noexcept { m_counts[id].fetch_add(1, std::memory_order_relaxed); }
  std::size_t size() const noexcept { return m_counts.size(); }
  int at(std::size_t id) const noexcept { return m_counts[id].load(std::memory_order_relaxed); }
  /// Empty if every id ran exactly once; else a description of the first few that did not.
  std::string exactly_once() const {
    std::string out;
    int reported = 0;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < m_counts.size(); ++i) {
      const int c = at(i);
      if (c != 1) {
        ++bad;
        if (reported++ < 8) out += "id " + std::to_string(i) + " ran " + std::to_string(c) + "x; ";
      }
    }
    if (bad != 0) out += std::to_string(bad) + " of " + std::to_string(m_counts.size()) + " wrong";
    return out;
  }

 private:
  std::vector<std::atomic<int>> m_counts;
};

/// splitmix64's finalizer: a well-mixed 64-bit value from a counter (deterministic test data).
inline std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Burns a little time without a system call (a task's "work" in the stealing/sync tests).
inline void pause_a_little(unsigned n) noexcept {
  for (unsigned i = 0; i < n; ++i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
  }
}

}  // namespace tessera::test

#define TESSERA_INSTANTIATE_WORKER_COUNTS(suite)                                       \
  INSTANTIATE_TEST_SUITE_P(, suite, testing::ValuesIn(tessera::test::worker_counts()), \
                           tessera::test::worker_count_name)
#define TESSERA_INSTANTIATE_MULTI_WORKER_COUNTS(suite)                                       \
  INSTANTIATE_TEST_SUITE_P(, suite, testing::ValuesIn(tessera::test::multi_worker_counts()), \
                           tessera::test::worker_count_name)
