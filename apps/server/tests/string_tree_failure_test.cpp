// server::string_tree when a request's apply throws, and the holds' fairness to readers.
// A request whose apply (or a walk's visit) throws still ends: settle / on_done run, with the
// failure as the request's outcome, and the tree serves later requests as before; what was stored
// stays. The faults are injected by the tests' own apply functions (they throw std::bad_alloc as
// an allocation in put would, or another exception): nothing in the tree is faked.
// Fairness: with multi-key writers holding a leaf without a break, a client's GETs and MGETs on
// that leaf all complete while the writers still run (bounded by counts: the writers stop after a
// fixed number of rounds, far more than the reads need when readers are not starved).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <tessera/tessera.h>

#include "string_tree.h"

namespace {

std::string key_at(std::size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "key:%06zu", i);
  return buf;
}

void apply_put(server::key_op& op, server::leaf_access& a) {
  a.put(op.key, std::string(op.arg), 0, false);
}

/// Puts, or throws (arg "oom": std::bad_alloc, "fail": std::runtime_error) before it changes
/// anything, or (arg "oom-after") after its put.
void apply_put_or_throw(server::key_op& op, server::leaf_access& a) {
  if (op.arg == "oom") throw std::bad_alloc();
  if (op.arg == "fail") throw std::runtime_error("injected");
  a.put(op.key, std::string(op.arg), 0, false);
  if (op.arg == "oom-after") throw std::bad_alloc();
}

/// The value of `key` (empty: absent), read while no task runs.
std::string value_of(server::string_tree& tree, const std::string& key) {
  std::string v;
  server::key_op op{.key = key,
                    .apply = [](server::key_op& o, server::leaf_access& a) {
                      const server::slot* s = a.find(o.key);
                      if (s != nullptr) *static_cast<std::string*>(o.user) = s->value.view();
                    },
                    .user = &v};
  tree.apply_exclusive(op);
  return v;
}

void preload(server::string_tree& tree, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::string k = key_at(i);
    server::key_op op{.key = k, .writes = true, .apply = &apply_put, .arg = "0"};
    tree.apply_exclusive(op);
  }
}

class string_tree_failure : public ::testing::TestWithParam<unsigned> {};

// Single-key requests, with and without settle: each ends (on_done, or settle then on_done) with
// its outcome; the keys written before stay, and the leaf takes requests again.
TEST_P(string_tree_failure, a_single_key_request_that_throws_ends_with_its_outcome) {
  tessera::runtime rt({.workers = GetParam()});
  auto tree = std::make_unique<server::string_tree>(rt);
  preload(*tree, 600);  // a few leaves
  struct counts {
    std::atomic<int> done{0};
    std::atomic<int> settled{0};
  } n;
  const std::vector<std::string> args{"oom", "fail", "oom-after", "1", "oom", "2"};
  std::vector<std::string> keys;
  std::vector<server::key_op> ops(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) keys.push_back(key_at(i * 100 + 5));
  for (std::size_t i = 0; i < args.size(); ++i) {
    ops[i] = {.key = keys[i], .writes = true, .apply = &apply_put_or_throw,
              .on_done = [](server::key_op& op, tessera::context&) {
                static_cast<counts*>(op.user)->done.fetch_add(1);
              },
              .user = &n, .arg = args[i]};
    if (i % 2 == 1) {
      ops[i].settle = [](server::key_op& op) {
        static_cast<counts*>(op.user)->settled.fetch_add(1);
        return true;  // on_done too
      };
    }
  }
  rt.spawn([&](tessera::context& ctx) {
    for (auto& op : ops) tree->submit(op, ctx);
  });
  rt.wait_idle();
  EXPECT_TRUE(rt.take_unhandled_exceptions().empty());
  EXPECT_EQ(n.done.load(), static_cast<int>(ops.size()));
  EXPECT_EQ(n.settled.load(), static_cast<int>(ops.size() / 2));
  EXPECT_EQ(ops[0].outcome, server::op_outcome::out_of_memory);
  EXPECT_EQ(ops[1].outcome, server::op_outcome::failed);
  EXPECT_EQ(ops[2].outcome, server::op_outcome::out_of_memory);
  EXPECT_EQ(ops[3].outcome, server::op_outcome::applied);
  EXPECT_EQ(ops[4].outcome, server::op_outcome::out_of_memory);
  // Nothing stored is lost: a put that threw before it wrote left the old value; one that threw
  // after it wrote keeps its write (no undo).
  EXPECT_EQ(value_of(*tree, keys[0]), "0");
  EXPECT_EQ(value_of(*tree, keys[1]), "0");
  EXPECT_EQ(value_of(*tree, keys[2]), "oom-after");
  EXPECT_EQ(value_of(*tree, keys[3]), "1");
  EXPECT_EQ(value_of(*tree, keys[5]), "2");
  EXPECT_EQ(tree->counters().keys.load(), 600);

  // The same leaves take writers and readers again.
  n.done = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    ops[i].arg = "3";
    ops[i].settle = nullptr;
    ops[i].outcome = server::op_outcome::applied;
  }
  rt.spawn([&](tessera::context& ctx) {
    for (auto& op : ops) tree->submit(op, ctx);
  });
  rt.wait_idle();
  EXPECT_EQ(n.done.load(), static_cast<int>(ops.size()));
  for (std::size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].outcome, server::op_outcome::applied);
    EXPECT_EQ(value_of(*tree, keys[i]), "3");
  }
  tree.reset();
}

// A walk whose visit throws stops there and ends: on_done runs with the outcome.
TEST_P(string_tree_failure, a_walk_that_throws_ends_with_its_outcome) {
  tessera::runtime rt({.workers = GetParam()});
  auto tree = std::make_unique<server::string_tree>(rt);
  preload(*tree, 2000);
  ASSERT_GT(tree->counters().leaves.load(), 4U);
  struct state {
    server::leaf_walk walk;
    std::size_t leaves = 0;
    std::atomic<int> done{0};
  } st;
  st.walk.writes = false;
  st.walk.user = &st;
  st.walk.visit = [](server::leaf_walk& w, server::leaf_access&, server::leaf&) {
    auto& s = *static_cast<state*>(w.user);
    if (++s.leaves == 3) throw std::bad_alloc();
    return server::walk_step::next_leaf;
  };
  st.walk.on_done = [](server::leaf_walk& w, tessera::context&) {
    static_cast<state*>(w.user)->done.fetch_add(1);
  };
  rt.spawn([&](tessera::context& ctx) { tree->walk(st.walk, ctx); });
  rt.wait_idle();
  EXPECT_TRUE(rt.take_unhandled_exceptions().empty());
  EXPECT_EQ(st.done.load(), 1);
  EXPECT_EQ(st.leaves, 3U);
  EXPECT_EQ(st.walk.outcome, server::op_outcome::out_of_memory);
  EXPECT_EQ(tree->counters().keys.load(), 2000);
  tree.reset();
}

struct multi_counts {
  std::atomic<int> done{0};
  std::atomic<int> commits{0};
  std::atomic<std::size_t> committed_ops{0};
};

void count_done(void* user, tessera::context&) {
  static_cast<multi_counts*>(user)->done.fetch_add(1);
}

multi_counts* g_commit_counts = nullptr;  // the commit callback has no user pointer

void count_commit(std::span<server::key_op* const> ops) {
  g_commit_counts->commits.fetch_add(1);
  g_commit_counts->committed_ops.store(ops.size());
}

// A multi-key write whose apply throws, on its last leaf or on its first (holding nothing yet),
// and one whose apply throws on a middle leaf, holding the leaves before: each ends with on_done,
// every op's outcome the failure, commit given the ops applied before it, no hold left.
TEST_P(string_tree_failure, a_multi_key_request_that_throws_ends_with_its_outcome) {
  tessera::runtime rt({.workers = GetParam()});
  auto tree = std::make_unique<server::string_tree>(rt);
  preload(*tree, 2000);
  const std::vector<std::string> keys{key_at(0), key_at(700), key_at(1400), key_at(1999)};
  ASSERT_NE(tree->leaf_for(keys[0]), tree->leaf_for(keys[1]));
  ASSERT_NE(tree->leaf_for(keys[2]), tree->leaf_for(keys[3]));
  for (std::size_t failing = 0; failing < keys.size(); ++failing) {
    multi_counts n;
    g_commit_counts = &n;
    std::vector<std::string> args;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      args.push_back(i == failing ? "oom" : "r" + std::to_string(failing));
    }
    std::vector<server::key_op> ops(keys.size());
    std::vector<server::key_op*> ptrs;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      ops[i] = {.key = keys[i], .writes = true, .apply = &apply_put_or_throw, .arg = args[i]};
      ptrs.push_back(&ops[i]);
    }
    rt.spawn([&](tessera::context& ctx) {
      tree->submit_multi(server::multi_request{.writes = true, .commit = &count_commit,
                                               .on_done = &count_done, .user = &n},
                         ptrs, ctx);
    });
    rt.wait_idle();
    EXPECT_TRUE(rt.take_unhandled_exceptions().empty());
    EXPECT_EQ(n.done.load(), 1) << failing;
    for (const auto& op : ops) EXPECT_EQ(op.outcome, server::op_outcome::out_of_memory);
    // Commit got the ops applied before the failure (none: not called).
    EXPECT_EQ(n.commits.load(), failing == 0 ? 0 : 1) << failing;
    EXPECT_EQ(n.committed_ops.load(), failing) << failing;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      ASSERT_EQ(tree->leaf_for(keys[i])->hold.load(), 0U) << keys[i];
      // The ops before the failing one took effect (no undo); the rest did not.
      if (i < failing) {
        EXPECT_EQ(value_of(*tree, keys[i]), args[i]);
      }
    }
    EXPECT_EQ(value_of(*tree, keys[failing]), "0");  // (written by no earlier round)
  }
  EXPECT_EQ(tree->counters().keys.load(), 2000);

  // The leaves take single and multi-key writers again.
  multi_counts n;
  g_commit_counts = &n;
  std::vector<server::key_op> again(keys.size());
  std::vector<server::key_op*> again_ptrs;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    again[i] = {.key = keys[i], .writes = true, .apply = &apply_put, .arg = "2"};
    again_ptrs.push_back(&again[i]);
  }
  std::atomic<int> single_done{0};
  server::key_op single{.key = keys[1], .writes = true, .apply = &apply_put,
                        .on_done = [](server::key_op& op, tessera::context&) {
                          static_cast<std::atomic<int>*>(op.user)->fetch_add(1);
                        },
                        .user = &single_done, .arg = "2"};
  rt.spawn([&](tessera::context& ctx) {
    tree->submit_multi(server::multi_request{.writes = true, .commit = &count_commit,
                                             .on_done = &count_done, .user = &n},
                       again_ptrs, ctx);
    tree->submit(single, ctx);
  });
  rt.wait_idle();
  EXPECT_EQ(n.done.load(), 1);
  EXPECT_EQ(n.committed_ops.load(), keys.size());
  EXPECT_EQ(single_done.load(), 1);
  for (const auto& op : again) EXPECT_EQ(op.outcome, server::op_outcome::applied);
  for (const std::string& k : keys) EXPECT_EQ(value_of(*tree, k), "2");
  tree.reset();
}

// ---- fairness ---------------------------------------------------------------------------------

constexpr int writer_clients = 3;
constexpr int reads = 200;
/// Rounds per writer: far more than the reads need when they are not starved (each read waits
/// for at most one more exclusive hold per writer, fairness in string_tree.h), so writers that
/// run out of rounds before the reader is done mean a starved reader.
constexpr int writer_round_cap = reads * 40;

struct fair_state {
  server::string_tree* tree = nullptr;
  std::atomic<bool> reader_done{false};
  std::atomic<int> writers_capped{0};
  std::atomic<long> writer_rounds{0};
  int reads_done = 0;            // the reader's (one client, one request at a time)
  long rounds_at_reader_done = 0;
};

struct writer_client {
  fair_state* st = nullptr;
  std::string held_key;  // in the readers' leaf: MSET holds it (not its last leaf)
  std::string last_key;  // in a leaf further right: MSET's last leaf
  std::string value = "w";
  server::key_op ops[2];
  server::key_op* ptrs[2] = {&ops[0], &ops[1]};
  int round = 0;

  void start(tessera::context& ctx) {
    ops[0] = {.key = held_key, .writes = true, .apply = &apply_put, .arg = value};
    ops[1] = {.key = last_key, .writes = true, .apply = &apply_put, .arg = value};
    st->tree->submit_multi(server::multi_request{.writes = true, .on_done = &done, .user = this},
                           ptrs, ctx);
  }
  static void done(void* user, tessera::context& ctx) {
    auto& w = *static_cast<writer_client*>(user);
    w.st->writer_rounds.fetch_add(1, std::memory_order_relaxed);
    if (w.st->reader_done.load(std::memory_order_acquire)) return;
    if (++w.round == writer_round_cap) {
      w.st->writers_capped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    w.start(ctx);
  }
};

struct reader_client {
  fair_state* st = nullptr;
  std::string key;       // in the leaf the writers hold
  std::string far_key;   // MGET's second key, in the writers' last leaf
  server::key_op get{};
  server::key_op mget[2];
  server::key_op* mget_ptrs[2] = {&mget[0], &mget[1]};

  static void apply_read(server::key_op& op, server::leaf_access& a) { (void)a.find(op.key); }

  void next(tessera::context& ctx) {
    if (st->reads_done % 2 == 0) {
      get = {.key = key, .apply = &apply_read, .on_done = &get_done, .user = this};
      st->tree->submit(get, ctx);
    } else {
      // MGET: a shared hold on the writers' leaf (not its last).
      mget[0] = {.key = key, .apply = &apply_read};
      mget[1] = {.key = far_key, .apply = &apply_read};
      st->tree->submit_multi(server::multi_request{.on_done = &mget_done, .user = this},
                             mget_ptrs, ctx);
    }
  }
  void finished(tessera::context& ctx) {
    if (++st->reads_done == reads) {
      st->rounds_at_reader_done = st->writer_rounds.load(std::memory_order_relaxed);
      st->reader_done.store(true, std::memory_order_release);
      return;
    }
    next(ctx);
  }
  static void get_done(server::key_op& op, tessera::context& ctx) {
    static_cast<reader_client*>(op.user)->finished(ctx);
  }
  static void mget_done(void* user, tessera::context& ctx) {
    static_cast<reader_client*>(user)->finished(ctx);
  }
};

// Multi-key writers keep the readers' leaf held exclusively, one after the other without a
// break; a client's GETs and MGETs of that leaf all complete while they run.
TEST_P(string_tree_failure, readers_are_not_starved_by_a_stream_of_multi_key_writes) {
  tessera::runtime rt({.workers = GetParam()});
  auto tree = std::make_unique<server::string_tree>(rt);
  preload(*tree, 2000);
  fair_state st;
  st.tree = tree.get();
  const std::string read_key = key_at(10);
  const std::string far_key = key_at(1500);
  ASSERT_NE(tree->leaf_for(read_key), tree->leaf_for(far_key));
  std::vector<std::unique_ptr<writer_client>> writers;
  for (int i = 0; i < writer_clients; ++i) {
    auto w = std::make_unique<writer_client>();
    w->st = &st;
    w->held_key = key_at(11 + static_cast<std::size_t>(i));  // beside read_key: the same leaf
    w->last_key = key_at(1600 + static_cast<std::size_t>(i));
    ASSERT_EQ(tree->leaf_for(w->held_key), tree->leaf_for(read_key));
    writers.push_back(std::move(w));
  }
  reader_client reader;
  reader.st = &st;
  reader.key = read_key;
  reader.far_key = far_key;
  rt.spawn([&](tessera::context& ctx) {
    for (auto& w : writers) w->start(ctx);
    reader.next(ctx);  // after the writers: it finds the leaf held
  });
  rt.wait_idle();
  EXPECT_EQ(st.reads_done, reads);
  EXPECT_TRUE(st.reader_done.load());
  // The reads completed while the writers still ran: none of them ran out of rounds first.
  EXPECT_EQ(st.writers_capped.load(), 0) << "writer rounds: " << st.writer_rounds.load();
  EXPECT_GT(st.rounds_at_reader_done, 0);  // the writers did run beside the reads
  for (const std::string& k : {read_key, far_key}) {
    EXPECT_EQ(tree->leaf_for(k)->hold.load(), 0U);
  }
  tree.reset();
}

INSTANTIATE_TEST_SUITE_P(workers, string_tree_failure, ::testing::Values(1U, 2U, 4U));

}  // namespace
