// server::string_tree: byte-string keys (binary, up to 1 KiB and more), splits under concurrent
// writers, right links, ordered walks, lazy expiry, values retired through the epochs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <tessera/tessera.h>

#include "byte_word.h"
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
  if (s != nullptr) state_of(op).value = s->value.view();
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

/// As run_all, through submit_group: `per_task` ops a group, one task a group; every other op
/// finishes through settle (counted under the latch, no on_done).
void run_grouped(tessera::runtime& rt, server::string_tree& tree, std::vector<op_state>& ops,
                 std::size_t per_task) {
  std::atomic<int> left{static_cast<int>(ops.size())};
  std::vector<server::key_op*> ptrs;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    op_state& s = ops[i];
    s.left = &left;
    s.op.user = &s;
    s.op.on_done = &done;
    if (i % 2 == 1) {
      s.op.settle = [](server::key_op& op) {
        state_of(op).left->fetch_sub(1, std::memory_order_release);
        return false;
      };
    }
    ptrs.push_back(&s.op);
  }
  for (std::size_t from = 0; from < ptrs.size(); from += per_task) {
    const std::span<server::key_op* const> all(ptrs);
    const auto g = all.subspan(from, std::min(per_task, ptrs.size() - from));
    rt.spawn([&tree, g](tessera::context& ctx) { tree.submit_group(g, ctx); });
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

TEST(string_tree, grouped_requests_split_leaves_and_read_what_single_ones_wrote) {
  for (const unsigned workers : {1U, 2U, 4U}) {
    tessera::runtime rt({.workers = workers});
    auto tree = std::make_unique<server::string_tree>(rt);
    constexpr std::size_t n = 12000;
    std::vector<std::string> keys(n);
    std::vector<op_state> puts(n);
    for (std::size_t i = 0; i < n; ++i) {
      keys[i] = key_of(i);
      puts[i].op.key = keys[i];
      puts[i].op.writes = true;
      puts[i].op.apply = &apply_put;
      puts[i].value = "g" + std::to_string(i);
    }
    // The first half grouped (concurrent groups, leaves splitting under them), the second
    // through submit.
    std::vector<op_state> first(puts.begin(), puts.begin() + n / 2);
    std::vector<op_state> second(puts.begin() + n / 2, puts.end());
    run_grouped(rt, *tree, first, 37);
    run_all(rt, *tree, second);
    EXPECT_EQ(tree->counters().keys.load(), static_cast<std::int64_t>(n)) << workers;
    EXPECT_GT(tree->counters().splits.load(), 30U) << workers;

    // Gets of every key and of as many absent ones, interleaved, grouped.
    std::vector<std::string> absent(n);
    std::vector<op_state> gets(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
      absent[i] = keys[i] + "~";
      gets[2 * i].op.key = keys[i];
      gets[2 * i + 1].op.key = absent[i];
    }
    for (auto& g : gets) g.op.apply = &apply_get;
    run_grouped(rt, *tree, gets, 50);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(gets[2 * i].found) << i;
      ASSERT_EQ(gets[2 * i].value, "g" + std::to_string(i));
      ASSERT_FALSE(gets[2 * i + 1].found) << i;
    }

    // Grouped erases of every third key; single gets then miss exactly those.
    std::vector<op_state> erases(n / 3);
    for (std::size_t i = 0; i < n / 3; ++i) {
      erases[i].op.key = keys[3 * i];
      erases[i].op.writes = true;
      erases[i].op.apply = &apply_erase;
    }
    run_grouped(rt, *tree, erases, 16);
    for (const auto& e : erases) ASSERT_TRUE(e.found);
    std::vector<op_state> after(n);
    for (std::size_t i = 0; i < n; ++i) {
      after[i].op.key = keys[i];
      after[i].op.apply = &apply_get;
    }
    run_all(rt, *tree, after);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(after[i].found, i % 3 != 0) << i;
    tree.reset();
  }
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

/// APPEND: the value read under the latch, extended, put back (the put reuses find's search).
void apply_append(server::key_op& op, server::leaf_access& a) {
  const server::slot* s = a.find(op.key);
  std::string v = s != nullptr ? std::string(s->value.view()) : std::string();
  v += state_of(op).value;
  a.put(op.key, std::move(v), 0, true);
}

/// Runs one op on its own (one worker: ops in submission order).
op_state run_one(tessera::runtime& rt, server::string_tree& tree, std::string_view key,
                 void (*apply)(server::key_op&, server::leaf_access&), bool writes,
                 std::string value = {}) {
  std::vector<op_state> ops(1);
  ops[0].op.key = key;
  ops[0].op.writes = writes;
  ops[0].op.apply = apply;
  ops[0].value = std::move(value);
  run_all(rt, tree, ops);
  return ops[0];
}

/// Whether the slot of `key` keeps its value inline (and the value is `want`).
bool stored_inline(server::string_tree& tree, std::string_view key, std::string_view want) {
  server::leaf* l = tree.leaf_for(key);
  for (const server::slot& s : l->slots) {
    if (s.key == key) {
      EXPECT_EQ(s.value.view(), want);
      EXPECT_EQ(s.value.size(), want.size());
      return s.value.is_inline();
    }
  }
  ADD_FAILURE() << "no slot for " << key;
  return false;
}

TEST(string_tree, values_cross_the_inline_boundary_both_ways) {
  tessera::runtime rt({.workers = 1});
  server::string_tree tree(rt);
  constexpr std::size_t max = server::slot_value::inline_max;
  const std::string key = "key:000000000042";
  const std::size_t sizes[] = {3, 0, max, max + 1, max - 1, 1000, max, max + 2, 1, 64, 0, max + 1};
  const std::int64_t base = tree.counters().bytes.load();
  char fill = 'a';
  for (const std::size_t n : sizes) {
    std::string v(n, fill++);
    if (n > 1) v[n - 1] = '\0';  // binary-safe
    run_one(rt, tree, key, &apply_put, true, v);
    EXPECT_EQ(stored_inline(tree, key, v), n <= max) << n;
    const op_state got = run_one(rt, tree, key, &apply_get, false);
    ASSERT_TRUE(got.found) << n;
    EXPECT_EQ(got.value, v) << n;
    EXPECT_EQ(tree.counters().bytes.load() - base,
              static_cast<std::int64_t>(key.size() + n) + server::string_tree::slot_overhead)
        << n;
  }
  EXPECT_EQ(tree.counters().keys.load(), 1);
  // A new key with a long value, then erased (its blob retired), and one with a short value.
  run_one(rt, tree, "long", &apply_put, true, std::string(300, 'L'));
  EXPECT_FALSE(stored_inline(tree, "long", std::string(300, 'L')));
  EXPECT_TRUE(run_one(rt, tree, "long", &apply_erase, true).found);
  run_one(rt, tree, "short", &apply_put, true, "s");
  EXPECT_TRUE(stored_inline(tree, "short", "s"));
  EXPECT_TRUE(run_one(rt, tree, "short", &apply_erase, true).found);
  EXPECT_FALSE(run_one(rt, tree, "long", &apply_get, false).found);
  EXPECT_EQ(tree.counters().keys.load(), 1);
}

TEST(string_tree, append_grows_an_inline_value_out_of_line) {
  tessera::runtime rt({.workers = 1});
  server::string_tree tree(rt);
  std::string want;
  for (int i = 0; i < 40; ++i) {
    const std::string piece(1, static_cast<char>('a' + i % 26));
    run_one(rt, tree, "counter", &apply_append, true, piece);
    want += piece;
    EXPECT_EQ(stored_inline(tree, "counter", want), want.size() <= server::slot_value::inline_max);
    const op_state got = run_one(rt, tree, "counter", &apply_get, false);
    EXPECT_EQ(got.value, want);
  }
}

/// A put after a find of other bytes at the same address (a reused buffer): the find's search
/// must not be taken for the put's.
void apply_find_then_put_other(server::key_op& op, server::leaf_access& a) {
  std::string& buf = state_of(op).value;  // holds the first key; then the second, same size
  const std::string second(op.arg);
  (void)a.find(buf);
  buf.replace(0, second.size(), second);
  a.put(buf, "v", 0, false);
}

TEST(string_tree, a_put_never_reuses_the_search_of_other_bytes) {
  tessera::runtime rt({.workers = 1});
  server::string_tree tree(rt);
  for (const char* k : {"b1", "b3", "b5", "b7"}) run_one(rt, tree, k, &apply_put, true, "x");
  std::vector<op_state> ops(1);
  ops[0].op.key = "b9";  // routes to the one leaf; the apply searches its own keys
  ops[0].op.writes = true;
  ops[0].op.apply = &apply_find_then_put_other;
  ops[0].op.arg = "b0";
  ops[0].value = "b4";
  run_all(rt, tree, ops);
  std::vector<std::string> keys;
  for (const server::slot& s : tree.leaf_for("b")->slots) keys.emplace_back(s.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"b0", "b1", "b3", "b5", "b7"}));
}

/// Readers racing writers that switch each key between an inline and an out-of-line value: a
/// reader sees one whole value, never a mix (run under TSan in the tsan preset).
TEST(string_tree, gets_racing_sets_of_both_kinds_see_whole_values) {
  tessera::runtime rt({.workers = 2});
  server::string_tree tree(rt);
  constexpr std::size_t nkeys = 32;
  constexpr std::size_t rounds = 40;
  const auto value_of = [](std::size_t round) {
    // Even rounds inline (5 bytes), odd ones out of line (100 bytes); every byte the round's.
    return std::string(round % 2 == 0 ? 5 : 100, static_cast<char>('A' + round % 26));
  };
  std::vector<std::string> keys(nkeys);
  for (std::size_t k = 0; k < nkeys; ++k) keys[k] = "race:" + std::to_string(k);
  std::vector<op_state> ops;
  ops.reserve(nkeys * rounds * 3);
  for (std::size_t r = 0; r < rounds; ++r) {
    for (std::size_t k = 0; k < nkeys; ++k) {
      op_state& w = ops.emplace_back();
      w.op.key = keys[k];
      w.op.writes = true;
      w.op.apply = &apply_put;
      w.value = value_of(r);
      for (int g = 0; g < 2; ++g) {
        op_state& rd = ops.emplace_back();
        rd.op.key = keys[k];
        rd.op.apply = &apply_get;
      }
    }
  }
  run_all(rt, tree, ops);
  for (const op_state& o : ops) {
    if (o.op.writes || !o.found) continue;
    ASSERT_TRUE(o.value.size() == 5 || o.value.size() == 100) << o.value.size();
    const char c = o.value[0];
    ASSERT_EQ(o.value, std::string(o.value.size(), c));
    ASSERT_EQ(o.value.size(), (c - 'A') % 2 == 0 ? 5U : 100U);
  }
}

/// load_bytes gives what a memcpy of n bytes into a zeroed word gives, reading only those n
/// bytes (each case in a heap block of exactly n bytes: ASan reports a read past it).
TEST(load_bytes, equals_a_memcpy_into_a_zeroed_word) {
  std::mt19937 rng(3);
  for (int round = 0; round < 200; ++round) {
    for (std::size_t n = 0; n <= 8; ++n) {
      auto block = std::make_unique<char[]>(std::max<std::size_t>(n, 1));
      for (std::size_t i = 0; i < n; ++i) block[i] = static_cast<char>(rng());
      std::uint64_t want = 0;
      if (n > 0) std::memcpy(&want, block.get(), n);
      EXPECT_EQ(server::load_bytes(block.get(), n), want) << "n " << n;
    }
  }
}

/// same_bytes agrees with memcmp for 0-20 bytes, equal or differing in one byte anywhere.
TEST(load_bytes, same_bytes_agrees_with_memcmp) {
  std::mt19937 rng(4);
  for (int round = 0; round < 300; ++round) {
    for (std::size_t n = 0; n <= 20; ++n) {
      std::string a(n, '\0');
      for (char& ch : a) ch = static_cast<char>(rng());
      std::string b = a;
      if (n > 0 && rng() % 2 == 0) {
        char& changed = b[rng() % n];
        changed = static_cast<char>(changed == 'x' ? 'y' : 'x');  // another byte
      }
      EXPECT_EQ(server::same_bytes(a.data(), b.data(), n), a == b) << "n " << n;
    }
  }
}

/// compare_bytes orders as std::string_view::compare does (sign only) and shared_prefix counts
/// what std::mismatch does, for strings of 0-80 bytes (both sides of compare_bytes' 32-byte
/// switch to memcmp), equal, one a prefix of the other, or differing in one byte anywhere (bytes
/// above 0x7f included: unsigned order); each string in a heap block of exactly its size (ASan
/// reports a read past it).
TEST(load_bytes, compare_bytes_and_shared_prefix_agree_with_the_library) {
  std::mt19937 rng(5);
  const auto block = [](const std::string& s) {
    auto b = std::make_unique<char[]>(std::max<std::size_t>(s.size(), 1));
    std::memcpy(b.get(), s.data(), s.size());
    return b;
  };
  const auto sign = [](int c) { return (c > 0) - (c < 0); };
  for (int round = 0; round < 200; ++round) {
    for (std::size_t n = 0; n <= 80; ++n) {
      std::string a(n, '\0');
      for (char& ch : a) ch = static_cast<char>(rng());
      std::string b = a;
      switch (rng() % 4) {
        case 0: break;                                             // equal
        case 1: b.resize(rng() % (n + 1)); break;                  // a prefix of a
        case 2: b.push_back(static_cast<char>(rng())); break;      // a is a prefix of b
        default:
          if (n > 0) {
            char& changed = b[rng() % n];
            changed = static_cast<char>(static_cast<unsigned char>(changed) ^ (1U << (rng() % 8)));
          }
      }
      const auto ab = block(a);
      const auto bb = block(b);
      const std::string_view av(ab.get(), a.size());
      const std::string_view bv(bb.get(), b.size());
      EXPECT_EQ(server::compare_bytes(av, bv), sign(av.compare(bv))) << "n " << n;
      EXPECT_EQ(server::compare_bytes(bv, av), sign(bv.compare(av))) << "n " << n;
      const auto m = std::mismatch(av.begin(), av.end(), bv.begin(), bv.end());
      EXPECT_EQ(server::shared_prefix(av, bv), static_cast<std::size_t>(m.first - av.begin()))
          << "n " << n;
    }
  }
}

/// A key's hint for slot_array (bytes [at, at + 8), big-endian, zero-padded), as the tree makes it.
std::uint64_t test_hint(std::string_view key, std::size_t at) {
  std::uint64_t w = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    const std::uint64_t b = at + i < key.size() ? static_cast<unsigned char>(key[at + i]) : 0;
    w |= b << (8 * (7 - i));
  }
  return w;
}

/// Keys whose hints often tie (the same first 7 bytes, or a prefix of another key), some longer
/// than a slot's inline bytes, some binary.
std::string tie_key(std::mt19937& rng) {
  static const char* const stems[] = {"abcdefg", "abcdefgh", "abc", "", "zzzzzzz"};
  std::string k = stems[rng() % 5];
  const std::size_t tail = rng() % 6;
  for (std::size_t i = 0; i < tail; ++i) k += static_cast<char>("\0az\xff"[rng() % 4]);
  if (rng() % 9 == 0) k += std::string(30, 'x');  // out of the slot
  return k;
}

/// Expects `a` to hold exactly `model`'s keys in order, each slot with its key's mark.
void expect_holds(const server::slot_array& a, const std::map<std::string, std::int64_t>& model,
                  std::size_t at) {
  ASSERT_EQ(a.size(), model.size());
  std::size_t i = 0;
  for (const auto& [key, mark] : model) {
    EXPECT_EQ(a[i].key.view(), key) << "position " << i;
    EXPECT_EQ(a[i].expire_ms, mark) << "position " << i;
    EXPECT_EQ(server::slot_array::hint_part(a.index()[i]),
              server::slot_array::hint_part(test_hint(key, at)));
    ++i;
  }
  std::vector<std::string> iterated;
  for (const server::slot& s : a) iterated.emplace_back(s.key);
  EXPECT_TRUE(std::is_sorted(iterated.begin(), iterated.end()));
  EXPECT_EQ(iterated.size(), model.size());
  // The hints in order (entries of equal hints are in their keys' order, not their numbers').
  EXPECT_TRUE(std::is_sorted(a.index(), a.index() + a.size(), [](std::uint64_t x, std::uint64_t y) {
    return server::slot_array::hint_part(x) < server::slot_array::hint_part(y);
  }));
  std::vector<std::size_t> numbers;
  for (std::size_t k = 0; k < a.size(); ++k) numbers.push_back(a.number(k));
  std::sort(numbers.begin(), numbers.end());
  for (std::size_t k = 0; k < numbers.size(); ++k) EXPECT_EQ(numbers[k], k);  // a permutation
}

/// Inserts `key` (absent) at its place in `a` and `model`.
void insert_key(server::slot_array& a, std::map<std::string, std::int64_t>& model,
                const std::string& key, std::int64_t mark, std::size_t at) {
  const auto pos = static_cast<std::size_t>(std::distance(model.begin(), model.lower_bound(key)));
  a.insert(pos, server::slot{server::slot_key(key), server::slot_value(), mark},
           test_hint(key, at));
  model.emplace(key, mark);
}

/// The leaf's slot array: slots stored unordered, read in key order through the index, through
/// inserts, erases (the last slot takes the removed one's place), a full array and a split.
TEST(slot_array, reads_in_key_order_through_inserts_erases_and_splits) {
  std::mt19937 rng(11);
  server::slot_array a;
  std::map<std::string, std::int64_t> model;
  std::int64_t mark = 1;
  for (int round = 0; round < 4000; ++round) {
    const std::string key = tie_key(rng);
    const auto it = model.find(key);
    if (it == model.end() && model.size() < server::slot_array::max_slots && rng() % 3 != 0) {
      insert_key(a, model, key, mark++, 0);
    } else if (it != model.end()) {
      a.erase(static_cast<std::size_t>(std::distance(model.begin(), it)), 0);
      model.erase(it);
    }
    if (round % 97 == 0) expect_holds(a, model, 0);
  }
  expect_holds(a, model, 0);

  // Full: the next insert throws and changes nothing.
  server::slot_array full;
  std::map<std::string, std::int64_t> full_model;
  for (std::size_t i = 0; i < server::slot_array::max_slots; ++i) {
    insert_key(full, full_model, "key:" + std::to_string(i * 7 % 1000 + 1000), mark++, 4);
  }
  EXPECT_THROW(full.insert(0, server::slot{server::slot_key("key:0"), server::slot_value(), 0},
                           test_hint("key:0", 4)),
               std::bad_alloc);
  expect_holds(full, full_model, 4);

  // A split: the first half stays (its slots compacted below), the rest moves in order; both
  // halves take inserts and erases as before.
  server::slot_array right;
  const std::size_t half = full.size() / 2;
  const auto half_at = static_cast<std::ptrdiff_t>(half);
  right.reserve(full.size() - half);
  full.split_to(right, half);
  std::map<std::string, std::int64_t> right_model(std::next(full_model.begin(), half_at),
                                                  full_model.end());
  full_model.erase(std::next(full_model.begin(), half_at), full_model.end());
  expect_holds(full, full_model, 4);
  expect_holds(right, right_model, 4);
  for (std::size_t i = 0; i < right.size(); ++i) EXPECT_EQ(right.number(i), i);
  insert_key(full, full_model, "key:0500", mark++, 4);
  full.erase(3, 4);
  full_model.erase(std::next(full_model.begin(), 3));
  expect_holds(full, full_model, 4);
  right.erase(0, 4);
  right_model.erase(right_model.begin());
  insert_key(right, right_model, "key:9999", mark++, 4);
  expect_holds(right, right_model, 4);

  // A new shared prefix: the order stays, every hint follows it.
  right.rehint(5);
  expect_holds(right, right_model, 5);
}

/// Many inserts and erases in random order through the tree (leaf splits, erased slots filled
/// by the last one): gets find every live key, and a walk returns them in order.
TEST(string_tree, random_inserts_and_erases_keep_leaves_in_key_order) {
  tessera::runtime rt({.workers = 1});
  server::string_tree tree(rt);
  std::mt19937 rng(5);
  std::map<std::string, std::string> model;
  for (int round = 0; round < 6; ++round) {
    std::vector<op_state> ops(1500);
    std::map<std::string, std::string> next = model;
    std::vector<std::string> used;  // one op a key per round
    std::set<std::string> seen;
    for (auto& o : ops) {
      std::string key;
      do {
        key = "u:" + std::to_string(rng() % 3000);
        if (rng() % 4 == 0) key += std::string(rng() % 40, 'q');
      } while (!seen.insert(key).second);
      used.push_back(key);
      o.op.writes = true;
      if (rng() % 3 == 0) {
        o.op.apply = &apply_erase;
        next.erase(key);
      } else {
        o.op.apply = &apply_put;
        o.value = "v" + key.substr(0, 8);
        next[key] = o.value;
      }
    }
    for (std::size_t i = 0; i < ops.size(); ++i) ops[i].op.key = used[i];
    run_all(rt, tree, ops);
    model = std::move(next);
    std::vector<std::string> keys;
    for (const server::leaf* l = tree.leaf_for(""); l != nullptr; l = l->right) {
      for (const server::slot& s : l->slots) keys.emplace_back(s.key);
    }
    std::vector<std::string> want;
    want.reserve(model.size());
    for (const auto& kv : model) want.push_back(kv.first);
    ASSERT_EQ(keys, want) << "round " << round;
  }
  std::vector<op_state> gets(model.size());
  std::size_t i = 0;
  for (const auto& kv : model) {
    gets[i].op.key = kv.first;
    gets[i].op.apply = &apply_get;
    ++i;
  }
  run_all(rt, tree, gets);
  i = 0;
  for (const auto& kv : model) {
    EXPECT_TRUE(gets[i].found) << kv.first;
    EXPECT_EQ(gets[i].value, kv.second);
    ++i;
  }
}

}  // namespace
