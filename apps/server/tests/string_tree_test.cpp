// server::string_tree: byte-string keys (binary, up to 1 KiB and more), splits under concurrent
// writers, right links, ordered walks, lazy expiry, values retired through the epochs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <tessera/tessera.h>

#include "string_tree.h"

namespace {

struct op_state {
  server::key_op op;
  std::string value;      // put: the value; get: the result
  std::int64_t expire = 0;
  bool found = false;
  std::atomic<int>* left = nullptr;
};

op_state& state_of(server::key_op& op) { return *static_cast<op_state*>(op.user); }

void apply_put(server::key_op& op, server::leaf_access& a) {
  a.put(op.key, state_of(op).value, state_of(op).expire, false);
}
void apply_get(server::key_op& op, server::leaf_access& a) {
  const server::slot* s = a.find(op.key);
  state_of(op).found = s != nullptr;
  if (s != nullptr) state_of(op).value = s->value->bytes;
}
void apply_erase(server::key_op& op, server::leaf_access& a) {
  state_of(op).found = a.erase(op.key);
}
void done(server::key_op& op, tessera::context&) {
  state_of(op).left->fetch_sub(1, std::memory_order_release);
}

/// Runs every op from tasks (submit needs one), waits for all.
void run_all(tessera::runtime& rt, server::string_tree& tree, std::vector<op_state>& ops) {
  std::atomic<int> left{static_cast<int>(ops.size())};
  for (auto& s : ops) {
    s.left = &left;
    s.op.user = &s;
    s.op.on_done = &done;
    rt.spawn([&tree, &s](tessera::context& ctx) { tree.submit(s.op, ctx); });
  }
  rt.wait_idle();
  EXPECT_EQ(left.load(std::memory_order_acquire), 0);
}

std::string key_of(std::size_t i) {
  std::string k = "k" + std::to_string(i * 7919 % 100003);
  if (i % 97 == 0) k += std::string(1024, static_cast<char>(i % 256));  // 1 KiB keys
  if (i % 5 == 0) k += std::string("\0\r\n", 3);                        // binary
  return k;
}

TEST(string_tree, concurrent_puts_split_and_every_key_is_found) {
  tessera::runtime rt({.workers = 2});
  auto tree = std::make_unique<server::string_tree>(rt);
  constexpr std::size_t n = 20000;
  std::vector<op_state> puts(n);
  std::vector<std::string> keys(n);
  for (std::size_t i = 0; i < n; ++i) {
    keys[i] = key_of(i);
    puts[i].op.key = keys[i];
    puts[i].op.writes = true;
    puts[i].op.apply = &apply_put;
    puts[i].value = "v" + std::to_string(i);
  }
  run_all(rt, *tree, puts);
  EXPECT_EQ(tree->counters().keys.load(), static_cast<std::int64_t>(n));
  EXPECT_GT(tree->counters().splits.load(), 50u);

  std::vector<op_state> gets(n);
  for (std::size_t i = 0; i < n; ++i) {
    gets[i].op.key = keys[i];
    gets[i].op.apply = &apply_get;
  }
  run_all(rt, *tree, gets);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(gets[i].found) << i;
    ASSERT_EQ(gets[i].value, "v" + std::to_string(i));
  }

  // Erase the even ones; the walk then sees the odd ones, in byte order.
  std::vector<op_state> erases(n / 2);
  for (std::size_t i = 0; i < n / 2; ++i) {
    erases[i].op.key = keys[2 * i];
    erases[i].op.writes = true;
    erases[i].op.apply = &apply_erase;
  }
  run_all(rt, *tree, erases);
  for (const auto& e : erases) ASSERT_TRUE(e.found);

  struct walk_result {
    server::leaf_walk w;
    std::vector<std::string> keys;
  } wr;
  wr.w.user = &wr;
  wr.w.visit = [](server::leaf_walk& w, server::leaf_access&, server::leaf& l) {
    for (const auto& s : l.slots) static_cast<walk_result*>(w.user)->keys.push_back(s.key);
    return server::walk_step::next_leaf;
  };
  rt.spawn([&](tessera::context& ctx) { tree->walk(wr.w, ctx); });
  rt.wait_idle();
  std::vector<std::string> want;
  for (std::size_t i = 1; i < n; i += 2) want.push_back(keys[i]);
  std::sort(want.begin(), want.end());
  EXPECT_EQ(wr.keys, want);
  tree.reset();
}

TEST(string_tree, expired_keys_are_never_returned) {
  tessera::runtime rt({.workers = 1});
  server::string_tree tree(rt);
  std::vector<op_state> puts(2);
  puts[0].op.key = "gone";
  puts[0].expire = server::steady_ms() - 1;  // in the past
  puts[1].op.key = "kept";
  puts[1].expire = server::steady_ms() + 100000;
  for (auto& p : puts) {
    p.op.writes = true;
    p.op.apply = &apply_put;
    p.value = "x";
  }
  run_all(rt, tree, puts);
  EXPECT_EQ(tree.counters().volatile_keys.load(), 2);
  std::vector<op_state> gets(2);
  gets[0].op.key = "gone";
  gets[1].op.key = "kept";
  for (auto& g : gets) g.op.apply = &apply_get;
  run_all(rt, tree, gets);
  EXPECT_FALSE(gets[0].found);
  EXPECT_TRUE(gets[1].found);
}

}  // namespace
