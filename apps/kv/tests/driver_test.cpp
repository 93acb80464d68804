// kv::thread_driver and kv::tbb_driver: every index exactly once, worker ids in range, and
// batches of tree operations that produce the right tree.

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kv/checker.h"
#include "kv/olc_tree.h"
#include "kv/tbb_driver.h"
#include "kv/thread_driver.h"
#include "test_support.h"

namespace kv {
namespace {

static_assert(index_function<void (*)(std::size_t)>);
static_assert(index_function<void (*)(std::size_t, worker_id)>);
static_assert(!index_function<void (*)(worker_id)>);

template <class Driver>
void expect_every_index_once(Driver& driver, std::size_t count) {
  std::vector<std::atomic<unsigned>> seen(count);
  std::vector<std::atomic<unsigned>> per_worker(driver.threads());
  std::atomic<bool> bad_worker{false};
  driver.run(count, [&](std::size_t i, worker_id w) {
    seen[i].fetch_add(1, std::memory_order_relaxed);
    if (to_index(w) >= driver.threads()) {
      bad_worker.store(true);
      return;
    }
    per_worker[to_index(w)].fetch_add(1, std::memory_order_relaxed);
  });
  EXPECT_FALSE(bad_worker.load()) << "worker id out of range";
  std::size_t total = 0;
  for (const auto& w : per_worker) total += w.load();
  EXPECT_EQ(total, count);
  for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(seen[i].load(), 1u) << "index " << i;
}

/// Inserts n keys through the driver, then checks them and the tree through it too.
template <class Driver>
void expect_builds_tree(Driver& driver) {
  const std::size_t n = 20'000 * test::scale;
  olc_tree tree;
  driver.run(
      n, [&](std::size_t i) { tree.insert(test::spread(i), test::value_for(test::spread(i), 1)); });
  const check_result r = check_tree(tree.root());
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.stats.keys, n);
  // A mixed batch: even indices update, odd indices look up; per-worker hit counters.
  std::vector<std::size_t> hits(driver.threads() * 8);  // padded: 8 counters per line
  driver.run(n, [&](std::size_t i, worker_id w) {
    const key_type k = test::spread(i);
    if (i % 2 == 0) {
      if (tree.update(k, test::value_for(k, 2))) ++hits[8 * to_index(w)];
    } else if (tree.lookup(k) == test::value_for(k, 1)) {
      ++hits[8 * to_index(w)];
    }
  });
  std::size_t total = 0;
  for (std::size_t h : hits) total += h;
  EXPECT_EQ(total, n);
  for (std::size_t i = 0; i < n; ++i) {
    const key_type k = test::spread(i);
    ASSERT_EQ(tree.lookup(k), test::value_for(k, i % 2 == 0 ? 2 : 1));
  }
}

class ThreadDriver : public ::testing::TestWithParam<unsigned> {};

class TbbDriver : public ::testing::TestWithParam<unsigned> {};

TEST_P(ThreadDriver, RunsEveryIndexOnce) {
  thread_driver driver(GetParam());
  EXPECT_EQ(driver.threads(), GetParam());
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{499}, std::size_t{500},
                            std::size_t{501}, std::size_t{12'345}}) {
    expect_every_index_once(driver, count);
  }
}

TEST_P(ThreadDriver, UsesAllThreadsAndSmallChunks) {
  thread_driver driver(GetParam(), 1);
  std::mutex mutex;
  std::set<std::thread::id> ids;
  std::atomic<unsigned> arrived{0};
  // Every worker must take part: each call waits (bounded) until all workers arrived.
  driver.run(GetParam(), [&](std::size_t) {
    {
      const std::lock_guard lock(mutex);
      ids.insert(std::this_thread::get_id());
    }
    arrived.fetch_add(1);
    for (int spin = 0; spin < 1'000'000 && arrived.load() < GetParam(); ++spin)
      std::this_thread::yield();
  });
  EXPECT_EQ(ids.size(), GetParam());
  expect_every_index_once(driver, 1'001);
}

TEST_P(ThreadDriver, BuildsTheTree) {
  thread_driver driver(GetParam());
  expect_builds_tree(driver);
}

TEST_P(TbbDriver, RunsEveryIndexOnce) {
  tbb_driver driver(GetParam());
  EXPECT_EQ(driver.threads(), GetParam());
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{499}, std::size_t{500},
                            std::size_t{501}, std::size_t{12'345}}) {
    expect_every_index_once(driver, count);
  }
}

TEST_P(TbbDriver, RunsChunksAsTasks) {
  tbb_driver driver(GetParam(), 100);
  // Within one call of the chunk body the worker stays the same, and chunks are whole.
  std::vector<std::atomic<int>> chunk_worker(50);
  for (auto& c : chunk_worker) c.store(-1);
  std::atomic<bool> split_chunk{false};
  driver.run(5'000, [&](std::size_t i, worker_id w) {
    const int expected = -1;
    int first = expected;
    const int me = static_cast<int>(to_index(w));
    if (!chunk_worker[i / 100].compare_exchange_strong(first, me) && first != me) {
      split_chunk.store(true);
    }
  });
  EXPECT_FALSE(split_chunk.load()) << "a chunk ran on two workers";
}

TEST_P(TbbDriver, BuildsTheTree) {
  tbb_driver driver(GetParam());
  expect_builds_tree(driver);
}

std::string workers_name(const ::testing::TestParamInfo<unsigned>& p) {
  return std::to_string(p.param) + "workers";
}

INSTANTIATE_TEST_SUITE_P(Workers, ThreadDriver, ::testing::Values(1u, 2u, 4u, 8u), workers_name);
// Under ThreadSanitizer only the 1-thread instance exists (test_support.h says why).
constexpr std::array<unsigned, 4> tbb_worker_counts{1, 2, 4, 8};
INSTANTIATE_TEST_SUITE_P(Workers, TbbDriver,
                         ::testing::ValuesIn(tbb_worker_counts.begin(),
                                             test::tbb_workers_invisible_to_tsan
                                                 ? tbb_worker_counts.begin() + 1
                                                 : tbb_worker_counts.end()),
                         workers_name);

}  // namespace
}  // namespace kv
