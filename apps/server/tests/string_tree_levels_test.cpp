// server::string_tree as a multi-level B-link tree: inner nodes (separators in the node's own
// key heap, long ones out of line), splits at every level, root growth, 0-byte and KiB keys,
// concurrent writers and readers from many tasks, an ordered walk while leaves split; and a
// structural check after each run (every level's separators ordered, every node of a level the
// child of exactly one node above, every key reached by a descent).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <tessera/tessera.h>

#include "inner_node.h"
#include "string_tree.h"

namespace {

using server::inner_image;
using server::inner_node;

// ---- inner_node ----------------------------------------------------------------------------

std::unique_ptr<inner_node> node_of(const inner_image& img, server::long_separator_store& store) {
  auto n = std::make_unique<inner_node>(img.level);
  server::encode(*n, img, store);
  return n;
}

TEST(inner_node, binary_separators_route_as_byte_strings) {
  server::long_separator_store store;
  inner_image img;
  img.level = 1;
  // Sorted as unsigned bytes: "" < "\0" < "a" < "a\0" < "a\xff" < "b".
  const std::vector<std::string> seps = {std::string("\0", 1), "a", std::string("a\0", 2),
                                         "a\xff", "b" + std::string(1023, 'z')};
  std::vector<int> children(seps.size() + 1);
  img.children.push_back(&children[0]);
  for (std::size_t i = 0; i < seps.size(); ++i) {
    img.seps.push_back({seps[i], nullptr});
    img.children.push_back(&children[i + 1]);
  }
  auto n = node_of(img, store);
  ASSERT_EQ(n->count(), seps.size());
  for (std::size_t i = 0; i < seps.size(); ++i) EXPECT_EQ(n->separator(i), seps[i]);
  auto child_index = [&](std::string_view k) {
    return static_cast<int*>(n->child_for(k)) - children.data();
  };
  EXPECT_EQ(child_index(""), 0);
  EXPECT_EQ(child_index(std::string("\0", 1)), 1);
  EXPECT_EQ(child_index(std::string("\0\0", 2)), 1);
  EXPECT_EQ(child_index("Z"), 1);
  EXPECT_EQ(child_index("a"), 2);
  EXPECT_EQ(child_index(std::string("a\0", 2)), 3);
  EXPECT_EQ(child_index("a\x7f"), 3);
  EXPECT_EQ(child_index("a\xff"), 4);
  EXPECT_EQ(child_index("b"), 4);
  EXPECT_EQ(child_index("b" + std::string(1023, 'z')), 5);
  EXPECT_EQ(child_index("c"), 5);
  EXPECT_FALSE(n->beyond("\xff\xff\xff"));  // high: +infinity
}

TEST(inner_node, separators_with_a_shared_prefix_route_as_byte_strings) {
  // Separators sharing a prefix (short, 8-byte aligned or not, out of line), over an alphabet
  // with 0 bytes (a head's padding) and 0xff: every key routes to the child that upper_bound on
  // the byte strings names.
  std::mt19937_64 rng(7);
  const std::string alphabet("\0\1ab\xff", 5);
  auto random_tail = [&](std::size_t max_len) {
    std::string t(rng() % (max_len + 1), '\0');
    for (char& ch : t) ch = alphabet[rng() % alphabet.size()];
    return t;
  };
  // (Shared prefixes of 0, 4, 8, 9, 14, 16, 17 and 1,501 bytes or more: the node keeps up to 16
  // of them in its header.)
  for (const std::size_t prefix_len :
       {std::size_t{0}, std::size_t{3}, std::size_t{7}, std::size_t{8}, std::size_t{13},
        std::size_t{15}, std::size_t{16}, std::size_t{1500}}) {
    server::long_separator_store store;
    const std::string prefix = std::string(prefix_len, 'k') + (prefix_len > 0 ? ":" : "");
    std::set<std::string> picked;
    while (picked.size() < 60) picked.insert(prefix + random_tail(12));
    const std::vector<std::string> seps(picked.begin(), picked.end());
    inner_image img;
    img.level = 1;
    std::vector<int> children(seps.size() + 1);
    img.children.push_back(&children[0]);
    for (std::size_t i = 0; i < seps.size(); ++i) {
      img.seps.push_back({seps[i], nullptr});
      img.children.push_back(&children[i + 1]);
    }
    ASSERT_TRUE(server::fits(img));
    auto n = node_of(img, store);
    std::vector<std::string> keys = seps;
    for (int i = 0; i < 2000; ++i) {
      const std::size_t cut = rng() % (prefix.size() + 2);
      keys.push_back(prefix.substr(0, std::min(cut, prefix.size())) + random_tail(14));
    }
    keys.push_back("");
    keys.push_back(prefix.substr(0, prefix.size() / 2));
    keys.push_back(prefix + "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff");
    for (const std::string& k : keys) {
      const auto want = std::upper_bound(seps.begin(), seps.end(), k) - seps.begin();
      ASSERT_EQ(static_cast<int*>(n->child_for(k)) - children.data(), want)
          << "prefix " << prefix_len << ", key of " << k.size() << " bytes";
    }
  }
}

TEST(inner_node, long_separators_live_out_of_line_and_round_trip) {
  server::long_separator_store store;
  inner_image img;
  img.level = 2;
  const std::string p(5000, 'p');
  int c[4];
  img.children = {&c[0], &c[1], &c[2], &c[3]};
  img.seps = {{p + "1", nullptr}, {p + "2", nullptr}, {"q", nullptr}};
  img.high_infinite = false;
  img.high = {p + "9" + std::string(3000, 'x'), nullptr};  // the high key out of line too
  ASSERT_TRUE(server::fits(img));
  auto n = node_of(img, store);
  EXPECT_EQ(n->child_for(p), &c[0]);
  EXPECT_EQ(n->child_for(p + "1"), &c[1]);
  EXPECT_EQ(n->child_for(p + "15"), &c[1]);
  EXPECT_EQ(n->child_for(p + "2"), &c[2]);
  EXPECT_EQ(n->child_for("q"), &c[3]);
  EXPECT_TRUE(n->beyond(p + "9" + std::string(3000, 'x')));
  EXPECT_FALSE(n->beyond(p + "9"));
  const inner_image back = server::decode(*n);
  ASSERT_EQ(back.seps.size(), 3u);
  EXPECT_EQ(back.seps[1].bytes, p + "2");
  EXPECT_NE(back.seps[1].lng, nullptr);  // reused on the next encode, not copied
  EXPECT_EQ(back.seps[2].lng, nullptr);
  EXPECT_EQ(back.high.bytes, img.high.bytes);
  EXPECT_EQ(back.children, img.children);
}

TEST(inner_node, a_split_leaves_both_halves_room_whatever_the_separator_sizes) {
  server::long_separator_store store;
  // Separators of 1 KiB (inline, 128 words), 8 bytes and 2 KiB (out of line), in runs, until
  // the image no longer fits; the split must give two halves that fit, with room for one more
  // separator of the inline maximum.
  for (int pattern = 0; pattern < 3; ++pattern) {
    inner_image img;
    img.level = 1;
    std::vector<int> c(300);
    img.children.push_back(&c[0]);
    for (int i = 0; server::fits(img); ++i) {
      const bool big = pattern == 0 ? i < 6 : pattern == 1 ? i % 20 == 0 : false;
      std::string s = std::string(5, 'k') + std::to_string(100 + i);
      if (big) s += std::string(1018, 'x');
      if (pattern == 2 && i % 3 == 0) s += std::string(2048, 'y');
      img.insert(s, &c[static_cast<std::size_t>(i) + 1]);
    }
    const std::size_t before = img.seps.size();
    inner_image right;
    const server::image_separator up = img.split(right);
    EXPECT_EQ(img.seps.size() + right.seps.size() + 1, before);
    EXPECT_EQ(img.high.bytes, up.bytes);
    EXPECT_EQ(img.children.size(), img.seps.size() + 1);
    EXPECT_EQ(right.children.size(), right.seps.size() + 1);
    for (inner_image* half : {&img, &right}) {
      inner_image more = *half;
      more.insert(std::string(1024, '~'), &c[0]);
      EXPECT_TRUE(server::fits(more)) << "pattern " << pattern;
    }
  }
}

// ---- the tree ------------------------------------------------------------------------------

struct op_state {
  server::key_op op;
  std::string value;
  bool found = false;
  std::atomic<int>* left = nullptr;
};

op_state& state_of(server::key_op& op) { return *static_cast<op_state*>(op.user); }

void apply_put(server::key_op& op, server::leaf_access& a) {
  a.put(op.key, state_of(op).value, 0, false);
}
void apply_get(server::key_op& op, server::leaf_access& a) {
  const server::slot* s = a.find(op.key);
  state_of(op).found = s != nullptr;
  if (s != nullptr) state_of(op).value = s->value.view();
}
void done(server::key_op& op, tessera::context&) {
  state_of(op).left->fetch_sub(1, std::memory_order_release);
}

/// Keys of three families: short binary keys (and the 0-byte key, keys_of), keys of about
/// 1 KiB that share a prefix of 1000 bytes (6 in 8: separators of 1 KiB, at most 8 in an inner
/// node, so the tree grows tall with few keys), and keys sharing 1100 bytes (separators out of
/// line).
std::string key_of(std::size_t i) {
  switch (i % 8) {
    case 0: return std::string(1100, 'L') + std::to_string(i * 2654435761U % 1000003);
    case 1: return std::string(1, static_cast<char>(i % 7)) + std::string("\0\r\n", 3) +
                   std::to_string(i);
    default: return std::string(1000, 'K') + std::to_string(i * 40503U % 1000003);
  }
}

std::vector<std::string> keys_of(std::size_t first, std::size_t n) {
  std::vector<std::string> keys;
  keys.reserve(n + 1);
  if (first == 0) keys.emplace_back();  // the 0-byte key
  for (std::size_t i = first; i < first + n; ++i) keys.push_back(key_of(i));
  return keys;
}

std::vector<op_state> puts_of(const std::vector<std::string>& keys) {
  std::vector<op_state> ops(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ops[i].op.key = keys[i];
    ops[i].op.writes = true;
    ops[i].op.apply = &apply_put;
    ops[i].value = "v" + std::to_string(keys[i].size()) + ":" + keys[i].substr(keys[i].size() / 2);
  }
  return ops;
}

std::vector<op_state> gets_of(const std::vector<std::string>& keys) {
  std::vector<op_state> ops(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ops[i].op.key = keys[i];
    ops[i].op.apply = &apply_get;
  }
  return ops;
}

std::string value_for(const std::string& key) {
  return "v" + std::to_string(key.size()) + ":" + key.substr(key.size() / 2);
}

/// Spawns every op from a task of its own (submit needs one); does not wait.
void spawn_all(tessera::runtime& rt, server::string_tree& tree, std::vector<op_state>& ops,
               std::atomic<int>& left) {
  left.fetch_add(static_cast<int>(ops.size()), std::memory_order_relaxed);
  for (auto& s : ops) {
    s.left = &left;
    s.op.user = &s;
    s.op.on_done = &done;
    rt.spawn([&tree, &s](tessera::context& ctx) { tree.submit(s.op, ctx); });
  }
}

/// The structure, with the runtime idle: each level's nodes, left to right, are the children
/// of the level above in order (every split posted); separators increase along a level and
/// lie below their node's high key; leaf keys increase along the leaves, each below its leaf's
/// high key and at or above its left neighbour's; every key is reached by a descent.
void check_tree(const server::string_tree& tree, const std::set<std::string>& want) {
  const inner_node* root = tree.load_root();
  std::vector<const void*> expected{root};  // this level's nodes, from the level above
  for (const inner_node* head = root;;) {
    const std::uint8_t level = head->level();
    std::vector<const void*> chain;
    std::vector<const void*> below;
    std::string last_sep;
    bool any_sep = false;
    std::string prev_high;
    for (const inner_node* n = head; n != nullptr; n = n->right()) {
      chain.push_back(n);
      EXPECT_EQ(n->level(), level);
      const inner_image img = server::decode(*n);
      for (const auto& s : img.seps) {
        if (any_sep) {
          EXPECT_LT(last_sep, s.bytes) << "level " << int(level);
        }
        if (!prev_high.empty()) {
          EXPECT_LT(prev_high, s.bytes) << "separator below the low fence";
        }
        last_sep = s.bytes;
        any_sep = true;
      }
      if (!img.high_infinite) {
        if (!img.seps.empty()) {
          EXPECT_LT(img.seps.back().bytes, img.high.bytes);
        }
        prev_high = img.high.bytes;
      }
      EXPECT_EQ(img.high_infinite, n->right() == nullptr);
      for (void* c : img.children) below.push_back(c);
    }
    EXPECT_EQ(chain, expected) << "level " << int(level) << " is not its parents' children";
    expected = below;
    if (level == 1) break;
    head = static_cast<const inner_node*>(head->child(0));
  }
  std::vector<const void*> leaves;
  std::vector<std::string> keys;
  for (auto* l = static_cast<const server::leaf*>(expected.front()); l != nullptr; l = l->right) {
    leaves.push_back(l);
    for (const auto& s : l->slots) {
      if (!l->high_infinite) {
        EXPECT_LT(s.key, l->high);
      }
      EXPECT_LE(l->low, s.key);
      if (!keys.empty()) {
        EXPECT_LT(keys.back(), s.key);
      }
      keys.push_back(s.key);
    }
    EXPECT_EQ(l->high_infinite, l->right == nullptr);
  }
  EXPECT_EQ(leaves, expected) << "the leaves are not the level-1 nodes' children";
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()), want);
  for (const auto& k : want) {
    const server::leaf* l = tree.leaf_for(k);
    EXPECT_TRUE(std::any_of(l->slots.begin(), l->slots.end(),
                            [&](const server::slot& s) { return s.key == k; }))
        << "descent misses a key of size " << k.size();
  }
}

TEST(string_tree_levels, exclusive_inserts_grow_the_root_and_split_every_level) {
  tessera::runtime rt({.workers = 1});
  server::string_tree tree(rt);
  EXPECT_EQ(tree.height(), 2u);
  const std::vector<std::string> keys = keys_of(0, 20000);
  std::vector<op_state> puts = puts_of(keys);
  for (auto& p : puts) {
    p.op.user = &p;
    tree.apply_exclusive(p.op);
  }
  EXPECT_GE(tree.height(), 4u) << tree.counters().leaves.load() << " leaves, "
                               << tree.counters().inner_nodes.load() << " inner nodes";
  EXPECT_GT(tree.counters().inner_splits.load(), 5u);
  check_tree(tree, std::set<std::string>(keys.begin(), keys.end()));
  std::vector<op_state> gets = gets_of(keys);
  std::atomic<int> left{0};
  spawn_all(rt, tree, gets, left);
  rt.wait_idle();
  for (auto& g : gets) {
    ASSERT_TRUE(g.found);
    ASSERT_EQ(g.value, value_for(std::string(g.op.key)));
  }
}

TEST(string_tree_levels, concurrent_writers_readers_and_a_walk_while_every_level_splits) {
  tessera::runtime rt({.workers = 4});
  auto tree = std::make_unique<server::string_tree>(rt);
  // Phase 1: a base of keys, from tasks on 4 workers (splits at every level, the root grows).
  const std::vector<std::string> base = keys_of(0, 5000);
  std::vector<op_state> puts = puts_of(base);
  std::atomic<int> left{0};
  spawn_all(rt, *tree, puts, left);
  rt.wait_idle();
  ASSERT_EQ(left.load(), 0);
  const std::size_t height_after_base = tree->height();
  EXPECT_GE(height_after_base, 3u);  // the root grew from tasks at least once
  const std::uint64_t inner_splits_after_base = tree->counters().inner_splits.load();
  check_tree(*tree, std::set<std::string>(base.begin(), base.end()));

  // Phase 2: new keys written while readers look up the base and a walk runs over the leaves.
  const std::vector<std::string> more = keys_of(5000, 9000);
  std::vector<op_state> puts2 = puts_of(more);
  std::vector<op_state> gets = gets_of(base);
  struct walk_result {
    server::leaf_walk w;
    std::vector<std::string> keys;
    std::atomic<bool> done{false};
  } wr;
  wr.w.user = &wr;
  wr.w.visit = [](server::leaf_walk& w, server::leaf_access&, server::leaf& l) {
    auto& r = *static_cast<walk_result*>(w.user);
    for (const auto& s : l.slots) {
      if (s.key >= w.from) r.keys.push_back(s.key);
    }
    return server::walk_step::next_leaf;
  };
  wr.w.on_done = [](server::leaf_walk& w, tessera::context&) {
    static_cast<walk_result*>(w.user)->done.store(true, std::memory_order_release);
  };
  spawn_all(rt, *tree, puts2, left);
  rt.spawn([&](tessera::context& ctx) { tree->walk(wr.w, ctx); });
  spawn_all(rt, *tree, gets, left);
  rt.wait_idle();
  ASSERT_EQ(left.load(), 0);
  ASSERT_TRUE(wr.done.load(std::memory_order_acquire));
  for (auto& g : gets) {
    ASSERT_TRUE(g.found) << "a base key vanished while the tree split";
    ASSERT_EQ(g.value, value_for(std::string(g.op.key)));
  }
  // The walk: strictly ordered, every base key in it, nothing that was never written.
  EXPECT_TRUE(std::is_sorted(wr.keys.begin(), wr.keys.end()));
  EXPECT_EQ(std::adjacent_find(wr.keys.begin(), wr.keys.end()), wr.keys.end());
  const std::set<std::string> walked(wr.keys.begin(), wr.keys.end());
  for (const auto& k : base) ASSERT_TRUE(walked.count(k)) << "the walk missed a base key";
  std::set<std::string> all(base.begin(), base.end());
  all.insert(more.begin(), more.end());
  for (const auto& k : walked) ASSERT_TRUE(all.count(k));

  // Inner nodes split while writers, readers and the walk ran (whether the root grew again
  // depends on where the splits fell).
  EXPECT_GT(tree->counters().inner_splits.load(), inner_splits_after_base);
  EXPECT_GE(tree->height(), height_after_base);
  EXPECT_EQ(tree->counters().keys.load(), static_cast<std::int64_t>(all.size()));
  check_tree(*tree, all);
  std::vector<std::string> all_keys(all.begin(), all.end());
  std::vector<op_state> gets2 = gets_of(all_keys);
  spawn_all(rt, *tree, gets2, left);
  rt.wait_idle();
  for (auto& g : gets2) {
    ASSERT_TRUE(g.found);
    ASSERT_EQ(g.value, value_for(std::string(g.op.key)));
  }
  tree.reset();
}

}  // namespace
