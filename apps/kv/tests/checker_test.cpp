// kv::check_tree on hand-built trees: a correct one passes, each kind of damage is reported.

#include "kv/checker.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kv/node_ops.h"

namespace kv {
namespace {

/// root (branch) -> leaves [0,100) [100,200) [200,+inf), two keys each.
struct small_tree {
  small_tree() {
    for (int i = 0; i < 3; ++i) leaves.push_back(std::make_unique<node>(node_kind::leaf, 0));
    for (int i = 0; i < 3; ++i) {
      leaf_insert(*leaves[i], 100 * i + 10, 1);
      leaf_insert(*leaves[i], 100 * i + 20, 2);
    }
    leaves[0]->set_high_key(100);
    leaves[0]->set_right(leaves[1].get());
    leaves[1]->set_high_key(200);
    leaves[1]->set_right(leaves[2].get());
    make_root(root, leaves[0].get(), 100, leaves[1].get());
    inner_insert(root, 200, leaves[2].get());
  }
  node root{node_kind::branch, 1};
  std::vector<std::unique_ptr<node>> leaves;
};

TEST(Checker, AcceptsAConsistentTree) {
  small_tree t;
  const check_result r = check_tree(&t.root);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.stats.height, 2u);
  EXPECT_EQ(r.stats.nodes, 4u);
  EXPECT_EQ(r.stats.leaves, 3u);
  EXPECT_EQ(r.stats.keys, 6u);
  EXPECT_EQ(r.stats.empty_leaves, 0u);
}

TEST(Checker, AcceptsALoneLeafAndEmptyLeaves) {
  node leaf(node_kind::leaf, 0);
  EXPECT_TRUE(check_tree(&leaf).ok);
  small_tree t;
  leaf_remove(*t.leaves[1], 110);
  leaf_remove(*t.leaves[1], 120);
  const check_result r = check_tree(&t.root);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.stats.empty_leaves, 1u);
  EXPECT_EQ(r.stats.keys, 4u);
}

TEST(Checker, ReportsUnsortedKeys) {
  small_tree t;
  t.leaves[1]->set_key(1, 105);  // 110, 105
  const check_result r = check_tree(&t.root);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("is not above"), std::string::npos) << r.message;
}

TEST(Checker, ReportsAKeyOutsideItsRange) {
  small_tree t;
  t.leaves[1]->set_key(1, 200);  // == high key
  check_result r = check_tree(&t.root);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("high key"), std::string::npos) << r.message;
  small_tree u;
  u.leaves[1]->set_key(0, 99);  // below the low fence 100
  r = check_tree(&u.root);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("low fence"), std::string::npos) << r.message;
}

TEST(Checker, ReportsAHighKeyThatDisagreesWithTheParent) {
  small_tree t;
  t.leaves[0]->set_high_key(90);
  const check_result r = check_tree(&t.root);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("parent bounds it"), std::string::npos) << r.message;
}

TEST(Checker, ReportsABrokenSiblingChain) {
  small_tree t;
  t.leaves[0]->set_right(t.leaves[2].get());  // skips leaves[1]
  check_result r = check_tree(&t.root);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("right link chain"), std::string::npos) << r.message;
  small_tree u;
  node stray(node_kind::leaf, 0);
  u.leaves[2]->set_right(&stray);  // the chain goes on past the parent's last child
  r = check_tree(&u.root);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("unreachable from the root"), std::string::npos) << r.message;
}

TEST(Checker, ReportsWrongLevelsAndRoots) {
  small_tree t;
  node wrong(node_kind::branch, 1);
  wrong.set_high_key(100);
  wrong.set_right(t.leaves[1].get());
  t.root.set_child(0, &wrong);
  check_result r = check_tree(&t.root);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("level 0"), std::string::npos) << r.message;
  small_tree u;
  u.root.set_high_key(5000);
  r = check_tree(&u.root);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("root"), std::string::npos) << r.message;
  EXPECT_FALSE(check_tree(nullptr).ok);
}

}  // namespace
}  // namespace kv
