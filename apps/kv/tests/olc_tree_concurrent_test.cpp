// kv::olc_tree under concurrency: randomized differential tests on interleaved key partitions,
// readers racing with splits, contended inserts of the same keys, removal and refill. Every
// test ends with the checker on the quiescent tree. Run under ThreadSanitizer too.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "kv/checker.h"
#include "kv/olc_tree.h"
#include "model_ops.h"
#include "test_support.h"

namespace kv {
namespace {

using test::apply_point_op;
using test::key_of_value;
using test::point_op;
using test::value_for;

template <class F>
void run_threads(unsigned threads, F&& body) {
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back([&body, t] { body(t); });
  for (std::thread& t : pool) t.join();
}

void expect_consistent(const olc_tree& tree, std::size_t keys) {
  const check_result r = check_tree(tree.root());
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.stats.keys, keys);
  EXPECT_EQ(tree.size(), keys);
}

class OlcTreeConcurrent : public ::testing::TestWithParam<unsigned> {};

// Each thread owns the keys k with k % threads == t, so all threads share leaves but each can
// check every result about its own keys against its private std::map.
TEST_P(OlcTreeConcurrent, DifferentialOnInterleavedPartitions) {
  const unsigned threads = GetParam();
  const std::size_t ops_per_thread = 80'000 * test::scale / threads;
  const key_type keys_per_thread = 16'000 * test::scale / threads;
  olc_tree tree;
  std::vector<std::map<key_type, value_t>> models(threads);
  run_threads(threads, [&](unsigned t) {
    std::map<key_type, value_t>& model = models[t];
    std::mt19937_64 rng(1000 + t);
    std::vector<entry> got(48);
    auto own_key = [&] { return (rng() % keys_per_thread) * threads + t; };
    for (std::size_t i = 0; i < ops_per_thread; ++i) {
      const key_type k = own_key();
      const value_t v = value_for(k, static_cast<std::uint32_t>(i));
      // 20% insert, 10% update, 10% upsert, 20% remove, 10% scan (draw 6), 30% lookup.
      static constexpr point_op mix[10] = {
          point_op::insert, point_op::insert, point_op::update, point_op::upsert, point_op::remove,
          point_op::remove, point_op::lookup, point_op::lookup, point_op::lookup, point_op::lookup};
      const unsigned draw = rng() % 10;
      switch (draw) {
        case 6: {
          // The scan sees everyone's keys: ascending, legal values, and exactly our own keys
          // in the range it covers.
          const key_type from = rng() % (keys_per_thread * threads);
          const std::size_t want = 1 + rng() % got.size();
          const std::size_t n = tree.scan(from, want, got.data());
          ASSERT_LE(n, want);
          auto mine = model.lower_bound(from);
          for (std::size_t j = 0; j < n; ++j) {
            const entry& e = got[j];
            ASSERT_GE(e.key, from);
            if (j > 0) {
              ASSERT_GT(e.key, got[j - 1].key);
            }
            ASSERT_EQ(key_of_value(e.value), e.key);
            if (e.key % threads != t) continue;
            ASSERT_TRUE(mine != model.end() && mine->first == e.key) << "unexpected own key";
            ASSERT_EQ(mine->second, e.value);
            ++mine;
          }
          // Own keys below the last returned key (or all, if the scan hit the end) were seen.
          if (mine != model.end()) {
            ASSERT_TRUE(n == want && mine->first > got[n - 1].key) << "scan missed own key";
          }
          break;
        }
        default:
          apply_point_op(tree, model, mix[draw], k, v);
          if (::testing::Test::HasFatalFailure()) return;
      }
    }
  });
  std::map<key_type, value_t> all;
  for (const auto& m : models) all.insert(m.begin(), m.end());
  expect_consistent(tree, all.size());
  std::vector<entry> got(all.size() + 1);
  got.resize(tree.scan(0, got.size(), got.data()));
  ASSERT_EQ(got.size(), all.size());
  auto it = all.begin();
  for (const entry& e : got) {
    ASSERT_EQ(e, (entry{it->first, it->second}));
    ++it;
  }
}

// Readers on shared keys while two writers force splits everywhere: preloaded (even) keys must
// always be found, scans must be strictly ascending, contiguous over the even keys, with legal
// values.
TEST_P(OlcTreeConcurrent, ReadersSeeConsistentDataDuringSplits) {
  const unsigned readers = std::max(2u, GetParam() / 2);
  const key_type evens = 4'000 * test::scale;
  olc_tree tree;
  for (key_type i = 0; i < evens; ++i) ASSERT_TRUE(tree.insert(2 * i, value_for(2 * i, 0)));
  std::atomic<unsigned> writers_left{2};
  run_threads(2 + readers, [&](unsigned t) {
    if (t < 2) {
      // Writer 0 inserts odd keys ascending, writer 1 descending; both re-stamp even keys.
      for (key_type i = 0; i < evens; ++i) {
        const key_type odd = 2 * (t == 0 ? i : evens - 1 - i) + 1;
        tree.insert(odd, value_for(odd, 1));
        if (i % 4 == 0) tree.upsert(2 * (i / 2), value_for(2 * (i / 2), 2 + t));
      }
      writers_left.fetch_sub(1);
      return;
    }
    std::mt19937_64 rng(t);
    std::vector<entry> got(100);
    // Keep reading until both writers are done (and at least a few rounds).
    for (std::size_t round = 0; round < 50 || writers_left.load() > 0; ++round) {
      for (int j = 0; j < 20; ++j) {
        const key_type k = rng() % (2 * evens);
        const std::optional<value_t> found = tree.lookup(k);
        if (k % 2 == 0) {
          ASSERT_TRUE(found.has_value()) << "preloaded key " << k << " missing";
        }
        if (found) {
          ASSERT_EQ(key_of_value(*found), k);
        }
      }
      const key_type from = rng() % (2 * evens);
      const std::size_t n = tree.scan(from, got.size(), got.data());
      key_type next_even = from + from % 2;
      for (std::size_t j = 0; j < n; ++j) {
        ASSERT_GE(got[j].key, from);
        if (j > 0) {
          ASSERT_GT(got[j].key, got[j - 1].key);
        }
        ASSERT_EQ(key_of_value(got[j].value), got[j].key);
        if (got[j].key % 2 == 0) {
          ASSERT_EQ(got[j].key, next_even) << "scan skipped a preloaded key";
          next_even += 2;
        }
      }
      if (n < got.size()) {
        ASSERT_EQ(next_even, 2 * evens) << "scan ended early";
      }
    }
  });
  expect_consistent(tree, 2 * evens);
}

// All threads insert the same keys: exactly one insert per key wins.
TEST_P(OlcTreeConcurrent, ContendedInsertsOfTheSameKeys) {
  const unsigned threads = GetParam();
  const std::size_t n = 10'000 * test::scale;
  olc_tree tree;
  std::atomic<std::size_t> wins{0};
  run_threads(threads, [&](unsigned t) {
    std::vector<key_type> keys(n);
    for (std::size_t i = 0; i < n; ++i) keys[i] = test::spread(i);
    std::shuffle(keys.begin(), keys.end(), std::mt19937_64(t));
    std::size_t mine = 0;
    for (key_type k : keys) mine += tree.insert(k, value_for(k, t)) ? 1 : 0;
    // Hot keys: everyone updates the same few, which share one or two leaves.
    for (std::size_t i = 0; i < 2'000; ++i) {
      const key_type k = keys[i % 16];
      if (i % 2 == 0) {
        tree.upsert(k, value_for(k, t));
      } else {
        ASSERT_TRUE(tree.update(k, value_for(k, t + 100)));
      }
    }
    wins.fetch_add(mine);
  });
  EXPECT_EQ(wins.load(), n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::optional<value_t> v = tree.lookup(test::spread(i));
    ASSERT_TRUE(v.has_value());
    ASSERT_EQ(key_of_value(*v), test::spread(i));
  }
  expect_consistent(tree, n);
}

// Fill, remove everything, refill; each phase concurrent on interleaved partitions.
TEST_P(OlcTreeConcurrent, RemoveEverythingThenRefill) {
  const unsigned threads = GetParam();
  const key_type n = 12'000 * test::scale;
  olc_tree tree;
  auto phase = [&](auto op) {
    run_threads(threads, [&](unsigned t) {
      for (key_type i = t; i < n; i += threads) op(test::spread(i));
    });
  };
  phase([&](key_type k) { ASSERT_TRUE(tree.insert(k, value_for(k, 1))); });
  expect_consistent(tree, n);
  phase([&](key_type k) { ASSERT_TRUE(tree.remove(k)); });
  expect_consistent(tree, 0);
  phase([&](key_type k) { ASSERT_TRUE(tree.insert(k, value_for(k, 2))); });
  expect_consistent(tree, n);
  for (key_type i = 0; i < n; ++i) {
    const key_type k = test::spread(i);
    ASSERT_EQ(tree.lookup(k), value_for(k, 2));
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, OlcTreeConcurrent, ::testing::Values(2u, 4u, 8u),
                         [](const ::testing::TestParamInfo<unsigned>& p) {
                           return std::to_string(p.param) + "threads";
                         });

}  // namespace
}  // namespace kv
