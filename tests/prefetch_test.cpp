// Annotation-based prefetching ([MxTasks] §3, [MxTasks-early] §3.3; src/runtime/prefetch.h and the
// window in worker::next). White-box: the plan computed from an annotation — every address inside
// the annotated object, at most 16 lines, the header line exactly for primitives that check a
// version or take a latch, write intent for writers. Runtime: the `prefetches` counter equals the
// sum of the planned line counts of every task that ran (distance > 0) or stays 0 (distance 0),
// for bursts spawned from outside and from tasks and for chains that spawn while they run; and
// set_prefetch_distance takes effect while the runtime runs. Adapting (the sampler given a clock
// by the test): each worker moves to the distance its clock makes faster, within 1 .. 16, starts
// again from every set_prefetch_distance, and keeps the distance set when told not to adapt or
// when it is 0.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/prefetch.h"
#include "runtime/test_hooks.h"
#include "test_support.h"

namespace tessera::test {
namespace {

using detail::plan_prefetch;
using detail::prefetch_plan;

constexpr std::uintptr_t line_bytes = 64;

/// The plan's line count, computed independently of plan_prefetch: lines overlapped, capped.
unsigned expected_lines(std::uintptr_t begin, std::size_t size) {
  if (size == 0) return 0;
  const std::uintptr_t first = begin / line_bytes;
  const std::uintptr_t last = (begin + size - 1) / line_bytes;
  return static_cast<unsigned>(
      std::min<std::uintptr_t>(last - first + 1, prefetch_plan::max_lines));
}

/// Checks the data part of `plan` (entries from `from` on) against [begin, begin + size).
void check_data_lines(const prefetch_plan& plan, unsigned from, std::uintptr_t begin,
                      std::size_t size, bool writer) {
  ASSERT_EQ(plan.count - from, expected_lines(begin, size))
      << "begin " << begin << " (line offset " << begin % line_bytes << ") size " << size;
  for (unsigned i = from; i < plan.count; ++i) {
    const auto a = reinterpret_cast<std::uintptr_t>(plan.address[i]);
    ASSERT_GE(a, begin) << "entry " << i << " lies before the object (size " << size << ")";
    ASSERT_LT(a - begin, size) << "entry " << i << " lies beyond the object (begin " << begin
                               << ", size " << size << ")";
    EXPECT_EQ(plan.write, writer) << "entry " << i;
    if (i == from) {
      EXPECT_EQ(a, begin) << "the first address is the object itself";
    } else {
      EXPECT_EQ(a % line_bytes, 0u) << "entry " << i << " is not a line start";
      EXPECT_EQ(a / line_bytes, begin / line_bytes + (i - from)) << "lines skipped or repeated";
    }
  }
}

/// A task that is never spawned: only its annotations are read.
class probe final : public task {
 public:
  task* execute(context&) override { return nullptr; }
};

// ---- the plan ----------------------------------------------------------------------------------

TEST(prefetch_plan_test, stays_inside_the_object_for_random_offsets_and_sizes) {
  std::mt19937_64 rng(20240611);
  // A real allocation so that the addresses are plausible; the plan never dereferences them.
  std::vector<std::byte> arena(1 << 16);
  const auto base = reinterpret_cast<std::uintptr_t>(arena.data());
  const std::size_t rounds = scaled(200000, 20000);
  for (std::size_t i = 0; i < rounds; ++i) {
    const std::uintptr_t begin = base + rng() % 8192;
    // Tiny (one or two lines), around the cap, multiples of 64 +-1, at the cap +-64,
    // huge (1 MiB .. 2 GiB), anything up to 1 TiB.
    const std::size_t kind = rng() % 6;
    const std::size_t size = kind == 0   ? 1 + rng() % 64
                             : kind == 1 ? 1 + rng() % 2048
                             : kind == 2 ? 64 * (1 + rng() % 20) + (rng() % 3) - 1
                             : kind == 3 ? prefetch_plan::max_lines * 64 + (rng() % 129) - 64
                             : kind == 4 ? std::size_t{1} << (20 + rng() % 12)
                                         : 1 + rng() % (std::size_t{1} << 40);
    const bool writer = (rng() & 1) != 0;
    const prefetch_plan plan =
        plan_prefetch(reinterpret_cast<const void*>(begin), size, writer, nullptr);
    check_data_lines(plan, 0, begin, size, writer);
    if (testing::Test::HasFatalFailure()) return;
  }
}

TEST(prefetch_plan_test, every_line_offset_and_small_size) {
  alignas(64) static std::byte object[4096];
  const auto base = reinterpret_cast<std::uintptr_t>(object);
  for (std::uintptr_t offset = 0; offset < 128; ++offset) {
    for (std::size_t size = 1; size <= 4096 - 128; size += (size < 200 ? 1 : 61)) {
      for (const bool writer : {false, true}) {
        const prefetch_plan plan =
            plan_prefetch(reinterpret_cast<const void*>(base + offset), size, writer, nullptr);
        check_data_lines(plan, 0, base + offset, size, writer);
        if (testing::Test::HasFatalFailure()) return;
        detail::issue_prefetch(plan);  // every address is inside `object`
      }
    }
  }
}

TEST(prefetch_plan_test, the_cap_is_sixteen_lines) {
  alignas(64) static std::byte object[4096];
  auto count = [&](std::size_t offset, std::size_t size) {
    return plan_prefetch(object + offset, size, false, nullptr).count;
  };
  EXPECT_EQ(count(0, 16 * 64), 16u);
  EXPECT_EQ(count(0, 16 * 64 + 1), 16u) << "the 17th line is left to the hardware";
  EXPECT_EQ(count(0, 15 * 64 + 1), 16u);
  EXPECT_EQ(count(1, 16 * 64 - 1), 16u);
  EXPECT_EQ(count(1, 16 * 64), 16u) << "17 lines overlapped, capped";
  EXPECT_EQ(count(0, 4096), 16u);
  EXPECT_EQ(count(63, 2), 2u) << "two bytes across a line boundary are two lines";
  EXPECT_EQ(count(0, 1), 1u);
}

TEST(prefetch_plan_test, nothing_for_an_empty_or_missing_annotation) {
  alignas(64) static std::byte object[64];
  EXPECT_EQ(plan_prefetch(object, 0, false, nullptr).count, 0u);
  EXPECT_EQ(plan_prefetch(nullptr, 1024, true, nullptr).count, 0u);
  probe t;
  EXPECT_EQ(plan_prefetch(t).count, 0u) << "a task without annotation";
  t.annotate_data(object, 64).clear_annotations();
  EXPECT_EQ(plan_prefetch(t).count, 0u) << "after clear_annotations";
}

TEST(prefetch_plan_test, a_task_annotation_gives_the_same_plan) {
  std::mt19937_64 rng(7);
  std::vector<std::byte> arena(1 << 20);
  for (int i = 0; i < 10000; ++i) {
    const std::size_t offset = rng() % (arena.size() / 2);
    const std::size_t size = 1 + rng() % (arena.size() / 2);
    const access mode = (rng() & 1) != 0 ? access::write : access::read;
    probe t;
    t.annotate_data(arena.data() + offset, size, mode);
    const prefetch_plan plan = plan_prefetch(t);
    check_data_lines(plan, 0, reinterpret_cast<std::uintptr_t>(arena.data() + offset), size,
                     mode == access::write);
    if (testing::Test::HasFatalFailure()) return;
  }
}

TEST(prefetch_plan_test, a_huge_annotation_stays_inside_the_object) {
  // Only the addresses are computed; nothing of this size is allocated. A task keeps the
  // annotated size in 32 bits (task.h), saturated: sizes from 4 GiB on still give the full plan
  // (16 lines), which never leaves the object.
  const auto begin = std::uintptr_t{1} << 40;
  for (const std::size_t size :
       {std::size_t{std::numeric_limits<std::uint32_t>::max()}, std::size_t{1} << 31,
        (std::size_t{1} << 32) + 100, (std::size_t{5} << 30) + 1}) {
    probe t;
    t.annotate_data(reinterpret_cast<const void*>(begin + 7), size);
    const prefetch_plan plan = plan_prefetch(t);
    EXPECT_EQ(t.data_size(),
              std::min<std::size_t>(size, std::numeric_limits<std::uint32_t>::max()));
    EXPECT_EQ(plan.count, prefetch_plan::max_lines) << "size " << size;
    check_data_lines(plan, 0, begin + 7, t.data_size(), false);
    for (unsigned i = 0; i < plan.count; ++i) {
      EXPECT_LT(reinterpret_cast<std::uintptr_t>(plan.address[i]) - (begin + 7), size);
    }
  }
}

TEST(prefetch_plan_test, writers_prefetch_with_write_intent_readers_without) {
  alignas(64) static std::byte object[2048];
  probe t;
  t.annotate_data(object + 10, 700, access::write);
  prefetch_plan plan = plan_prefetch(t);
  ASSERT_EQ(plan.count, 12u);  // bytes 10..709: lines 0..11
  EXPECT_TRUE(plan.write) << "every line with write intent";
  t.annotate_data(object + 10, 700, access::read);
  plan = plan_prefetch(t);
  ASSERT_EQ(plan.count, 12u);  // bytes 10..709: lines 0..11
  EXPECT_FALSE(plan.write) << "no line with write intent";
  t.annotate_data(object + 10, 700);
  EXPECT_FALSE(plan_prefetch(t).write) << "annotate_data reads by default";
}

// ---- the header line of resources ---------------------------------------------------------------

struct record {
  std::array<std::uint64_t, 40> values{};  // 320 bytes: five lines
};

// Every primitive reads the header before it runs a task (the worker looks up the primitive
// there; the latched ones take the latch word, the optimistic ones check the version), so the
// header line comes first for every resource, with the task's intent. Deciding per primitive
// would read the header at prefetch time: the miss the prefetch is meant to hide.
constexpr std::array<primitive, 6> all_primitives{
    primitive::none,    primitive::scheduling,       primitive::spinlock,
    primitive::rwlatch, primitive::optimistic_latch, primitive::optimistic_scheduled};

TEST(prefetch_plan_test, header_line_first_for_every_resource_with_the_tasks_intent) {
  runtime r({.workers = 1, .pin = false});
  for (const primitive prim : all_primitives) {
    SCOPED_TRACE(std::string(to_string(prim)));
    auto* obj = r.make_resource<record>({.primitive = prim});
    ASSERT_EQ(runtime::primitive_of(obj), prim);
    const auto* header = header_of(obj);
    ASSERT_EQ(reinterpret_cast<const std::byte*>(obj) - reinterpret_cast<const std::byte*>(header),
              64);
    for (const access mode : {access::read, access::write}) {
      SCOPED_TRACE(mode == access::write ? "writer" : "reader");
      for (const std::size_t bytes : {sizeof(record), std::size_t{1}, std::size_t{64}}) {
        probe t;
        t.annotate_resource(obj, mode, bytes);
        const prefetch_plan plan = plan_prefetch(t);
        ASSERT_GE(plan.count, 1u);
        EXPECT_EQ(plan.address[0], static_cast<const void*>(header)) << "header line first";
        EXPECT_EQ(plan.write, mode == access::write);
        for (unsigned i = 1; i < plan.count; ++i) {
          EXPECT_NE(plan.address[i], static_cast<const void*>(header)) << "header line issued";
        }
        check_data_lines(plan, 1, reinterpret_cast<std::uintptr_t>(obj), bytes,
                         mode == access::write);
      }
    }
    r.retire_resource(obj);
  }
}

/// A resource annotated with 0 bytes runs under its primitive, which reads the header: the header
/// line is prefetched, and no data line. Plain data of 0 bytes: nothing.
TEST(prefetch_plan_test, a_resource_of_zero_bytes_gets_its_header_and_no_data_line) {
  runtime r({.workers = 1, .pin = false});
  auto* obj = r.make_resource<record>({.primitive = primitive::spinlock});
  probe t;
  t.annotate_resource(obj, access::write, 0);
  const prefetch_plan plan = plan_prefetch(t);
  ASSERT_EQ(plan.count, 1u);
  EXPECT_EQ(plan.address[0], static_cast<const void*>(header_of(obj)));
  probe plain;
  static record data;
  plain.annotate_data(&data, 0);
  EXPECT_EQ(plan_prefetch(plain).count, 0u);
  r.retire_resource(obj);
}

TEST(prefetch_plan_test, a_resource_over_the_cap_gets_its_header_and_sixteen_lines) {
  struct big {
    std::array<std::byte, 4096> bytes{};
  };
  runtime r({.workers = 1, .pin = false});
  auto* obj = r.make_resource<big>({.primitive = primitive::spinlock});
  probe t;
  t.annotate_resource(obj, access::read);
  const prefetch_plan plan = plan_prefetch(t);
  EXPECT_EQ(plan.count, prefetch_plan::max_lines + 1);
  check_data_lines(plan, 1, reinterpret_cast<std::uintptr_t>(obj), sizeof(big), false);
  r.retire_resource(obj);
}

// ---- the runtime: every task through the window gets its prefetch -------------------------------

/// What one task touches: a slice of the arena, derived from a key so that the test can replay it.
struct slice {
  std::size_t offset;
  std::size_t bytes;
  access mode;
};

constexpr std::size_t arena_bytes = std::size_t{1} << 20;
constexpr std::size_t max_slice = 3000;

slice slice_for(std::uint64_t key) noexcept {
  const std::uint64_t h = mix(key);
  return {static_cast<std::size_t>(h % (arena_bytes - max_slice)),
          static_cast<std::size_t>(1 + (h >> 24) % max_slice),
          (h >> 50) % 5 == 0 ? access::write : access::read};
}

std::uint64_t key_of(std::uint64_t a, std::uint64_t b, std::uint64_t c) noexcept {
  return mix(mix(a * 0x100000001B3ull + b) + c);
}

/// The arena tasks are annotated with (they never touch it: only the prefetcher does).
struct arena {
  std::vector<std::byte> bytes = std::vector<std::byte>(arena_bytes);

  void annotate(task& t, std::uint64_t key) const {
    const slice s = slice_for(key);
    t.annotate_data(bytes.data() + s.offset, s.bytes, s.mode);
  }
  std::uint64_t lines(std::uint64_t key) const {
    const slice s = slice_for(key);
    return expected_lines(reinterpret_cast<std::uintptr_t>(bytes.data() + s.offset), s.bytes);
  }
};

class leaf final : public counted_task {
 public:
  task* execute(context&) override { return nullptr; }
};

/// Spawns `width` annotated leaves per run into its own worker's pool, `rounds` times, each time
/// re-annotated for its next round (a burst generator).
class burst_generator final : public counted_task {
 public:
  burst_generator(const arena& a, std::uint64_t id, unsigned rounds, unsigned width) noexcept
      : m_arena(&a), m_id(id), m_rounds(rounds), m_width(width) {
    a.annotate(*this, key_of(id, 0, 0));
  }
  task* execute(context& ctx) override {
    for (unsigned j = 0; j < m_width; ++j) {
      auto* child = ctx.make_task<leaf>();
      m_arena->annotate(*child, key_of(m_id, m_round, j + 1));
      ctx.spawn(child);
    }
    if (++m_round == m_rounds) return nullptr;
    m_arena->annotate(*this, key_of(m_id, m_round, 0));
    return this;
  }
  static std::uint64_t lines(const arena& a, std::uint64_t id, unsigned rounds, unsigned width) {
    std::uint64_t n = 0;
    for (unsigned r = 0; r < rounds; ++r) {
      for (unsigned j = 0; j <= width; ++j) n += a.lines(key_of(id, r, j));
    }
    return n;
  }

 private:
  const arena* m_arena;
  std::uint64_t m_id;
  unsigned m_rounds;
  unsigned m_width;
  unsigned m_round = 0;
};

/// A chain of `steps` visits, re-annotated for the next one each time (like a tree traversal);
/// every `spawn_every`-th step also spawns an annotated leaf, which arrives while the window is
/// already filled with the other chains.
class visit_chain final : public counted_task {
 public:
  visit_chain(const arena& a, std::uint64_t id, unsigned steps, unsigned spawn_every) noexcept
      : m_arena(&a), m_id(id), m_steps(steps), m_spawn_every(spawn_every) {
    a.annotate(*this, key_of(id, 0, 0));
  }
  task* execute(context& ctx) override {
    if (m_step % m_spawn_every == 0) {
      auto* child = ctx.make_task<leaf>();
      m_arena->annotate(*child, key_of(m_id, m_step, 1));
      ctx.spawn(child);
    }
    if (++m_step == m_steps) return nullptr;
    m_arena->annotate(*this, key_of(m_id, m_step, 0));
    return this;
  }
  static std::uint64_t lines(const arena& a, std::uint64_t id, unsigned steps,
                             unsigned spawn_every) {
    std::uint64_t n = 0;
    for (unsigned s = 0; s < steps; ++s) {
      n += a.lines(key_of(id, s, 0));
      if (s % spawn_every == 0) n += a.lines(key_of(id, s, 1));
    }
    return n;
  }
  static std::uint64_t tasks(unsigned steps, unsigned spawn_every) {
    return steps + (steps + spawn_every - 1) / spawn_every;
  }

 private:
  const arena* m_arena;
  std::uint64_t m_id;
  unsigned m_steps;
  unsigned m_spawn_every;
  unsigned m_step = 0;
};

/// Runs the three workloads once on `r`; returns {prefetch lines planned, task executions}.
struct workload_totals {
  std::uint64_t lines = 0;
  std::uint64_t tasks = 0;
};

workload_totals run_workloads(runtime& r, const arena& a, std::uint64_t seed) {
  workload_totals want;
  const group g = r.make_group();
  // 1. A burst from outside: lands in the inboxes, drained into the window.
  const unsigned burst = static_cast<unsigned>(scaled(3000, 400));
  for (unsigned i = 0; i < burst; ++i) {
    auto* t = r.make_task<leaf>();
    a.annotate(*t, key_of(seed, 1000000 + i, 7));
    want.lines += a.lines(key_of(seed, 1000000 + i, 7));
    r.spawn(t, g);
  }
  want.tasks += burst;
  // 2. Bursts spawned by tasks, one generator per worker.
  const unsigned rounds = static_cast<unsigned>(scaled(40, 8));
  const unsigned width = 64;
  for (unsigned w = 0; w < r.workers(); ++w) {
    const std::uint64_t id = key_of(seed, 2, w);
    auto* t = r.make_task<burst_generator>(a, id, rounds, width);
    t->annotate(wid(w));
    want.lines += burst_generator::lines(a, id, rounds, width);
    want.tasks += rounds * (width + 1);
    r.spawn(t, g);
  }
  // 3. Chains, several per worker, spawning leaves while they run.
  const unsigned chains = 3 * r.workers();
  const unsigned steps = static_cast<unsigned>(scaled(600, 100));
  for (unsigned c = 0; c < chains; ++c) {
    const std::uint64_t id = key_of(seed, 3, c);
    auto* t = r.make_task<visit_chain>(a, id, steps, 3u);
    want.lines += visit_chain::lines(a, id, steps, 3);
    want.tasks += visit_chain::tasks(steps, 3);
    r.spawn(t, g);
  }
  r.wait(g);
  r.wait_idle();
  return want;
}

class prefetch_test : public runtime_fixture {
 protected:
  /// Every traversal step through the window (worker::step_mode queued): the counts below are
  /// the window's. A step held to run next is prefetched as it is held, or not at all.
  runtime& start_with_distance(unsigned d) {
    ::setenv("TESSERA_STEP_MODE", "queued", 1);  // read once as the runtime starts
    runtime& r = start({.workers = GetParam(), .prefetch_distance = d});
    ::unsetenv("TESSERA_STEP_MODE");
    return r;
  }
};

TEST_P(prefetch_test, distance_zero_issues_no_prefetch) {
  arena a;
  auto& r = start_with_distance(0);
  const workload_totals want = run_workloads(r, a, 1);
  const worker_statistics s = r.statistics().total();
  EXPECT_EQ(s.executed, want.tasks);
  EXPECT_EQ(s.prefetches, 0u) << "distance 0 prefetched";
}

TEST_P(prefetch_test, every_task_through_the_window_gets_its_prefetch) {
  arena a;
  for (const unsigned d : {1u, 2u, 3u, 4u, 8u, runtime::max_prefetch_distance}) {
    SCOPED_TRACE("distance " + std::to_string(d));
    auto& r = start_with_distance(d);
    ASSERT_EQ(r.prefetch_distance(), d);
    const workload_totals want = run_workloads(r, a, d);
    const worker_statistics s = r.statistics().total();
    EXPECT_EQ(s.executed, want.tasks);
    EXPECT_EQ(s.prefetches, want.lines)
        << (s.prefetches < want.lines ? "some tasks were not prefetched"
                                      : "some tasks were prefetched twice");
    r.stop();
  }
}

TEST_P(prefetch_test, resource_tasks_get_their_header_line) {
  arena a;
  auto& r = start_with_distance(2);
  std::vector<record*> objects;
  std::uint64_t want = 0;
  const group g = r.make_group();
  const unsigned per_case = static_cast<unsigned>(scaled(500, 60));
  for (const primitive prim : all_primitives) {
    auto* obj = r.make_resource<record>({.primitive = prim});
    objects.push_back(obj);
    for (unsigned i = 0; i < per_case; ++i) {
      const access mode = i % 4 == 0 ? access::write : access::read;
      auto* t = r.make_task<leaf>();
      t->annotate_resource(obj, mode);
      want += plan_prefetch(*t).count;
      r.spawn(t, g);
    }
  }
  r.wait(g);
  r.wait_idle();
  const std::uint64_t got = r.statistics().total().prefetches;
  if (r.workers() == 1) {
    EXPECT_EQ(got, want);
  } else {
    // A resource's pool may change hands with tasks already in the window; the new owner
    // prefetches them again on its own core.
    EXPECT_GE(got, want) << "some tasks were not prefetched";
  }
  for (record* obj : objects) r.retire_resource(obj);
}

// Regression: a worker that parked kept the distance it read before parking, so after
// set_prefetch_distance() up to epoch_interval_tasks of its next tasks ran with the old one (none
// prefetched after a change from 0, prefetched after a change to 0).
TEST_P(prefetch_test, set_prefetch_distance_reaches_parked_workers) {
  arena a;
  auto& r = start_with_distance(0);
  const std::uint64_t tasks = run_workloads(r, a, 11).tasks;
  EXPECT_EQ(r.statistics().total().executed, tasks);
  EXPECT_EQ(r.statistics().total().prefetches, 0u);

  r.set_prefetch_distance(3);
  EXPECT_EQ(r.prefetch_distance(), 3u);
  const std::uint64_t lines = run_workloads(r, a, 12).lines;
  EXPECT_EQ(r.statistics().total().prefetches, lines)
      << "tasks spawned after set_prefetch_distance(3) ran without their prefetch";

  r.set_prefetch_distance(0);
  run_workloads(r, a, 13);
  EXPECT_EQ(r.statistics().total().prefetches, lines)
      << "tasks spawned after set_prefetch_distance(0) were still prefetched";
}

/// Re-runs itself until `stop` is set; annotated, so that it is prefetched when the distance
/// allows it.
class endless_visits final : public counted_task {
 public:
  endless_visits(const arena& a, std::uint64_t id, const std::atomic<bool>& stop) noexcept
      : m_arena(&a), m_id(id), m_stop(&stop) {
    a.annotate(*this, key_of(id, 0, 0));
  }
  task* execute(context&) override {
    if (m_stop->load(std::memory_order_relaxed)) return nullptr;
    m_arena->annotate(*this, key_of(m_id, ++m_step, 0));
    return this;
  }

 private:
  const arena* m_arena;
  std::uint64_t m_id;
  const std::atomic<bool>* m_stop;
  std::uint64_t m_step = 0;
};

TEST_P(prefetch_test, set_prefetch_distance_takes_effect_on_busy_workers) {
  arena a;
  auto& r = start_with_distance(0);
  std::atomic<bool> stop{false};
  const group g = r.make_group();
  for (unsigned i = 0; i < 4 * r.workers(); ++i) {
    r.spawn(r.make_task<endless_visits>(a, i, stop), g);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(r.statistics().total().prefetches, 0u);
  r.set_prefetch_distance(2);
  // The workers never idle; they must still pick the new distance up. A generous deadline turns
  // a distance that never takes effect into a failure rather than a hang.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (r.statistics().total().prefetches == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop.store(true, std::memory_order_relaxed);
  r.wait(g);
  EXPECT_GT(r.statistics().total().prefetches, 0u) << "the new distance never took effect";
}

TEST_P(prefetch_test, set_prefetch_distance_rejects_values_above_the_maximum) {
  auto& r = start_with_distance(2);
  EXPECT_THROW(r.set_prefetch_distance(runtime::max_prefetch_distance + 1), std::invalid_argument);
  EXPECT_THROW(r.set_prefetch_distance(std::numeric_limits<unsigned>::max()),
               std::invalid_argument);
  EXPECT_EQ(r.prefetch_distance(), 2u) << "a rejected value changed the distance";
  r.set_prefetch_distance(runtime::max_prefetch_distance);
  EXPECT_EQ(r.prefetch_distance(), runtime::max_prefetch_distance);
  r.set_prefetch_distance(0);
  EXPECT_EQ(r.prefetch_distance(), 0u);
  EXPECT_THROW(runtime({.workers = 1, .prefetch_distance = runtime::max_prefetch_distance + 1}),
               std::invalid_argument);
}

TESSERA_INSTANTIATE_WORKER_COUNTS(prefetch_test);

#if defined(TESSERA_DEBUG_CHECKS)
// ---- adapting the distance (worker::choose_step_mode, given a clock by the test) ---------------

/// What the sampler's clock hook saw: per worker, a bit per distance it ran an interval at since
/// the last reset, the last one, and how many intervals.
struct seen_distances {
  static constexpr unsigned max_workers = 64;
  std::array<std::atomic<std::uint64_t>, max_workers> mask{};
  std::array<std::atomic<unsigned>, max_workers> last{};
  std::array<std::atomic<std::uint64_t>, max_workers> intervals{};
  /// The count of intervals (since the reset) at the first one not at distance `watched`.
  std::array<std::atomic<std::uint64_t>, max_workers> first_other{};
  std::atomic<unsigned> watched{~0u};
  void reset() {
    for (auto& m : mask) m.store(0, std::memory_order_relaxed);
    for (auto& n : intervals) n.store(0, std::memory_order_relaxed);
    for (auto& n : first_other) n.store(0, std::memory_order_relaxed);
  }
};
seen_distances g_seen;
/// true: an interval is shorter the longer the distance; false: the shorter.
std::atomic<bool> g_longer_is_faster{true};

std::uint64_t fake_interval(unsigned w, unsigned distance, unsigned /*mode*/) {
  g_seen.mask[w].fetch_or(std::uint64_t{1} << std::min(distance, 63u), std::memory_order_relaxed);
  g_seen.last[w].store(distance, std::memory_order_relaxed);
  const std::uint64_t n = g_seen.intervals[w].fetch_add(1, std::memory_order_relaxed) + 1;
  if (distance != g_seen.watched.load(std::memory_order_relaxed) &&
      g_seen.first_other[w].load(std::memory_order_relaxed) == 0) {
    g_seen.first_other[w].store(n, std::memory_order_relaxed);
  }
  // Every mode alike: a mode probe never wins. Each distance step is worth well over the
  // sampler's 1/32.
  return g_longer_is_faster.load(std::memory_order_relaxed) ? 1'000'000 / (distance + 1)
                                                             : 10'000 * (distance + 1);
}

class adaptive_distance_test : public runtime_fixture {
 protected:
  void SetUp() override {
    runtime_fixture::SetUp();
    g_seen.reset();
    g_seen.watched.store(~0u, std::memory_order_relaxed);
    g_longer_is_faster.store(true, std::memory_order_relaxed);
    detail::test_hooks::interval_ticks.store(&fake_interval, std::memory_order_release);
  }
  void TearDown() override {
    m_stop.store(true, std::memory_order_relaxed);
    if (m_running) rt().wait(m_group);
    detail::test_hooks::interval_ticks.store(nullptr, std::memory_order_release);
    runtime_fixture::TearDown();
  }
  /// Every worker busy with annotated tasks that re-run until the test ends.
  void keep_busy(runtime& r) {
    m_group = r.make_group();
    for (unsigned i = 0; i < 4 * r.workers(); ++i) {
      auto* t = r.make_task<endless_visits>(m_arena, i, m_stop);
      t->annotate(worker_id(static_cast<std::uint16_t>(i % r.workers())));
      r.spawn(t, m_group);
    }
    m_running = true;
  }
  /// Waits until `done(w)` holds for every worker (true), or a minute passed (false).
  template <class F>
  bool until_every_worker(const runtime& r, F done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      bool all = true;
      for (unsigned w = 0; w < r.workers() && all; ++w) all = done(w);
      if (all) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  /// Until every worker's last interval ran at distance `d`.
  bool until_every_worker_at(const runtime& r, unsigned d) {
    return until_every_worker(
        r, [d](unsigned w) { return g_seen.last[w].load(std::memory_order_relaxed) == d; });
  }
  /// Until every worker ran `n` intervals since the counts were last reset.
  bool until_every_worker_ran(const runtime& r, std::uint64_t n) {
    return until_every_worker(
        r, [n](unsigned w) { return g_seen.intervals[w].load(std::memory_order_relaxed) >= n; });
  }
  static bool saw_only(unsigned w, unsigned d) {
    return g_seen.mask[w].load(std::memory_order_relaxed) == (std::uint64_t{1} << d);
  }

  arena m_arena;
  std::atomic<bool> m_stop{false};
  group m_group{};
  bool m_running = false;
};

TEST_P(adaptive_distance_test, climbs_to_the_longest_distance_when_it_is_faster) {
  auto& r = start({.prefetch_distance = 2});
  keep_busy(r);
  ASSERT_TRUE(until_every_worker_at(r, runtime::max_prefetch_distance))
      << "a worker did not reach distance " << runtime::max_prefetch_distance;
  EXPECT_EQ(r.prefetch_distance(), 2u) << "adapting changed the distance set";
  // And stays there: in 3,000 more intervals each worker probes every change at least once.
  for (unsigned w = 0; w < r.workers(); ++w) g_seen.intervals[w].store(0);
  ASSERT_TRUE(until_every_worker_ran(r, 3000));
  for (unsigned w = 0; w < r.workers(); ++w) {
    const std::uint64_t m = g_seen.mask[w].load(std::memory_order_relaxed);
    EXPECT_EQ(m >> (runtime::max_prefetch_distance + 1), 0u) << "worker " << w << " above 16";
    EXPECT_EQ(m & 1u, 0u) << "worker " << w << " ran at 0, prefetching off";
    EXPECT_EQ(g_seen.last[w].load(std::memory_order_relaxed), runtime::max_prefetch_distance)
        << "worker " << w;
  }
  // The statistics say so: each worker at 16, having taken 2 -> 4 -> 8 -> 16 (three changes,
  // each a probe that won twice) and probed since.
  ASSERT_TRUE(until_every_worker(r, [&r](unsigned w) {
    return r.statistics().workers[w].prefetch_distance == runtime::max_prefetch_distance;
  }));
  for (const worker_statistics& w : r.statistics().workers) {
    EXPECT_GE(w.step_changes, 3u);
    EXPECT_GE(w.step_probes, 2 * w.step_changes + 1);
  }
}

TEST_P(adaptive_distance_test, descends_to_one_when_shorter_is_faster) {
  g_longer_is_faster.store(false, std::memory_order_relaxed);
  auto& r = start({.prefetch_distance = 8});
  keep_busy(r);
  ASSERT_TRUE(until_every_worker_at(r, 1)) << "a worker did not reach distance 1";
  for (unsigned w = 0; w < r.workers(); ++w) {
    EXPECT_EQ(g_seen.mask[w].load(std::memory_order_relaxed) & 1u, 0u)
        << "worker " << w << " ran at 0, prefetching off";
  }
}

TEST_P(adaptive_distance_test, set_prefetch_distance_starts_every_worker_again_from_it) {
  auto& r = start({.prefetch_distance = 2});
  keep_busy(r);
  ASSERT_TRUE(until_every_worker_at(r, runtime::max_prefetch_distance));
  g_longer_is_faster.store(false, std::memory_order_relaxed);
  g_seen.reset();
  r.set_prefetch_distance(5);
  // Each worker runs at 5 (an interval under way when it looked may still end at 16), then goes
  // down from there: no interval above 10 again (a probe of twice 5 runs a few at 10 and loses).
  ASSERT_TRUE(until_every_worker(r, [](unsigned w) {
    return (g_seen.mask[w].load(std::memory_order_relaxed) & (1u << 5)) != 0;
  })) << "a worker never ran at the distance set";
  g_seen.reset();
  ASSERT_TRUE(until_every_worker_at(r, 1))
      << "a worker did not go down from the distance set";
  for (unsigned w = 0; w < r.workers(); ++w) {
    EXPECT_EQ(g_seen.mask[w].load(std::memory_order_relaxed) >> 11, 0u)
        << "worker " << w << " went back to the distance it had adapted to";
  }
}

// The clock turns: after thousands of intervals at 16, each probe lost and the waits between
// them grown to the longest (2,048 intervals), shorter becomes faster. The held distance runs
// slower than when it was last compared, so the probes come again at once: the first interval
// below 16 within a thousand (the waits alone would take up to ~6,000), then down to 1.
TEST_P(adaptive_distance_test, follows_a_change_in_which_distance_is_faster) {
  auto& r = start({.prefetch_distance = 2});
  keep_busy(r);
  ASSERT_TRUE(until_every_worker_at(r, runtime::max_prefetch_distance));
  for (unsigned w = 0; w < r.workers(); ++w) g_seen.intervals[w].store(0);
  ASSERT_TRUE(until_every_worker_ran(r, 5000));
  g_seen.watched.store(runtime::max_prefetch_distance, std::memory_order_relaxed);
  g_seen.reset();
  g_longer_is_faster.store(false, std::memory_order_relaxed);
  ASSERT_TRUE(until_every_worker_at(r, 1)) << "a worker did not follow the clock down";
  for (unsigned w = 0; w < r.workers(); ++w) {
    EXPECT_LE(g_seen.first_other[w].load(std::memory_order_relaxed), 1000u)
        << "worker " << w << " waited out its probe interval before it looked again";
  }
}

/// Distance 4 fast for the first 9 intervals a worker runs at it (one probe), slow after; 2 in
/// between; every other distance slow. Records the longest run of intervals at 4.
std::array<std::atomic<unsigned>, seen_distances::max_workers> g_at_four{};
std::array<std::atomic<unsigned>, seen_distances::max_workers> g_run_at_four{};
std::array<std::atomic<unsigned>, seen_distances::max_workers> g_longest_at_four{};

std::uint64_t once_fast_at_four(unsigned w, unsigned distance, unsigned mode) {
  fake_interval(w, distance, mode);  // the counts
  if (distance != 4) {
    g_run_at_four[w].store(0, std::memory_order_relaxed);
    return distance == 2 ? 5'000 : 10'000;
  }
  const unsigned run = g_run_at_four[w].fetch_add(1, std::memory_order_relaxed) + 1;
  if (run > g_longest_at_four[w].load(std::memory_order_relaxed)) {
    g_longest_at_four[w].store(run, std::memory_order_relaxed);
  }
  return g_at_four[w].fetch_add(1, std::memory_order_relaxed) < 9 ? 1'000 : 10'000;
}

// A probe that wins once is tried again before its change is taken: here the first probe of
// distance 4 wins and its repetition loses, so no worker ever holds 4 (runs of at most one
// probe's 9 intervals there), where a single win would have held it for 64 intervals at least.
TEST_P(adaptive_distance_test, a_change_is_taken_only_if_it_wins_twice) {
  for (unsigned w = 0; w < seen_distances::max_workers; ++w) {
    g_at_four[w].store(0);
    g_run_at_four[w].store(0);
    g_longest_at_four[w].store(0);
  }
  detail::test_hooks::interval_ticks.store(&once_fast_at_four, std::memory_order_release);
  auto& r = start({.prefetch_distance = 2});
  keep_busy(r);
  ASSERT_TRUE(until_every_worker(r, [](unsigned w) {
    return g_at_four[w].load(std::memory_order_relaxed) >= 30;  // three probes of 4 at least
  }));
  for (unsigned w = 0; w < r.workers(); ++w) {
    EXPECT_LE(g_longest_at_four[w].load(std::memory_order_relaxed), 9u)
        << "worker " << w << " held distance 4 after a single win";
  }
}

TEST_P(adaptive_distance_test, keeps_the_distance_set_when_told_not_to_adapt) {
  auto& r = start({.prefetch_distance = 3, .adapt_prefetch_distance = false});
  keep_busy(r);
  // Step modes are still probed, so the sampler runs: a few thousand intervals each.
  ASSERT_TRUE(until_every_worker_ran(r, 5000));
  for (unsigned w = 0; w < r.workers(); ++w) EXPECT_TRUE(saw_only(w, 3)) << "worker " << w;
  for (const worker_statistics& w : r.statistics().workers) {
    EXPECT_EQ(w.prefetch_distance, 3u);
    EXPECT_GT(w.step_probes, 0u);  // the modes'
    EXPECT_EQ(w.step_changes, 0u) << "every mode runs alike here: no probe may win";
  }
}

TEST_P(adaptive_distance_test, statistics_give_the_distance_of_idle_workers) {
  // No task runs: the distance a worker starts with, and one set later, reach its statistics
  // all the same (a parked worker takes it up when its sleep ends).
  auto& r = start({.prefetch_distance = 3, .adapt_prefetch_distance = false});
  ASSERT_TRUE(until_every_worker(
      r, [&r](unsigned w) { return r.statistics().workers[w].prefetch_distance == 3; }))
      << "a worker's statistics lack the distance it started with";
  r.set_prefetch_distance(5);
  ASSERT_TRUE(until_every_worker(
      r, [&r](unsigned w) { return r.statistics().workers[w].prefetch_distance == 5; }))
      << "an idle worker's statistics lack the distance set";
}

TEST_P(adaptive_distance_test, distance_zero_stays_zero) {
  auto& r = start({.prefetch_distance = 0});
  keep_busy(r);
  ASSERT_TRUE(until_every_worker_ran(r, 5000));
  for (unsigned w = 0; w < r.workers(); ++w) EXPECT_TRUE(saw_only(w, 0)) << "worker " << w;
  EXPECT_EQ(r.statistics().total().prefetches, 0u);
}

TESSERA_INSTANTIATE_WORKER_COUNTS(adaptive_distance_test);
#endif  // TESSERA_DEBUG_CHECKS

}  // namespace
}  // namespace tessera::test
