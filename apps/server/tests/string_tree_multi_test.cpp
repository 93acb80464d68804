// server::string_tree's multi-key requests (submit_multi): MSET, MGET, DEL and EXISTS of keys
// spread over many leaves take effect at one moment. Clients made of tasks (each issues its
// next request from the completion of the last) run at 1, 2 and 4 workers: writers MSET a
// group's keys to one generation (and new keys beside them, so that held leaves split), or
// DEL them; readers check that every MGET returns one generation (or none), that EXISTS counts
// all or none, and that a sequence of single GETs never goes back to an older generation
// after it saw a newer one. Two writers MSET the same keys in opposite orders (no deadlock).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <new>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <tessera/tessera.h>

#include "string_tree.h"

namespace {

constexpr std::size_t preload_keys = 20000;
constexpr std::size_t group_size = 8;
constexpr int writer_rounds = 150;

std::string key_at(std::size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "key:%06zu", i);
  return buf;
}

struct client;

struct req {
  server::key_op op;
  std::string key;
  std::string value;  // put: the value; get: what was found
  bool found = false;
  client* owner = nullptr;
};

req& req_of(server::key_op& op) { return *static_cast<req*>(op.user); }

void apply_put(server::key_op& op, server::leaf_access& a) {
  a.put(op.key, std::string(op.arg), 0, false);
}
void apply_get(server::key_op& op, server::leaf_access& a) {
  req& r = req_of(op);
  const server::slot* e = a.find(op.key);
  r.found = e != nullptr;
  if (e != nullptr) r.value = e->value.view();
}
void apply_exists(server::key_op& op, server::leaf_access& a) {
  req_of(op).found = a.find(op.key) != nullptr;
}
void apply_erase(server::key_op& op, server::leaf_access& a) {
  req_of(op).found = a.erase(op.key);
}

struct shared_state {
  server::string_tree* tree = nullptr;
  std::atomic<int> writers_left{0};
  std::atomic<int> violations{0};
  std::atomic<long> mgets{0};
  std::atomic<long> sequences{0};
};

enum class role : std::uint8_t { writer, deleter, crossed, mget_reader, seq_reader };

/// Generation of a value ("<gen>" or "<writer>:<gen>"); 0 for an absent key.
long gen_of(const req& r) {
  if (!r.found) return 0;
  const auto colon = r.value.find(':');
  return std::stol(colon == std::string::npos ? r.value : r.value.substr(colon + 1));
}

struct client {
  shared_state* st = nullptr;
  role kind = role::writer;
  std::vector<std::string> keys;  // the group's keys, in the order the client names them
  std::vector<req> reqs;
  std::vector<server::key_op*> ptrs;
  std::vector<std::string> fillers;  // new keys written beside the group's
  int round = 0;
  std::size_t seq_at = 0;  // seq_reader: the next key of the sequence
  long seq_seen = 0;       // seq_reader: the newest generation seen in this sequence
  char tag = 'a';          // crossed: which of the two writers

  void prepare(std::size_t n) {
    reqs.clear();
    reqs.resize(n);
    ptrs.clear();
    for (req& r : reqs) {
      r.owner = this;
      r.op.user = &r;
      ptrs.push_back(&r.op);
    }
  }

  static void multi_done(void* user, tessera::context& ctx) {
    static_cast<client*>(user)->finished(ctx);
  }
  static void single_done(server::key_op& op, tessera::context& ctx) {
    req_of(op).owner->finished(ctx);
  }

  void submit_multi(bool writes, tessera::context& ctx) {
    const server::multi_request m{.writes = writes, .on_done = &multi_done, .user = this};
    st->tree->submit_multi(m, ptrs, ctx);
  }

  void start(tessera::context& ctx) {
    ++round;
    switch (kind) {
      case role::writer:
      case role::crossed: {
        // The group's keys, and (writers) two new keys after two of them: held leaves fill
        // and split while the request holds them.
        const std::size_t extra = kind == role::writer ? 2 : 0;
        prepare(keys.size() + extra);
        const std::string value =
            kind == role::crossed ? std::string(1, tag) + ":" + std::to_string(round)
                                  : std::to_string(round);
        for (std::size_t i = 0; i < keys.size(); ++i) {
          reqs[i].key = keys[i];
          reqs[i].value = value;
        }
        for (std::size_t i = 0; i < extra; ++i) {
          fillers.push_back(keys[(round + i * 3) % keys.size()] + ":f" + std::to_string(round));
          reqs[keys.size() + i].key = fillers.back();
          reqs[keys.size() + i].value = "x";
        }
        for (req& r : reqs) {
          r.op.key = r.key;
          r.op.arg = r.value;
          r.op.writes = true;
          r.op.apply = &apply_put;
        }
        submit_multi(true, ctx);
        return;
      }
      case role::deleter: {
        // Odd rounds MSET the group, even rounds DEL it.
        prepare(keys.size());
        const bool del = round % 2 == 0;
        for (std::size_t i = 0; i < keys.size(); ++i) {
          reqs[i].key = keys[i];
          reqs[i].value = std::to_string(round);
          reqs[i].op.key = reqs[i].key;
          reqs[i].op.arg = reqs[i].value;
          reqs[i].op.writes = true;
          reqs[i].op.apply = del ? &apply_erase : &apply_put;
        }
        submit_multi(true, ctx);
        return;
      }
      case role::mget_reader: {
        prepare(keys.size());
        const bool exists = round % 3 == 0;
        for (std::size_t i = 0; i < keys.size(); ++i) {
          reqs[i].key = keys[i];
          reqs[i].op.key = reqs[i].key;
          reqs[i].op.apply = exists ? &apply_exists : &apply_get;
        }
        submit_multi(false, ctx);
        return;
      }
      case role::seq_reader:
        seq_at = 0;
        seq_seen = 0;
        prepare(1);
        next_get(ctx);
        return;
    }
  }

  void next_get(tessera::context& ctx) {
    req& r = reqs[0];
    r.key = keys[seq_at];
    r.found = false;
    r.op = server::key_op{};
    r.op.key = r.key;
    r.op.apply = &apply_get;
    r.op.on_done = &single_done;
    r.op.user = &r;
    // Every other GET through submit_group, whose coupled read must respect the holds too.
    if (seq_at % 2 == 1) {
      st->tree->submit_group(std::span<server::key_op* const>(ptrs.data(), 1), ctx);
    } else {
      st->tree->submit(r.op, ctx);
    }
  }

  void violation() { st->violations.fetch_add(1, std::memory_order_relaxed); }

  void finished(tessera::context& ctx) {
    switch (kind) {
      case role::writer:
      case role::deleter:
      case role::crossed:
        if (round == writer_rounds) {
          st->writers_left.fetch_sub(1, std::memory_order_acq_rel);
          return;
        }
        break;
      case role::mget_reader: {
        // One generation for every key (or none at all).
        std::size_t present = 0;
        for (const req& r : reqs) present += r.found ? 1 : 0;
        if (present != 0 && present != reqs.size()) violation();
        if (reqs[0].op.apply == &apply_get && present == reqs.size()) {
          for (const req& r : reqs) {
            if (r.value != reqs[0].value) violation();
          }
        }
        st->mgets.fetch_add(1, std::memory_order_relaxed);
        if (st->writers_left.load(std::memory_order_acquire) == 0) return;
        break;
      }
      case role::seq_reader: {
        // Once a generation was seen, no later GET of the group returns an older one.
        const long g = gen_of(reqs[0]);
        if (g < seq_seen) violation();
        seq_seen = std::max(seq_seen, g);
        if (++seq_at < keys.size()) return next_get(ctx);
        st->sequences.fetch_add(1, std::memory_order_relaxed);
        if (st->writers_left.load(std::memory_order_acquire) == 0) return;
        break;
      }
    }
    start(ctx);
  }
};

class string_tree_multi : public ::testing::TestWithParam<unsigned> {};

TEST_P(string_tree_multi, requests_across_leaves_take_effect_at_one_moment) {
  tessera::runtime rt({.workers = GetParam()});
  auto tree = std::make_unique<server::string_tree>(rt);
  shared_state st;
  st.tree = tree.get();

  // Preload, 100 keys per MSET (a request whose inserts split its leaves while it holds them).
  {
    const std::size_t chunk = 100;
    std::vector<std::unique_ptr<client>> loaders;
    for (std::size_t from = 0; from < preload_keys; from += chunk) {
      auto c = std::make_unique<client>();
      c->st = &st;
      c->prepare(chunk);
      for (std::size_t i = 0; i < chunk; ++i) {
        req& r = c->reqs[i];
        r.key = key_at(from + i);
        r.value = "0";
        r.op.key = r.key;
        r.op.arg = r.value;
        r.op.writes = true;
        r.op.apply = &apply_put;
      }
      client* p = c.get();
      loaders.push_back(std::move(c));
      rt.spawn([&st, p](tessera::context& ctx) {
        const server::multi_request m{.writes = true, .user = p};
        st.tree->submit_multi(m, p->ptrs, ctx);
      });
    }
    rt.wait_idle();
  }
  ASSERT_EQ(tree->counters().keys.load(), static_cast<std::int64_t>(preload_keys));
  ASSERT_GT(tree->counters().leaves.load(), 60U);

  // Groups of keys spread over the whole key range (a leaf each), named in a shuffled order.
  std::mt19937 rng(GetParam());
  auto group = [&](std::size_t g) {
    std::vector<std::string> keys;
    for (std::size_t j = 0; j < group_size; ++j) {
      keys.push_back(key_at(g * 7 + j * (preload_keys / group_size)));
    }
    std::shuffle(keys.begin(), keys.end(), rng);
    return keys;
  };
  std::vector<std::unique_ptr<client>> clients;
  auto add = [&](role kind, std::vector<std::string> keys, char tag = 'a') {
    auto c = std::make_unique<client>();
    c->st = &st;
    c->kind = kind;
    c->keys = std::move(keys);
    c->tag = tag;
    clients.push_back(std::move(c));
  };
  constexpr std::size_t groups = 4;
  for (std::size_t g = 0; g < groups; ++g) {
    const std::vector<std::string> keys = group(g);
    add(role::writer, keys);
    add(role::mget_reader, keys);
    // GETs in key order (the order the request takes its leaves in) and in the reverse one.
    std::vector<std::string> ordered = keys;
    std::sort(ordered.begin(), ordered.end());
    add(role::seq_reader, ordered);
    std::reverse(ordered.begin(), ordered.end());
    add(role::seq_reader, ordered);
  }
  {
    const std::vector<std::string> keys = group(groups);
    add(role::deleter, keys);
    add(role::mget_reader, keys);
    add(role::mget_reader, keys);
  }
  {
    std::vector<std::string> keys = group(groups + 1);
    add(role::crossed, keys, 'a');
    std::reverse(keys.begin(), keys.end());
    add(role::crossed, keys, 'b');
    add(role::mget_reader, keys);
  }
  for (const auto& c : clients) {
    if (c->kind == role::writer || c->kind == role::deleter || c->kind == role::crossed) {
      st.writers_left.fetch_add(1, std::memory_order_relaxed);
    }
  }
  for (const auto& c : clients) {
    client* p = c.get();
    rt.spawn([p](tessera::context& ctx) { p->start(ctx); });
  }
  rt.wait_idle();

  EXPECT_EQ(st.violations.load(), 0);
  EXPECT_GT(st.mgets.load(), 0);
  EXPECT_GT(st.sequences.load(), 0);
  // Every write landed: the last generation everywhere, every new key there.
  std::size_t fillers = 0;
  for (const auto& c : clients) {
    if (c->kind == role::writer) fillers += c->fillers.size();
  }
  // (The deleter's last round, an even one, deleted its group.)
  static_assert(writer_rounds % 2 == 0);
  EXPECT_EQ(tree->counters().keys.load(),
            static_cast<std::int64_t>(preload_keys + fillers - group_size));
  for (const auto& c : clients) {
    if (c->kind != role::writer) continue;
    for (const std::string& k : c->keys) {
      server::key_op op;
      req r;
      op.key = k;
      op.user = &r;
      op.apply = &apply_get;
      tree->apply_exclusive(op);
      ASSERT_TRUE(r.found) << k;
      EXPECT_EQ(r.value, std::to_string(writer_rounds)) << k;
    }
  }
  tree.reset();
}

void apply_put_or_fail(server::key_op& op, server::leaf_access& a) {
  if (op.arg == "fail") throw std::bad_alloc();  // as an allocation in put would
  a.put(op.key, std::string(op.arg), 0, false);
}

// A multi-key request whose apply throws on its last leaf, holding the leaves before it: the
// request ends with the failure as its outcome (the exception stays in the tree) and every hold
// is released (writers and MSETs on those leaves go on). The apply throws by itself: no
// allocation is faked. (string_tree_failure_test.cpp: on_done, commit, other leaves.)
TEST_P(string_tree_multi, a_request_that_throws_releases_its_holds) {
  tessera::runtime rt({.workers = GetParam()});
  auto tree = std::make_unique<server::string_tree>(rt);
  for (std::size_t i = 0; i < 2000; ++i) {
    const std::string k = key_at(i);
    server::key_op op{.key = k, .writes = true, .apply = &apply_put, .arg = "0"};
    tree->apply_exclusive(op);
  }
  ASSERT_GT(tree->counters().leaves.load(), 4U);
  const std::vector<std::string> keys{key_at(0), key_at(700), key_at(1400), key_at(1999)};
  std::vector<server::key_op> ops(keys.size());
  std::vector<server::key_op*> ptrs;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ops[i] = {.key = keys[i], .writes = true, .apply = &apply_put_or_fail,
              .arg = i + 1 == keys.size() ? "fail" : "1"};
    ptrs.push_back(&ops[i]);
  }
  ASSERT_NE(tree->leaf_for(keys.front()), tree->leaf_for(keys.back()));
  rt.spawn([&](tessera::context& ctx) {
    tree->submit_multi(server::multi_request{.writes = true}, ptrs, ctx);
  });
  rt.wait_idle();
  EXPECT_TRUE(rt.take_unhandled_exceptions().empty());
  for (const server::key_op& op : ops) EXPECT_EQ(op.outcome, server::op_outcome::out_of_memory);
  for (const std::string& k : keys) ASSERT_EQ(tree->leaf_for(k)->hold.load(), 0U) << k;

  // The leaves take writers and multi-key writers again.
  std::atomic<int> done{0};
  std::vector<server::key_op> again(keys.size());
  std::vector<server::key_op*> again_ptrs;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    again[i] = {.key = keys[i], .writes = true, .apply = &apply_put, .arg = "2"};
    again_ptrs.push_back(&again[i]);
  }
  server::key_op single{.key = keys[1], .writes = true, .apply = &apply_put,
                        .on_done = [](server::key_op& op, tessera::context&) {
                          static_cast<std::atomic<int>*>(op.user)->fetch_add(1);
                        },
                        .user = &done};
  rt.spawn([&](tessera::context& ctx) {
    tree->submit_multi(server::multi_request{.writes = true,
                                             .on_done = [](void* u, tessera::context&) {
                                               static_cast<std::atomic<int>*>(u)->fetch_add(1);
                                             },
                                             .user = &done},
                       again_ptrs, ctx);
    tree->submit(single, ctx);
  });
  rt.wait_idle();
  EXPECT_EQ(done.load(), 2);
  EXPECT_TRUE(rt.take_unhandled_exceptions().empty());
  tree.reset();
}

void apply_get_into(server::key_op& op, server::leaf_access& a) {
  const server::slot* e = a.find(op.key);
  *static_cast<std::string*>(op.user) = e == nullptr ? std::string() : std::string(e->value.view());
}

/// The commit's ops of the request below, as it saw them (one request at a time).
std::vector<std::pair<std::string, std::string>> committed;

// A multi-key request takes its ops in key order, equal keys in the order given (the commit sees
// them so, and the last one given for a key is what stays), for a few ops (sorted in place) and
// for many (a library sort), given in any order.
TEST_P(string_tree_multi, ops_are_applied_in_key_order_equal_keys_as_given) {
  tessera::runtime rt({.workers = GetParam()});
  auto tree = std::make_unique<server::string_tree>(rt);
  for (std::size_t i = 0; i < 3000; i += 2) {
    const std::string k = key_at(i);
    server::key_op op{.key = k, .writes = true, .apply = &apply_put, .arg = "old"};
    tree->apply_exclusive(op);
  }
  std::mt19937 rng(11);
  for (const std::size_t n : {2U, 5U, 10U, 16U, 17U, 40U}) {
    // Keys spread over the store, some given twice (and one of them three times).
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < n; ++i) keys.push_back(key_at(rng() % 3000));
    keys[n - 1] = keys[0];
    if (n > 4) keys[n / 2] = keys[0];
    std::vector<std::string> values;
    for (std::size_t i = 0; i < n; ++i) values.push_back("v" + std::to_string(n) + ":" + std::to_string(i));
    std::vector<server::key_op> ops(n);
    std::vector<server::key_op*> ptrs;
    for (std::size_t i = 0; i < n; ++i) {
      ops[i] = {.key = keys[i], .writes = true, .apply = &apply_put, .arg = values[i]};
      ptrs.push_back(&ops[i]);
    }
    committed.clear();
    rt.spawn([&](tessera::context& ctx) {
      tree->submit_multi(server::multi_request{.writes = true,
                                               .commit =
                                                   [](std::span<server::key_op* const> done) {
                                                     for (const server::key_op* op : done) {
                                                       committed.emplace_back(op->key, op->arg);
                                                     }
                                                   }},
                         ptrs, ctx);
    });
    rt.wait_idle();
    EXPECT_TRUE(rt.take_unhandled_exceptions().empty());
    // What a stable sort by key of the ops as given yields.
    std::vector<std::pair<std::string, std::string>> want;
    for (std::size_t i = 0; i < n; ++i) want.emplace_back(keys[i], values[i]);
    std::stable_sort(want.begin(), want.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    EXPECT_EQ(committed, want) << n << " ops";
    // Each key holds the last value given for it.
    for (std::size_t i = 0; i < n; ++i) {
      std::size_t last = i;
      for (std::size_t j = i + 1; j < n; ++j) {
        if (keys[j] == keys[i]) last = j;
      }
      server::key_op get{.key = keys[i], .apply = &apply_get_into};
      std::string got;
      get.user = &got;
      tree->apply_exclusive(get);
      EXPECT_EQ(got, values[last]) << keys[i] << ", " << n << " ops";
    }
  }
  tree.reset();
}

INSTANTIATE_TEST_SUITE_P(workers, string_tree_multi, ::testing::Values(1U, 2U, 4U));

}  // namespace
