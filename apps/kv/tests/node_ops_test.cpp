// Single-node operations of kv/node_ops.h and the layout of kv/node.h.

#include "kv/node_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <random>
#include <vector>

#include "kv/node.h"

namespace kv {
namespace {

std::unique_ptr<node> make_leaf() { return std::make_unique<node>(node_kind::leaf, 0); }

/// A leaf holding `keys` (sorted, unique) with value = key * 10.
std::unique_ptr<node> leaf_with(const std::vector<key_type>& keys) {
  auto n = make_leaf();
  for (key_type k : keys) EXPECT_EQ(leaf_insert(*n, k, k * 10), insert_result::inserted);
  return n;
}

TEST(NodeLayout, BodyFillsTheBlockAfterTheHeader) {
  EXPECT_EQ(sizeof(node) + header_bytes, node_bytes);
  EXPECT_EQ(alignof(node), 64u);
  EXPECT_EQ(header_bytes, 64u);
  // Metadata (kind, level, count, high key, right) sits in the first cache line of the body.
  EXPECT_LE(node::meta_bytes, 64u);
  EXPECT_GE(node::slot_count, node::inner_capacity + 1);
  if constexpr (node_bytes == 1024) {
    EXPECT_EQ(node::leaf_capacity, 58u);
    EXPECT_EQ(node::inner_capacity, 58u);
  }
}

TEST(NodeLayout, FreshNodeCoversEverything) {
  const auto n = make_leaf();
  EXPECT_EQ(n->kind(), node_kind::leaf);
  EXPECT_EQ(n->level(), 0);
  EXPECT_EQ(n->count(), 0u);
  EXPECT_EQ(n->high_key(), key_infinity);
  EXPECT_EQ(n->right(), nullptr);
  EXPECT_FALSE(must_move_right(*n, 0));
  EXPECT_FALSE(must_move_right(*n, key_infinity));
  EXPECT_EQ(kind_for_level(0), node_kind::leaf);
  EXPECT_EQ(kind_for_level(1), node_kind::branch);
  EXPECT_EQ(kind_for_level(7), node_kind::inner);
}

TEST(NodeOps, LowerAndUpperBoundMatchTheStandardAlgorithms) {
  std::mt19937_64 rng(1);
  for (std::size_t len = 0; len <= node::leaf_capacity; ++len) {
    std::vector<key_type> keys;
    for (std::size_t i = 0; i < len; ++i) keys.push_back(10 * i + 5 + (rng() % 3));
    const auto n = leaf_with(keys);
    for (key_type probe = 0; probe < 10 * len + 20; ++probe) {
      const auto lb = static_cast<std::size_t>(std::lower_bound(keys.begin(), keys.end(), probe) -
                                               keys.begin());
      const auto ub = static_cast<std::size_t>(std::upper_bound(keys.begin(), keys.end(), probe) -
                                               keys.begin());
      ASSERT_EQ(lower_bound(*n, probe), lb) << "len " << len << " probe " << probe;
      ASSERT_EQ(upper_bound(*n, probe), ub) << "len " << len << " probe " << probe;
    }
  }
}

TEST(NodeOps, LeafInsertKeepsOrderAndReportsExistsAndFull) {
  auto n = make_leaf();
  std::vector<key_type> keys;
  for (std::size_t i = 0; i < node::leaf_capacity; ++i) keys.push_back(i * 7 + 1);
  std::shuffle(keys.begin(), keys.end(), std::mt19937_64(2));
  for (key_type k : keys) ASSERT_EQ(leaf_insert(*n, k, k * 10), insert_result::inserted);
  EXPECT_EQ(leaf_insert(*n, keys[3], 0), insert_result::exists);
  EXPECT_EQ(leaf_insert(*n, 2, 20), insert_result::full);
  EXPECT_TRUE(is_full(*n));
  ASSERT_EQ(n->count(), node::leaf_capacity);
  for (std::size_t i = 0; i < n->count(); ++i) {
    EXPECT_EQ(n->key(i), i * 7 + 1);
    EXPECT_EQ(n->value(i), (i * 7 + 1) * 10);
  }
}

TEST(NodeOps, LeafLookupUpdateUpsertRemove) {
  auto n = leaf_with({10, 20, 30});
  EXPECT_EQ(leaf_lookup(*n, 20), 200u);
  EXPECT_EQ(leaf_lookup(*n, 25), std::nullopt);
  EXPECT_TRUE(leaf_update(*n, 20, 201));
  EXPECT_FALSE(leaf_update(*n, 25, 1));
  EXPECT_EQ(leaf_lookup(*n, 20), 201u);
  EXPECT_EQ(leaf_upsert(*n, 30, 301), upsert_result::updated);
  EXPECT_EQ(leaf_upsert(*n, 5, 50), upsert_result::inserted);
  EXPECT_EQ(n->count(), 4u);
  EXPECT_TRUE(leaf_remove(*n, 20));
  EXPECT_FALSE(leaf_remove(*n, 20));
  EXPECT_TRUE(leaf_remove(*n, 5));
  EXPECT_TRUE(leaf_remove(*n, 30));
  EXPECT_TRUE(leaf_remove(*n, 10));
  EXPECT_EQ(n->count(), 0u);
  EXPECT_FALSE(leaf_remove(*n, 10));
  EXPECT_EQ(leaf_lookup(*n, 10), std::nullopt);
}

TEST(NodeOps, LeafUpsertReportsFull) {
  auto n = make_leaf();
  for (key_type k = 0; k < node::leaf_capacity; ++k)
    ASSERT_EQ(leaf_upsert(*n, k, k), upsert_result::inserted);
  EXPECT_EQ(leaf_upsert(*n, 0, 7), upsert_result::updated);
  EXPECT_EQ(leaf_upsert(*n, 1000, 7), upsert_result::full);
}

TEST(NodeOps, LeafScanFromAKey) {
  const auto n = leaf_with({10, 20, 30, 40});
  std::vector<entry> out(8);
  EXPECT_EQ(leaf_scan(*n, 0, out.data(), 8), 4u);
  EXPECT_EQ(out[0], (entry{10, 100}));
  EXPECT_EQ(out[3], (entry{40, 400}));
  EXPECT_EQ(leaf_scan(*n, 20, out.data(), 8), 3u);
  EXPECT_EQ(out[0], (entry{20, 200}));
  EXPECT_EQ(leaf_scan(*n, 21, out.data(), 2), 2u);
  EXPECT_EQ(out[0], (entry{30, 300}));
  EXPECT_EQ(out[1], (entry{40, 400}));
  EXPECT_EQ(leaf_scan(*n, 41, out.data(), 8), 0u);
  EXPECT_EQ(leaf_scan(*n, 0, out.data(), 0), 0u);
}

TEST(NodeOps, LeafSplitMovesTheUpperHalfAndLinksTheSibling) {
  auto left = make_leaf();
  auto far_right = make_leaf();
  left->set_high_key(100000);
  left->set_right(far_right.get());
  for (key_type k = 1; leaf_insert(*left, k * 2, k) == insert_result::inserted; ++k) {
  }
  auto right = make_leaf();
  const std::size_t before = left->count();
  const key_type sep = split(*left, *right);
  EXPECT_EQ(left->count() + right->count(), before);
  EXPECT_EQ(left->count(), before / 2);
  EXPECT_EQ(sep, right->key(0));
  EXPECT_LT(left->key(left->count() - 1), sep);
  EXPECT_EQ(left->high_key(), sep);
  EXPECT_EQ(left->right(), right.get());
  EXPECT_EQ(right->high_key(), 100000u);
  EXPECT_EQ(right->right(), far_right.get());
  EXPECT_TRUE(must_move_right(*left, sep));
  EXPECT_FALSE(must_move_right(*left, sep - 1));
  EXPECT_FALSE(must_move_right(*right, sep));
  EXPECT_EQ(leaf_lookup(*right, sep), sep / 2);
}

TEST(NodeOps, InnerInsertFollowsTheChildConvention) {
  // Children c0 | 100 | c1 | 200 | c2: child i covers [key(i-1), key(i)).
  node c0(node_kind::leaf, 0), c1(node_kind::leaf, 0), c2(node_kind::leaf, 0),
      c3(node_kind::leaf, 0);
  node inner(node_kind::branch, 1);
  make_root(inner, &c0, 100, &c2);
  inner_insert(inner, 50, &c1);   // c0 split at 50 into c0 | c1
  inner_insert(inner, 150, &c3);  // c2 split at 150 into c2 | c3
  ASSERT_EQ(inner.count(), 3u);
  EXPECT_EQ(inner.key(0), 50u);
  EXPECT_EQ(inner.key(1), 100u);
  EXPECT_EQ(inner.key(2), 150u);
  EXPECT_EQ(child_for(inner, 0), &c0);
  EXPECT_EQ(child_for(inner, 49), &c0);
  EXPECT_EQ(child_for(inner, 50), &c1);
  EXPECT_EQ(child_for(inner, 99), &c1);
  EXPECT_EQ(child_for(inner, 100), &c2);
  EXPECT_EQ(child_for(inner, 149), &c2);
  EXPECT_EQ(child_for(inner, 150), &c3);
  EXPECT_EQ(child_for(inner, key_infinity), &c3);
}

TEST(NodeOps, InnerSplitHandsTheMiddleSeparatorUp) {
  std::vector<std::unique_ptr<node>> leaves;
  for (std::size_t i = 0; i <= node::inner_capacity; ++i) leaves.push_back(make_leaf());
  node left(node_kind::branch, 1);
  make_root(left, leaves[0].get(), 10, leaves[1].get());
  for (std::size_t i = 2; i <= node::inner_capacity; ++i)
    inner_insert(left, 10 * i, leaves[i].get());
  ASSERT_TRUE(is_full(left));
  node right(node_kind::branch, 1);
  const std::size_t count = left.count();
  const key_type up = split(left, right);
  const std::size_t mid = count / 2;
  EXPECT_EQ(up, 10 * (mid + 1));
  EXPECT_EQ(left.count(), mid);
  EXPECT_EQ(right.count(), count - mid - 1);
  EXPECT_EQ(left.high_key(), up);
  EXPECT_EQ(right.high_key(), key_infinity);
  EXPECT_EQ(left.right(), &right);
  // Every child is still reachable from exactly one side, in order.
  for (std::size_t i = 0; i <= count; ++i) {
    const key_type probe = 10 * i + 5;
    const node* expected = leaves[i].get();
    EXPECT_EQ(must_move_right(left, probe) ? child_for(right, probe) : child_for(left, probe),
              expected)
        << "child " << i;
  }
}

TEST(NodeOps, RacingReaderStaysInsideTheNode) {
  // A reader may see any count (a torn snapshot); the accessors clamp it to the capacity.
  // set_count() rejects such values, so poke the field (bytes 2-3 of the body, see node.h).
  auto n = make_leaf();
  for (key_type k = 0; k < 5; ++k) ASSERT_EQ(leaf_insert(*n, k, k), insert_result::inserted);
  store_relaxed(*reinterpret_cast<std::uint16_t*>(reinterpret_cast<std::byte*>(n.get()) + 2),
                std::uint16_t{60000});
  EXPECT_EQ(n->count(), node::leaf_capacity);
  EXPECT_LE(lower_bound(*n, key_infinity), node::leaf_capacity);
  std::vector<entry> out(node::leaf_capacity);
  EXPECT_LE(leaf_scan(*n, 0, out.data(), out.size()), node::leaf_capacity);
  node inner(node_kind::inner, 2);
  store_relaxed(*reinterpret_cast<std::uint16_t*>(reinterpret_cast<std::byte*>(&inner) + 2),
                std::uint16_t{60000});
  EXPECT_EQ(inner.count(), node::inner_capacity);
  EXPECT_LE(child_index(inner, key_infinity), node::inner_capacity);
}

}  // namespace
}  // namespace kv
