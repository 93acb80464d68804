// kv::olc_tree, single-threaded: semantics against std::map, splits up to several levels,
// scans across leaves, and the checker after every phase.

#include "kv/olc_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <random>
#include <vector>

#include "kv/checker.h"
#include "model_ops.h"
#include "test_support.h"

namespace kv {
namespace {

using test::apply_point_op;
using test::point_op;

void expect_consistent(const olc_tree& tree) {
  const check_result r = check_tree(tree.root());
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.stats.keys, tree.size());
  EXPECT_EQ(r.stats.height, tree.height());
}

/// Every entry of the tree, by one scan from 0.
std::vector<entry> all_entries(const olc_tree& tree) {
  std::vector<entry> out(tree.size() + 1);
  out.resize(tree.scan(0, out.size(), out.data()));
  return out;
}

void expect_equal(const olc_tree& tree, const std::map<key_type, value_t>& model) {
  const std::vector<entry> got = all_entries(tree);
  ASSERT_EQ(got.size(), model.size());
  auto it = model.begin();
  for (const entry& e : got) {
    ASSERT_EQ(e.key, it->first);
    ASSERT_EQ(e.value, it->second);
    ++it;
  }
}

TEST(OlcTree, EmptyTree) {
  olc_tree tree;
  EXPECT_EQ(tree.size(), 0u);
  EXPECT_EQ(tree.height(), 1u);
  EXPECT_EQ(tree.lookup(1), std::nullopt);
  EXPECT_FALSE(tree.update(1, 1));
  EXPECT_FALSE(tree.remove(1));
  entry out[4];
  EXPECT_EQ(tree.scan(0, 4, out), 0u);
  expect_consistent(tree);
}

TEST(OlcTree, BasicOperations) {
  olc_tree tree;
  EXPECT_TRUE(tree.insert(7, 70));
  EXPECT_FALSE(tree.insert(7, 71));
  EXPECT_EQ(tree.lookup(7), 70u);
  EXPECT_TRUE(tree.update(7, 72));
  EXPECT_EQ(tree.lookup(7), 72u);
  tree.upsert(8, 80);
  tree.upsert(8, 81);
  EXPECT_EQ(tree.lookup(8), 81u);
  EXPECT_EQ(tree.size(), 2u);
  EXPECT_TRUE(tree.remove(7));
  EXPECT_FALSE(tree.remove(7));
  EXPECT_EQ(tree.lookup(7), std::nullopt);
  EXPECT_EQ(tree.size(), 1u);
  expect_consistent(tree);
}

TEST(OlcTree, ExtremeKeys) {
  olc_tree tree;
  for (key_type k = 0; k < 3 * node::leaf_capacity; ++k) ASSERT_TRUE(tree.insert(k * 1000, k));
  EXPECT_TRUE(tree.insert(key_infinity, 1));
  EXPECT_TRUE(tree.insert(key_infinity - 1, 2));
  EXPECT_FALSE(tree.insert(key_infinity, 3));
  EXPECT_EQ(tree.lookup(0), 0u);
  EXPECT_EQ(tree.lookup(key_infinity), 1u);
  entry out[4];
  ASSERT_EQ(tree.scan(key_infinity - 1, 4, out), 2u);
  EXPECT_EQ(out[0], (entry{key_infinity - 1, 2}));
  EXPECT_EQ(out[1], (entry{key_infinity, 1}));
  EXPECT_TRUE(tree.remove(key_infinity));
  EXPECT_EQ(tree.lookup(key_infinity), std::nullopt);
  expect_consistent(tree);
}

TEST(OlcTree, RootSplitsGrowThreeAndMoreLevels) {
  olc_tree tree;
  std::size_t n = 0;
  // Ascending keys fill leaves to half, the worst case for height.
  while (tree.height() < 4) {
    ASSERT_TRUE(tree.insert(n, n * 3));
    ++n;
  }
  expect_consistent(tree);
  EXPECT_EQ(tree.size(), n);
  for (key_type k = 0; k < n; ++k) ASSERT_EQ(tree.lookup(k), k * 3);
  EXPECT_EQ(tree.lookup(n), std::nullopt);
}

TEST(OlcTree, DescendingAndRandomInsertOrders) {
  const std::size_t n = 5'000 * test::scale;
  olc_tree down;
  for (std::size_t i = n; i-- > 0;) ASSERT_TRUE(down.insert(i, i));
  expect_consistent(down);
  EXPECT_EQ(down.size(), n);
  olc_tree random;
  std::vector<key_type> keys;
  for (std::size_t i = 0; i < n; ++i) keys.push_back(test::mix(i));
  for (key_type k : keys) ASSERT_TRUE(random.insert(k, k ^ 1));
  expect_consistent(random);
  for (key_type k : keys) ASSERT_EQ(random.lookup(k), k ^ 1);
  if constexpr (node_bytes <= 1024) {
    EXPECT_GE(random.height(), 3u);
  }
}

TEST(OlcTree, ScanAcrossLeaves) {
  olc_tree tree;
  const std::size_t n = 2'000;
  for (key_type k = 0; k < n; ++k) ASSERT_TRUE(tree.insert(2 * k + 1, k));  // odd keys
  std::vector<entry> out(300);
  // From an absent key, across many leaves, limited by max_count.
  ASSERT_EQ(tree.scan(100, 300, out.data()), 300u);
  for (std::size_t i = 0; i < 300; ++i) ASSERT_EQ(out[i], (entry{101 + 2 * i, 50 + i}));
  // Running into the end of the tree.
  ASSERT_EQ(tree.scan(2 * n - 10, 300, out.data()), 5u);
  EXPECT_EQ(out[4].key, 2 * n - 1);
  EXPECT_EQ(tree.scan(2 * n, 300, out.data()), 0u);
  EXPECT_EQ(tree.scan(0, 0, out.data()), 0u);
}

TEST(OlcTree, SequentialDifferentialAgainstStdMap) {
  olc_tree tree;
  std::map<key_type, value_t> model;
  std::mt19937_64 rng(42);
  const std::size_t ops = 40'000 * test::scale;
  const key_type key_space = 8'000 * test::scale;  // dense enough for hits, splits and removes
  std::vector<entry> got(64);
  for (std::size_t i = 0; i < ops; ++i) {
    const key_type k = rng() % key_space;
    const value_t v = rng();
    // 25% insert, 12.5% update, upsert, remove, scan (draw 5), 25% lookup.
    static constexpr point_op mix[8] = {point_op::insert, point_op::insert, point_op::update,
                                        point_op::upsert, point_op::remove, point_op::lookup,
                                        point_op::lookup, point_op::lookup};
    const unsigned draw = rng() % 8;
    switch (draw) {
      case 5: {
        const std::size_t want = rng() % got.size();
        const std::size_t n = tree.scan(k, want, got.data());
        auto it = model.lower_bound(k);
        std::size_t expected = 0;
        for (; it != model.end() && expected < want; ++it, ++expected) {
          ASSERT_LT(expected, n);
          ASSERT_EQ(got[expected], (entry{it->first, it->second}));
        }
        ASSERT_EQ(n, expected);
        break;
      }
      default:
        apply_point_op(tree, model, mix[draw], k, v);
        if (HasFatalFailure()) return;
    }
  }
  expect_consistent(tree);
  expect_equal(tree, model);
}

TEST(OlcTree, RemoveEverythingThenRefill) {
  olc_tree tree;
  const std::size_t n = 6'000 * test::scale;
  std::vector<key_type> keys;
  for (std::size_t i = 0; i < n; ++i) keys.push_back(test::mix(i) >> 1);
  for (key_type k : keys) ASSERT_TRUE(tree.insert(k, 1));
  const std::size_t height = tree.height();
  std::shuffle(keys.begin(), keys.end(), std::mt19937_64(3));
  for (key_type k : keys) ASSERT_TRUE(tree.remove(k));
  EXPECT_EQ(tree.size(), 0u);
  entry out[2];
  EXPECT_EQ(tree.scan(0, 2, out), 0u);
  const check_result empty = check_tree(tree.root());
  ASSERT_TRUE(empty.ok) << empty.message;
  EXPECT_EQ(empty.stats.keys, 0u);
  EXPECT_EQ(empty.stats.empty_leaves, empty.stats.leaves) << "removal keeps empty leaves";
  EXPECT_EQ(tree.height(), height) << "removal does not shrink the tree";
  for (key_type k : keys) ASSERT_TRUE(tree.insert(k, 2));
  for (key_type k : keys) ASSERT_EQ(tree.lookup(k), 2u);
  expect_consistent(tree);
  EXPECT_EQ(tree.size(), n);
}

}  // namespace
}  // namespace kv
