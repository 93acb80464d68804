// Tests of kv::task_tree: a randomized differential test against std::map under concurrency for
// every synchronization mode, root splits, deleting down to an empty tree and refilling it, and
// scans crossing leaves during concurrent splits. Each test ends with kv::check_tree.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kv/checker.h"
#include "kv/task_tree.h"
#include "tessera/coupled_write.h"

#if defined(TESSERA_DEBUG_CHECKS)
#include "runtime/scheduler.h"   // the global epoch
#include "runtime/test_hooks.h"  // the runtime's seams
#include "test_hooks.h"          // the tree's seams (apps/kv/src)
#endif

namespace {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr std::size_t scale = 1;
#else
constexpr std::size_t scale = 4;
#endif

struct batch_state {
  std::atomic<std::size_t> pending{0};
};

void count_down(kv::request& r) {
  static_cast<batch_state*>(r.user)->pending.fetch_sub(1, std::memory_order_release);
}

/// Submits all requests from outside and waits for the runtime to drain.
void run_all(tessera::runtime& rt, kv::task_tree& tree, std::vector<kv::request>& reqs) {
  batch_state state;
  state.pending.store(reqs.size());
  for (auto& r : reqs) {
    r.on_done = count_down;
    r.user = &state;
    tree.submit(r);
  }
  rt.wait_idle();
  ASSERT_EQ(state.pending.load(std::memory_order_acquire), 0u);
}

/// Inserts keys 0, stride, 2 x stride, ... (n of them), each with value = key, and waits.
void load_strided(tessera::runtime& rt, kv::task_tree& tree, std::size_t n, kv::key_type stride) {
  std::vector<kv::request> load(n);
  for (std::size_t i = 0; i < n; ++i) {
    load[i].type = kv::request_type::insert;
    load[i].key = stride * i;
    load[i].value = stride * i;
  }
  run_all(rt, tree, load);
}

void expect_consistent(const kv::task_tree& tree,
                       const std::map<kv::key_type, kv::value_t>& model) {
  const kv::check_result check = kv::check_tree(tree.root());
  ASSERT_TRUE(check.ok) << check.message;
  ASSERT_EQ(tree.size(), model.size());
}

/// Every entry of the tree, via one long scan, equals the model.
void expect_equal_contents(tessera::runtime& rt, kv::task_tree& tree,
                           const std::map<kv::key_type, kv::value_t>& model) {
  std::vector<kv::entry> out(model.size() + 1);
  std::vector<kv::request> scan(1);
  scan[0].type = kv::request_type::scan;
  scan[0].key = 0;
  scan[0].scan_count = static_cast<std::uint32_t>(out.size());
  scan[0].scan_out = out.data();
  run_all(rt, tree, scan);
  ASSERT_EQ(scan[0].scanned, model.size());
  std::size_t i = 0;
  for (const auto& [k, v] : model) {
    ASSERT_EQ(out[i].key, k) << "entry " << i;
    ASSERT_EQ(out[i].value, v) << "entry " << i;
    ++i;
  }
}

struct sync_case {
  kv::tree_sync sync;
  unsigned workers;
  /// kv::tree_options::coupled_bytes: by default the small trees here are read coupled on every
  /// inner level; 0 tests one run per node.
  std::size_t coupled_bytes = kv::tree_options{}.coupled_bytes;
  /// kv::tree_options::coupled_leaf_bytes: by default (the last-level cache) lookups submitted
  /// from a task read their leaf coupled in these small trees; 0 tests one task per lookup.
  std::optional<std::size_t> coupled_leaf_bytes = kv::tree_options{}.coupled_leaf_bytes;
};

/// The tree options a case names (sync, coupled_bytes, coupled_leaf_bytes).
kv::tree_options options_of(const sync_case& c) {
  return {.sync = c.sync,
          .coupled_bytes = c.coupled_bytes,
          .coupled_leaf_bytes = c.coupled_leaf_bytes};
}

std::string name_of(const testing::TestParamInfo<sync_case>& info) {
  const char* names[] = {"auto", "spinlock", "rwlatch", "optimistic", "scheduling"};
  return std::string(names[static_cast<int>(info.param.sync)]) + "_w" +
         std::to_string(info.param.workers) +
         (info.param.coupled_bytes == 0 ? "_uncoupled" : "") +
         (info.param.coupled_leaf_bytes == std::size_t{0} ? "_leaves_uncoupled" : "");
}

class task_tree_test : public testing::TestWithParam<sync_case> {};

TEST_P(task_tree_test, differential_against_std_map_under_concurrency) {
  tessera::runtime rt({.workers = GetParam().workers});
  kv::task_tree tree(rt, {.sync = GetParam().sync, .coupled_bytes = GetParam().coupled_bytes});
  std::map<kv::key_type, kv::value_t> model;
  std::mt19937_64 rng(42);
  const std::size_t keys = 3000 * scale;
  // Rounds of concurrent requests on distinct keys (so the model's outcome is determined),
  // mixing every operation; lookups and scans of keys untouched in the round are checked.
  for (int round = 0; round < 6; ++round) {
    std::vector<kv::key_type> order(keys);
    for (std::size_t i = 0; i < keys; ++i) order[i] = i * 7 + 1;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<kv::request> reqs(keys / 2);
    std::vector<std::vector<kv::entry>> scan_out(reqs.size());
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      kv::request& r = reqs[i];
      r.key = order[i];
      r.value = rng();
      switch (rng() % 6) {
        case 0: r.type = kv::request_type::insert; break;
        case 1: r.type = kv::request_type::update; break;
        case 2: r.type = kv::request_type::upsert; break;
        case 3: r.type = kv::request_type::remove; break;
        case 4: r.type = kv::request_type::lookup; break;
        default:
          r.type = kv::request_type::scan;
          r.scan_count = 1 + static_cast<std::uint32_t>(rng() % 40);
          scan_out[i].resize(r.scan_count);
          r.scan_out = scan_out[i].data();
          break;
      }
    }
    const std::map<kv::key_type, kv::value_t> before = model;
    run_all(rt, tree, reqs);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      const kv::request& r = reqs[i];
      const auto it = before.find(r.key);
      const bool present = it != before.end();
      switch (r.type) {
        case kv::request_type::insert:
          EXPECT_EQ(r.status, present ? kv::request_status::exists : kv::request_status::ok);
          if (!present) model[r.key] = r.value;
          break;
        case kv::request_type::update:
          EXPECT_EQ(r.status, present ? kv::request_status::ok : kv::request_status::not_found);
          if (present) model[r.key] = r.value;
          break;
        case kv::request_type::upsert: model[r.key] = r.value; break;
        case kv::request_type::remove:
          EXPECT_EQ(r.status, present ? kv::request_status::ok : kv::request_status::not_found);
          model.erase(r.key);
          break;
        case kv::request_type::lookup:
          EXPECT_EQ(r.status, present ? kv::request_status::ok : kv::request_status::not_found);
          if (present) {
            EXPECT_EQ(r.value, it->second);
          }
          break;
        case kv::request_type::scan:
          // Other keys change concurrently: check order and range only.
          for (std::uint32_t j = 0; j < r.scanned; ++j) {
            EXPECT_GE(r.scan_out[j].key, r.key);
            if (j > 0) {
              EXPECT_LT(r.scan_out[j - 1].key, r.scan_out[j].key);
            }
          }
          break;
      }
    }
    expect_consistent(tree, model);
  }
  expect_equal_contents(rt, tree, model);
}

TEST_P(task_tree_test, root_splits_and_delete_to_empty_then_refill) {
  tessera::runtime rt({.workers = GetParam().workers});
  kv::task_tree tree(rt, {.sync = GetParam().sync, .coupled_bytes = GetParam().coupled_bytes});
  std::map<kv::key_type, kv::value_t> model;
  const std::size_t n = 6000 * scale;  // several levels with ~58 keys a leaf
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<kv::request> ins(n);
    for (std::size_t i = 0; i < n; ++i) {
      ins[i].type = kv::request_type::insert;
      ins[i].key = (i * 2654435761u) % (n * 4);
      ins[i].value = i + pass;
    }
    // Duplicated keys are possible: make them distinct.
    std::sort(ins.begin(), ins.end(), [](auto& a, auto& b) { return a.key < b.key; });
    ins.erase(std::unique(ins.begin(), ins.end(), [](auto& a, auto& b) { return a.key == b.key; }),
              ins.end());
    run_all(rt, tree, ins);
    for (auto& r : ins) {
      EXPECT_EQ(r.status, kv::request_status::ok);
      model[r.key] = r.value;
    }
    EXPECT_GE(tree.height(), 3u);
    expect_consistent(tree, model);
    std::vector<kv::request> del(ins.size());
    for (std::size_t i = 0; i < del.size(); ++i) {
      del[i].type = kv::request_type::remove;
      del[i].key = ins[i].key;
    }
    run_all(rt, tree, del);
    for (auto& r : del) EXPECT_EQ(r.status, kv::request_status::ok);
    model.clear();
    expect_consistent(tree, model);
    EXPECT_GT(tree.retired_nodes(), 0u);
  }
}

TEST_P(task_tree_test, scans_cross_leaves_during_concurrent_splits) {
  tessera::runtime rt({.workers = GetParam().workers});
  kv::task_tree tree(rt, {.sync = GetParam().sync, .coupled_bytes = GetParam().coupled_bytes});
  // Even keys loaded; then odd keys inserted while scans run. A scan must see every even key
  // of its range (they never change) in ascending order, odd ones or not.
  const std::size_t n = 2000 * scale;
  load_strided(rt, tree, n, 2);
  std::vector<kv::request> mixed;
  std::vector<std::vector<kv::entry>> out(n / 4);
  for (std::size_t i = 0; i < n; ++i) {
    kv::request r;
    r.type = kv::request_type::insert;
    r.key = 2 * i + 1;
    r.value = 2 * i + 1;
    mixed.push_back(r);
    if (i % 4 == 0) {
      kv::request s;
      s.type = kv::request_type::scan;
      s.key = 2 * ((i * 7919) % n);
      s.scan_count = 200;
      out[i / 4].resize(200);
      s.scan_out = out[i / 4].data();
      mixed.push_back(s);
    }
  }
  run_all(rt, tree, mixed);
  for (auto& r : mixed) {
    if (r.type != kv::request_type::scan) continue;
    kv::key_type expect_even = r.key;
    for (std::uint32_t j = 0; j < r.scanned; ++j) {
      const kv::entry e = r.scan_out[j];
      ASSERT_EQ(e.key, e.value);
      if (j > 0) {
        ASSERT_LT(r.scan_out[j - 1].key, e.key);
      }
      if (e.key % 2 == 0) {
        ASSERT_EQ(e.key, expect_even) << "scan from " << r.key << " skipped an even key";
        expect_even += 2;
      }
    }
    if (r.scanned < r.scan_count) {
      EXPECT_EQ(expect_even, 2 * n);  // ran off the end
    }
  }
  const kv::check_result check = kv::check_tree(tree.root());
  ASSERT_TRUE(check.ok) << check.message;
  EXPECT_EQ(tree.size(), 2 * n);
}

/// A batch of requests submitted together from one task (task_tree::submit of a span).
struct task_batch {
  std::atomic<std::size_t>* pending = nullptr;
  std::atomic<std::size_t>* completed_in_submit = nullptr;  ///< lookups
  std::atomic<std::size_t>* updates_in_submit = nullptr;    ///< if given
  std::atomic<std::size_t>* inserts_in_submit = nullptr;    ///< if given
  std::atomic<std::size_t>* others_in_submit = nullptr;     ///< if given: any other type
};
/// The batch whose submit the calling thread is inside, if any.
thread_local const task_batch* submitting = nullptr;

void count_batch_done(kv::request& r) {
  const auto& b = *static_cast<const task_batch*>(r.user);
  // A lookup read coupled (an update, insert or remove written coupled) completes inside its
  // submit, on the submitting thread.
  if (submitting == &b) {
    std::atomic<std::size_t>* counter = b.completed_in_submit;
    if (r.type == kv::request_type::update && b.updates_in_submit != nullptr)
      counter = b.updates_in_submit;
    else if (r.type == kv::request_type::insert && b.inserts_in_submit != nullptr)
      counter = b.inserts_in_submit;
    else if (r.type != kv::request_type::lookup && b.others_in_submit != nullptr)
      counter = b.others_in_submit;
    counter->fetch_add(1, std::memory_order_relaxed);
  }
  b.pending->fetch_sub(1, std::memory_order_release);
}

TEST_P(task_tree_test, lookups_submitted_from_tasks_during_writes) {
  const sync_case c = GetParam();
  tessera::runtime rt({.workers = c.workers});
  kv::task_tree tree(rt, options_of(c));
  // Keys 0, 4, 8, ... loaded with value = key. Then, submitted from tasks in batches (a span
  // each): lookups of every loaded key, updates of keys = 4 (mod 8) to key + 1, inserts of the
  // odd keys (splits under the lookups), removes of a run of loaded keys (empty leaves unlinked
  // under them). A lookup of a key nothing writes finds it with its value; one of an updated key
  // finds the old or the new value, one of a removed key the old value or nothing.
  const std::size_t n = 1500 * scale;
  load_strided(rt, tree, n, 4);
  const kv::key_type removed_from = 4 * (n / 2), removed_to = 4 * (n / 2 + 300);
  std::vector<kv::request> reqs;
  std::mt19937_64 rng(11);
  for (std::size_t i = 0; i < n; ++i) {
    const kv::key_type k = 4 * i;
    reqs.push_back({.type = kv::request_type::lookup, .key = k});
    if (k >= removed_from && k < removed_to) {
      reqs.push_back({.type = kv::request_type::remove, .key = k});
    } else if (k % 8 == 4) {
      reqs.push_back({.type = kv::request_type::update, .key = k, .value = k + 1});
    }
    reqs.push_back({.type = kv::request_type::insert, .key = 2 * i + 1, .value = 2 * i + 1});
    reqs.push_back({.type = kv::request_type::lookup, .key = 4 * (rng() % n)});
  }
  std::shuffle(reqs.begin(), reqs.end(), rng);
  std::atomic<std::size_t> pending{reqs.size()};
  std::atomic<std::size_t> in_submit{0}, updates_in_submit{0}, inserts_in_submit{0},
      others_in_submit{0};
  constexpr std::size_t per_batch = 50;
  std::vector<task_batch> batches((reqs.size() + per_batch - 1) / per_batch);
  const tessera::group g = rt.make_group();
  for (std::size_t b = 0; b < batches.size(); ++b) {
    batches[b] = {.pending = &pending,
                  .completed_in_submit = &in_submit,
                  .updates_in_submit = &updates_in_submit,
                  .inserts_in_submit = &inserts_in_submit,
                  .others_in_submit = &others_in_submit};
    const std::size_t first = b * per_batch;
    const std::size_t count = std::min(per_batch, reqs.size() - first);
    for (std::size_t i = first; i < first + count; ++i) {
      reqs[i].on_done = count_batch_done;
      reqs[i].user = &batches[b];
    }
    const std::span<kv::request> span(reqs.data() + first, count);
    const task_batch* batch = &batches[b];
    rt.spawn(rt.make_task_from([&tree, span, batch](tessera::context& ctx) {
               submitting = batch;
               tree.submit(span, ctx);
               submitting = nullptr;
             }),
             g);
  }
  rt.wait(g);
  rt.wait_idle();
  ASSERT_EQ(pending.load(std::memory_order_acquire), 0u);
  std::map<kv::key_type, kv::value_t> model;
  for (std::size_t i = 0; i < n; ++i) {
    const kv::key_type k = 4 * i;
    if (k < removed_from || k >= removed_to) model[k] = k % 8 == 4 ? k + 1 : k;
    model[2 * i + 1] = 2 * i + 1;
  }
  for (const kv::request& r : reqs) {
    switch (r.type) {
      case kv::request_type::lookup:
        if (r.key >= removed_from && r.key < removed_to) {
          if (r.status == kv::request_status::ok) {
            EXPECT_EQ(r.value, r.key) << r.key;
          }
        } else {
          ASSERT_EQ(r.status, kv::request_status::ok) << "lookup of " << r.key;
          if (r.key % 8 == 4) {
            EXPECT_TRUE(r.value == r.key || r.value == r.key + 1) << r.key << ": " << r.value;
          } else {
            EXPECT_EQ(r.value, r.key);
          }
        }
        break;
      default: EXPECT_EQ(r.status, kv::request_status::ok) << r.key; break;
    }
  }
  expect_consistent(tree, model);
  expect_equal_contents(rt, tree, model);
  // Lookups complete in their submit where the leaves' primitive keeps a version (optimistic,
  // or none at one worker) and the tree is read coupled down to its leaves; so do updates,
  // inserts (splits included) and removes (unlinks included) there (the leaves' latch taken in
  // submit: optimistic_latch, none). Spinlock and rwlatch inner nodes keep a descent from
  // reaching the leaves coupled; scheduled leaves refuse a coupled write.
  const bool versioned =
      c.sync == kv::tree_sync::automatic || c.sync == kv::tree_sync::optimistic;
  if (versioned && c.coupled_bytes > 0 && c.coupled_leaf_bytes != std::size_t{0}) {
    EXPECT_GT(in_submit.load(), 0u);
    EXPECT_GT(updates_in_submit.load(), 0u);
    EXPECT_GT(inserts_in_submit.load(), 0u);
    EXPECT_GT(others_in_submit.load(), 0u);  // removes
  } else {
    EXPECT_EQ(in_submit.load(), 0u);
    EXPECT_EQ(updates_in_submit.load(), 0u);
    EXPECT_EQ(inserts_in_submit.load(), 0u);
    EXPECT_EQ(others_in_submit.load(), 0u);
  }
}

/// A batch submitted with inline_completion::counted: its requests not yet accounted for, and
/// the on_done calls made inside its submit (there must be none).
struct counted_batch {
  std::atomic<std::size_t> pending{0};
  std::atomic<std::size_t> on_done_in_submit{0};
};
thread_local const counted_batch* submitting_counted = nullptr;

void count_counted_done(kv::request& r) {
  auto& b = *static_cast<counted_batch*>(r.user);
  if (submitting_counted == &b) b.on_done_in_submit.fetch_add(1, std::memory_order_relaxed);
  b.pending.fetch_sub(1, std::memory_order_release);
}

// submit(span) with inline_completion::counted: a request completed inside the call runs no
// on_done and is counted in what submit returns, every other one runs its on_done from its task;
// together each request is accounted for once, with the answers of the on_done form.
TEST_P(task_tree_test, inline_completions_are_counted_instead_of_calling_on_done) {
  const sync_case c = GetParam();
  tessera::runtime rt({.workers = c.workers});
  kv::task_tree tree(rt, options_of(c));
  // Keys 0, 2, 4, ... loaded with value = key; then lookups of the keys = 0 (mod 4), updates of
  // the keys = 2 (mod 4) to key + 1, inserts of the odd keys (splits), in batches of a span each.
  const std::size_t n = 1000 * scale;
  load_strided(rt, tree, n, 2);
  std::vector<kv::request> reqs;
  for (std::size_t i = 0; i < n; ++i) {
    const kv::key_type k = 2 * i;
    if (k % 4 == 0)
      reqs.push_back({.type = kv::request_type::lookup, .key = k});
    else
      reqs.push_back({.type = kv::request_type::update, .key = k, .value = k + 1});
    reqs.push_back({.type = kv::request_type::insert, .key = k + 1, .value = k + 1});
  }
  std::mt19937_64 rng(5);
  std::shuffle(reqs.begin(), reqs.end(), rng);
  constexpr std::size_t per_batch = 40;
  std::vector<counted_batch> batches((reqs.size() + per_batch - 1) / per_batch);
  std::atomic<std::size_t> counted{0};
  const tessera::group g = rt.make_group();
  for (std::size_t b = 0; b < batches.size(); ++b) {
    const std::size_t first = b * per_batch;
    const std::size_t count = std::min(per_batch, reqs.size() - first);
    counted_batch* batch = &batches[b];
    batch->pending.store(count, std::memory_order_relaxed);
    for (std::size_t i = first; i < first + count; ++i) {
      reqs[i].on_done = count_counted_done;
      reqs[i].user = batch;
    }
    const std::span<kv::request> span(reqs.data() + first, count);
    rt.spawn(rt.make_task_from([&tree, &counted, span, batch](tessera::context& ctx) {
               submitting_counted = batch;
               const std::size_t done = tree.submit(span, ctx, kv::inline_completion::counted);
               submitting_counted = nullptr;
               counted.fetch_add(done, std::memory_order_relaxed);
               batch->pending.fetch_sub(done, std::memory_order_release);
             }),
             g);
  }
  rt.wait(g);
  rt.wait_idle();
  for (const counted_batch& b : batches) {
    ASSERT_EQ(b.pending.load(std::memory_order_acquire), 0u);
    EXPECT_EQ(b.on_done_in_submit.load(), 0u);
  }
  std::map<kv::key_type, kv::value_t> model;
  for (std::size_t i = 0; i < 2 * n; ++i) model[i] = i % 4 == 2 ? i + 1 : i;
  for (const kv::request& r : reqs) {
    EXPECT_EQ(r.status, kv::request_status::ok) << r.key;
    if (r.type == kv::request_type::lookup) {
      EXPECT_EQ(r.value, r.key);
    }
  }
  expect_consistent(tree, model);
  expect_equal_contents(rt, tree, model);
  // Requests complete inside submit where the tree is read coupled down to versioned leaves
  // (see lookups_submitted_from_tasks_during_writes); elsewhere every one takes a task.
  const bool versioned =
      c.sync == kv::tree_sync::automatic || c.sync == kv::tree_sync::optimistic;
  if (versioned && c.coupled_bytes > 0 && c.coupled_leaf_bytes != std::size_t{0}) {
    EXPECT_GT(counted.load(), 0u);
  } else {
    EXPECT_EQ(counted.load(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    sync_modes, task_tree_test,
    testing::Values(sync_case{kv::tree_sync::automatic, 1}, sync_case{kv::tree_sync::automatic, 2},
                    sync_case{kv::tree_sync::automatic, 4}, sync_case{kv::tree_sync::spinlock, 2},
                    sync_case{kv::tree_sync::rwlatch, 2}, sync_case{kv::tree_sync::optimistic, 3},
                    sync_case{kv::tree_sync::scheduling, 2},
                    sync_case{kv::tree_sync::scheduling, 4},
                    sync_case{kv::tree_sync::automatic, 2, 0},
                    sync_case{kv::tree_sync::optimistic, 3, 0},
                    sync_case{kv::tree_sync::automatic, 1, kv::tree_options{}.coupled_bytes, 0},
                    sync_case{kv::tree_sync::automatic, 2, kv::tree_options{}.coupled_bytes, 0}),
    name_of);


#if defined(TESSERA_DEBUG_CHECKS)
/// What the hooks of the test below share with it. Every hold ends at open_all() at the latest.
struct dead_leaf_race {
  static constexpr std::uint64_t none = ~std::uint64_t{0};
  const kv::node* leaf = nullptr;       // L, unlinked first
  const kv::node* neighbour = nullptr;  // N, its left neighbour, unlinked while L waits to merge
  const tessera::runtime* rt = nullptr;
  std::array<std::atomic<bool>, 3> held{};  // workers held in a hook or a task of the test
  std::atomic<bool> pin_held{false};  // the task that holds the epoch
  std::atomic<bool> pin_open{false};
  std::atomic<bool> merge_reached{false};
  std::atomic<bool> merge_held{false};  // L's unlink task, dead L not yet merged
  std::atomic<bool> merge_open{false};
  std::atomic<bool> visit_armed{false};
  std::atomic<bool> visit_reached{false};
  std::atomic<bool> visit_held{false};  // the operation, about to read L
  std::atomic<bool> visit_open{false};
  std::atomic<bool> neighbour_freed{false};
  std::atomic<std::uint64_t> neighbour_retired_epoch{none};  // N's stamp in a retired list
  std::atomic<std::uint64_t> counted_epoch{none};  // of the last spawn made while recording
  static inline dead_leaf_race* current = nullptr;
  static inline thread_local bool recording = false;

  dead_leaf_race() {
    current = this;
    kv::test_hooks::unlink_merging.store(
        +[](const kv::node* l) {
          dead_leaf_race& s = *current;
          if (l != s.leaf || s.merge_reached.exchange(true)) return;
          s.hold_here(s.merge_held, s.merge_open);
        },
        std::memory_order_release);
    kv::test_hooks::op_visiting.store(
        +[](const kv::node* n) {
          dead_leaf_race& s = *current;
          if (n != s.leaf || !s.visit_armed.load() || s.visit_reached.exchange(true)) return;
          s.hold_here(s.visit_held, s.visit_open);
        },
        std::memory_order_release);
    tessera::detail::test_hooks::resource_freed.store(
        +[](const void* object) {
          if (object == current->neighbour) current->neighbour_freed.store(true);
        },
        std::memory_order_release);
    tessera::detail::test_hooks::resource_retired.store(
        +[](const void* object, std::uint64_t e) {
          if (object == current->neighbour) current->neighbour_retired_epoch.store(e);
        },
        std::memory_order_release);
    tessera::detail::test_hooks::epoch_read_for_count.store(
        +[](std::uint64_t e) {
          if (recording) current->counted_epoch.store(e);  // the last try is the one counted
        },
        std::memory_order_release);
  }
  /// Holds the calling worker until `open`; `arrived` once it is marked held.
  void hold_here(std::atomic<bool>& arrived, const std::atomic<bool>& open) {
    const unsigned w = rt->current_worker()->value;
    held[w].store(true);
    arrived.store(true);
    while (!open.load()) std::this_thread::yield();
    held[w].store(false);
  }
  void open_all() noexcept {
    pin_open.store(true);
    merge_open.store(true);
    visit_open.store(true);
  }
  ~dead_leaf_race() {
    open_all();
    kv::test_hooks::unlink_merging.store(nullptr);
    kv::test_hooks::op_visiting.store(nullptr);
    tessera::detail::test_hooks::resource_freed.store(nullptr);
    tessera::detail::test_hooks::resource_retired.store(nullptr);
    tessera::detail::test_hooks::epoch_read_for_count.store(nullptr);
    current = nullptr;
  }
  dead_leaf_race(const dead_leaf_race&) = delete;
  dead_leaf_race& operator=(const dead_leaf_race&) = delete;
};

void set_flag(kv::request& r) { static_cast<std::atomic<bool>*>(r.user)->store(true); }

/// The interleaving in which a dead leaf's old neighbour is freed, forced with test hooks. Under
/// one parent: leaves M, N, L. L empties and is unlinked (unhooked, marked dead) but its merge into
/// its left neighbour N waits; N empties and is unlinked and merged into M, which takes N's right
/// link to the dead L, and retired. An operation that began after N's retire goes from M to L and
/// is held there while L merges into M (retired; the operation keeps L alive) and N is freed (every
/// operation older than N's retire has ended). Released, it meets the dead leaf. Following a
/// pointer kept in L to L's left neighbour at its death, N, would reach freed memory (the runtime's
/// check of a follow-up's resource, or AddressSanitizer, reports it). It must start again at the
/// root and find its key's leaf, M.
/// The epochs are steered with operations held open (one in flight since epoch x keeps the
/// global epoch at most at x + 3): a pin task held on worker 2 keeps it at E, so that L's
/// operation begins in the epoch N is retired in; once the pin is released, L's operation keeps
/// it at most at E + 3, and the lookup begins in an epoch after N's retire, so N can be freed
/// while the lookup waits.
TEST(task_tree_race, an_operation_that_meets_a_dead_leaf_starts_again_at_the_root) {
  dead_leaf_race s;
  // Every wait below ends at one deadline for the whole test: generous, because the steps run
  // nudge rounds of tasks (slow under ThreadSanitizer on a loaded 2-core machine), not so long
  // that a stuck epoch goes unreported.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto before_deadline = [&] { return std::chrono::steady_clock::now() < deadline; };
  auto eventually = [&](auto done) {
    while (!done() && before_deadline()) std::this_thread::yield();
    return done();
  };
  tessera::runtime rt(
      {.workers = 3, .epoch_interval_tasks = 4, .epoch_period = std::chrono::microseconds(0)});
  s.rt = &rt;
  auto& sched = rt.internals();
  kv::task_tree tree(rt, {.sync = kv::tree_sync::optimistic});
  struct release_at_exit {
    dead_leaf_race& s;
    tessera::runtime& rt;
    ~release_at_exit() {
      s.open_all();
      rt.wait_idle();  // before the tree's destructor
    }
  } release{s, rt};
  auto worker = [](unsigned w) { return tessera::worker_id(static_cast<std::uint16_t>(w)); };
  // An empty task on every worker not held, so that idle ones move the epoch and reclaim.
  auto nudge = [&] {
    const tessera::group g = rt.make_group();
    for (unsigned w = 0; w < s.held.size(); ++w) {
      if (s.held[w].load()) continue;
      auto* t = rt.make_task_from([](tessera::context&) {});
      t->annotate(worker(w));
      rt.spawn(t, g);
    }
    rt.wait(g);
  };
  auto nudge_until = [&](auto done) {
    while (!done() && before_deadline()) nudge();
    return done();
  };
  // Submitted from a task on worker w: the operation runs there.
  auto submit_on = [&](unsigned w, kv::request& r, std::atomic<bool>& done) {
    r.on_done = set_flag;
    r.user = &done;
    auto* t = rt.make_task_from([&tree, &r](tessera::context& ctx) { tree.submit(r, &ctx); });
    t->annotate(worker(w));
    rt.spawn(t);
  };

  // One parent over a row of half-full leaves.
  constexpr std::size_t loaded = 200;
  load_strided(rt, tree, loaded, 10);
  const kv::node* root = tree.root();
  ASSERT_EQ(root->level(), 1u);
  ASSERT_GE(root->count(), 3u);
  const kv::node* m = root->child(1);
  s.neighbour = root->child(2);
  s.leaf = root->child(3);
  // N and L keep one key each, removed below by the operations that empty them.
  const kv::key_type n_key = s.neighbour->key(0);
  const kv::key_type l_key = s.leaf->key(0);
  std::vector<kv::request> thin;
  for (const kv::node* leaf : {s.neighbour, s.leaf}) {
    for (std::size_t i = 1; i < leaf->count(); ++i) {
      thin.push_back({.type = kv::request_type::remove, .key = leaf->key(i)});
    }
  }
  run_all(rt, tree, thin);
  const std::size_t left = loaded - thin.size() - 2;

  // The pin: an operation held on worker 2 keeps the epoch at most at its own + 3, E.
  const tessera::group pin_group = rt.make_group();
  auto* pin = rt.make_task_from([&s](tessera::context&) { s.hold_here(s.pin_held, s.pin_open); });
  pin->annotate(worker(2));
  dead_leaf_race::recording = true;
  rt.spawn(pin, pin_group);
  dead_leaf_race::recording = false;
  const std::uint64_t e = s.counted_epoch.load() + 3;
  ASSERT_TRUE(eventually([&] { return s.pin_held.load(); }));
  ASSERT_TRUE(nudge_until([&] { return sched.global_epoch() == e; }))
      << "the epoch did not reach " << e << " (now " << sched.global_epoch() << ")";

  // L's operation, on worker 0: L empties, is unhooked from the parent, dies; its merge waits.
  kv::request remove_l{.type = kv::request_type::remove, .key = l_key};
  std::atomic<bool> remove_l_done{false};
  submit_on(0, remove_l, remove_l_done);
  ASSERT_TRUE(eventually([&] { return s.merge_held.load(); })) << "L's merge never began";

  // N's operation, on worker 1, unlinks N all the way: M takes N's range and its link to L.
  kv::request remove_n{.type = kv::request_type::remove, .key = n_key};
  std::atomic<bool> remove_n_done{false};
  submit_on(1, remove_n, remove_n_done);
  // Retired as the runtime sees it: stamped in a worker's retired list. The tree counts a node
  // before it hands it to the runtime, and a worker preempted in between (TSan, loaded machine:
  // 2 runs in ~8,000) stamped N only after the pin's release, in the lookup's epoch: the
  // lookup then kept the epoch one short of N's expiry, and N was never freed.
  ASSERT_TRUE(eventually([&] {
    return tree.retired_nodes() == 1 && s.neighbour_retired_epoch.load() != dead_leaf_race::none;
  })) << "N was not retired";
  EXPECT_EQ(s.neighbour_retired_epoch.load(), e) << "N was retired after the pin's epoch";
  EXPECT_EQ(m->right(), s.leaf);
  EXPECT_EQ(sched.global_epoch(), e) << "the epoch moved while the pin held it";

  // The pin ends; the epoch moves on (at most to e + 3: L's operation is open).
  s.pin_open.store(true);
  rt.wait(pin_group);
  ASSERT_TRUE(nudge_until([&] { return sched.global_epoch() > e; }));

  // The lookup, on worker 2, in an epoch after N's retire: parent, M, then right to L.
  s.visit_armed.store(true);
  kv::request lookup{.type = kv::request_type::lookup, .key = l_key};
  std::atomic<bool> lookup_done{false};
  submit_on(2, lookup, lookup_done);
  ASSERT_TRUE(eventually([&] { return s.visit_held.load(); })) << "the lookup never reached L";

  // L merges into M and is retired; L's operation ends, and N, retired before the lookup
  // began, is freed.
  s.merge_open.store(true);
  ASSERT_TRUE(eventually([&] { return tree.retired_nodes() == 2; })) << "L was not merged";
  ASSERT_TRUE(nudge_until([&] { return s.neighbour_freed.load(); }))
      << "N was never freed (retired at epoch " << s.neighbour_retired_epoch.load()
      << ", the global epoch is " << sched.global_epoch() << ")";

  // The lookup meets the dead L. (A task that names a freed node throws in the runtime's check
  // of its follow-up, and its request never finishes.)
  s.visit_open.store(true);
  std::vector<std::exception_ptr> thrown;
  while (!lookup_done.load() && thrown.empty() && before_deadline()) {
    thrown = rt.take_unhandled_exceptions();
    std::this_thread::yield();
  }
  EXPECT_TRUE(thrown.empty()) << "a task of the tree threw (the lookup followed a freed node?)";
  ASSERT_TRUE(lookup_done.load()) << "the lookup never finished";
  EXPECT_EQ(lookup.status, kv::request_status::not_found);
  EXPECT_TRUE(remove_l_done.load());
  EXPECT_TRUE(remove_n_done.load());
  EXPECT_EQ(remove_l.status, kv::request_status::ok);
  EXPECT_EQ(remove_n.status, kv::request_status::ok);
  rt.wait_idle();
  const kv::check_result check = kv::check_tree(tree.root());
  EXPECT_TRUE(check.ok) << check.message;
  EXPECT_EQ(tree.size(), left);
}
#endif
}  // namespace

// Thousands of inserts in flight at once into a small tree: each read its parent long before it
// reaches its leaf, and leaves split meanwhile. Walking right across every leaf split since (one
// execution, one trip through the queue, per leaf) made an insert cost hundreds of executions
// (seen in YCSB's load phase with large batches); the tree bounds the walk and links splits at
// high priority. The worker is held until every insert is queued, so all n are in flight at once
// and one worker runs them in one order: the count does not depend on timing (with two workers
// and the machine loaded, a worker preempted while its link task waits in its pool made it vary
// from 5 to 9 executions per insert). Measured: 80,000 inserts, height 3: 10.9 executions per
// insert; 495 with links at normal priority and no bound on the walk. The prefetch distance is
// held as set: how many inserts the window has fetched ahead changes the order (adapting, 12.2).
TEST(task_tree, inserts_in_flight_at_once_take_a_few_descents_each) {
  tessera::runtime rt({.workers = 1, .adapt_prefetch_distance = false});
  kv::task_tree tree(rt);
  const std::size_t n = 20'000 * scale;
  std::vector<kv::request> reqs(n);
  std::mt19937_64 rng(7);
  std::map<kv::key_type, kv::value_t> model;
  batch_state state;
  state.pending.store(n);
  for (auto& r : reqs) {
    r.type = kv::request_type::upsert;
    r.key = rng() >> 1;
    r.value = r.key ^ 1;
    r.on_done = count_down;
    r.user = &state;
    model[r.key] = r.value;
  }
  std::atomic<bool> held{false}, open{false};
  rt.spawn([&](tessera::context&) {
    held.store(true, std::memory_order_release);
    while (!open.load(std::memory_order_acquire)) std::this_thread::yield();
  });
  while (!held.load(std::memory_order_acquire)) std::this_thread::yield();
  const std::uint64_t before = rt.statistics().total().executed;
  for (auto& r : reqs) tree.submit(r);
  open.store(true, std::memory_order_release);
  rt.wait_idle();
  ASSERT_EQ(state.pending.load(std::memory_order_acquire), 0u);
  const std::uint64_t executed = rt.statistics().total().executed - before;
  expect_consistent(tree, model);
  // A descent is height() executions, plus a few for the split links and the moves right; an
  // insert queued behind all the others may find its path stale and descend again.
  const std::uint64_t bound = 2 * n * (tree.height() + 3);
  EXPECT_LE(executed, bound) << n << " inserts, height " << tree.height();
}

/// Nodes of a quiescent tree, every level (the leftmost node of each level, then right links).
std::size_t nodes_of(const kv::task_tree& tree) {
  std::size_t total = 0;
  for (const kv::node* head = tree.root(); head != nullptr;
       head = head->is_leaf() ? nullptr : head->child(0)) {
    for (const kv::node* n = head; n != nullptr; n = n->right()) ++total;
  }
  return total;
}

// tree_options::coupled_leaf_bytes is a budget for the whole tree: every level is read coupled
// (coupled_level() 0) while every node made fits it, whatever coupled_bytes says, and the levels
// over coupled_bytes take tasks again once the tree outgrows it. Grown one batch of inserts at a
// time; with only inserts no node is retired, so the nodes reachable are the nodes made.
TEST(task_tree, every_level_is_read_coupled_exactly_while_the_tree_fits_the_leaf_budget) {
  tessera::runtime rt({.workers = 2});
  constexpr std::size_t budget_nodes = 100;  // height 3 (over 58 leaves) starts inside it
  // coupled_bytes of one node: only the root level on its own is read coupled beyond the budget.
  kv::task_tree tree(rt, {.sync = kv::tree_sync::optimistic,
                          .coupled_bytes = kv::node_bytes,
                          .coupled_leaf_bytes = budget_nodes * kv::node_bytes});
  EXPECT_EQ(tree.coupled_leaf_bytes(), budget_nodes * kv::node_bytes);
  bool seen_inside = false, seen_outside = false;
  kv::key_type next = 0;
  while (!seen_outside) {
    std::vector<kv::request> reqs(100);
    for (auto& r : reqs) {
      r.type = kv::request_type::insert;
      r.key = next;
      r.value = next++;
    }
    run_all(rt, tree, reqs);
    const std::size_t nodes = nodes_of(tree);
    if (tree.height() < 3) continue;  // a branch level over coupled_bytes needs height 3
    if (nodes <= budget_nodes) {
      seen_inside = true;
      EXPECT_EQ(tree.coupled_level(), 0u) << nodes << " nodes";
    } else {
      seen_outside = true;
      EXPECT_GT(tree.coupled_level(), 1u) << nodes << " nodes";
    }
  }
  EXPECT_TRUE(seen_inside);
  // Lookups from a task over the budget all take a task (none completes in submit).
  std::vector<kv::request> reqs(200);
  std::atomic<std::size_t> pending{reqs.size()}, in_submit{0};
  task_batch batch{.pending = &pending, .completed_in_submit = &in_submit};
  for (std::size_t i = 0; i < reqs.size(); ++i)
    reqs[i] = {.type = kv::request_type::lookup, .key = i, .on_done = count_batch_done, .user = &batch};
  rt.spawn(rt.make_task_from([&](tessera::context& ctx) {
    submitting = &batch;
    tree.submit(std::span<kv::request>(reqs), ctx);
    submitting = nullptr;
  }));
  rt.wait_idle();
  ASSERT_EQ(pending.load(std::memory_order_acquire), 0u);
  EXPECT_EQ(in_submit.load(), 0u);
  for (const auto& r : reqs) EXPECT_EQ(r.status, kv::request_status::ok) << r.key;
}

TEST(task_tree, the_leaf_budget_defaults_to_the_last_level_cache) {
  tessera::runtime rt({.workers = 1});
  const kv::task_tree tree(rt);
  const std::size_t llc = tessera::last_level_cache_bytes();
  EXPECT_EQ(tree.coupled_leaf_bytes(), llc != 0 ? llc : kv::coupled_leaf_fallback_bytes);
  const kv::task_tree never(rt, {.coupled_leaf_bytes = 0});
  EXPECT_EQ(never.coupled_leaf_bytes(), 0u);
}

// An update submitted from a task while its leaf's latch is held (here by the submitting task
// itself, through tessera/coupled_write.h) does not wait for it in submit: it takes the ordinary
// task, which writes once the latch is free. Optimistic leaves at two workers (optimistic_latch).
TEST(task_tree, an_update_whose_leaf_is_held_takes_a_task) {
  tessera::runtime rt({.workers = 2});
  kv::task_tree tree(rt, {.sync = kv::tree_sync::optimistic});
  load_strided(rt, tree, 10, 1);  // one leaf: the root
  ASSERT_EQ(tree.height(), 1u);
  ASSERT_EQ(tree.coupled_level(), 0u);
  auto* leaf = const_cast<kv::node*>(tree.root());
  std::atomic<std::size_t> pending{2}, lookups_in{0}, updates_in{0};
  task_batch batch{.pending = &pending,
                   .completed_in_submit = &lookups_in,
                   .updates_in_submit = &updates_in};
  std::array<kv::request, 2> reqs{
      kv::request{.type = kv::request_type::update, .key = 3, .value = 33,
                  .on_done = count_batch_done, .user = &batch},
      kv::request{.type = kv::request_type::update, .key = 4, .value = 44,
                  .on_done = count_batch_done, .user = &batch}};
  rt.spawn(rt.make_task_from([&](tessera::context& ctx) {
    submitting = &batch;
    ASSERT_TRUE(tessera::coupled_write_begin(leaf));
    tree.submit(reqs[0], &ctx);
    tessera::coupled_write_end(leaf);
    tree.submit(std::span<kv::request>(reqs.data() + 1, 1), ctx);
    submitting = nullptr;
  }));
  rt.wait_idle();
  ASSERT_EQ(pending.load(std::memory_order_acquire), 0u);
  EXPECT_EQ(updates_in.load(), 1u) << "the held leaf's update waited in submit or was lost";
  EXPECT_EQ(reqs[0].status, kv::request_status::ok);
  EXPECT_EQ(reqs[1].status, kv::request_status::ok);
  std::map<kv::key_type, kv::value_t> model;
  for (kv::key_type k = 0; k < 10; ++k) model[k] = k;
  model[3] = 33;
  model[4] = 44;
  expect_equal_contents(rt, tree, model);
}

/// A tree whose root is one full leaf (keys 0, 2, ..., 2 x (leaf_capacity - 1), each with
/// value = key), within the leaf budget, with its model and a batch of counters for requests
/// submitted from a task: what the tests of splits in submit() start from. Check ready() first.
struct full_root_leaf {
  static constexpr std::size_t full = kv::node::leaf_capacity;

  explicit full_root_leaf(unsigned workers) : rt({.workers = workers}), tree(rt) {
    load_strided(rt, tree, full, 2);
    for (std::size_t i = 0; i < full; ++i) model[2 * i] = 2 * i;
  }
  /// One leaf, the root, read coupled (the precondition of every such test).
  [[nodiscard]] testing::AssertionResult ready() const {
    if (tree.height() != 1) return testing::AssertionFailure() << "height " << tree.height();
    if (tree.coupled_level() != 0)
      return testing::AssertionFailure() << "coupled level " << int{tree.coupled_level()};
    return testing::AssertionSuccess();
  }
  /// Runs `submit(ctx)` in a task whose submits count as this batch's, and waits.
  template <class F>
  void submit_from_task(F submit) {
    rt.spawn(rt.make_task_from([&](tessera::context& ctx) {
      submitting = &batch;
      submit(ctx);
      submitting = nullptr;
    }));
    rt.wait_idle();
  }

  tessera::runtime rt;
  kv::task_tree tree;
  std::map<kv::key_type, kv::value_t> model;
  std::atomic<std::size_t> pending{0}, lookups_in{0}, updates_in{0}, inserts_in{0}, others_in{0};
  task_batch batch{.pending = &pending,
                   .completed_in_submit = &lookups_in,
                   .updates_in_submit = &updates_in,
                   .inserts_in_submit = &inserts_in,
                   .others_in_submit = &others_in};
};

// An insert into a full leaf submitted from a task, in a tree within the leaf budget, completes
// inside submit: the leaf is split there (its new right node linked at once) and the separator's
// link task runs after. Removing every key of the new right leaf the same way empties it, and
// its unlink runs after too. At one worker (leaves applied as `none`) and at two (optimistic
// leaves: optimistic_latch).
TEST(task_tree, a_split_and_an_unlink_submitted_from_a_task_complete_in_submit) {
  for (const unsigned workers : {1u, 2u}) {
    full_root_leaf f(workers);
    ASSERT_TRUE(f.ready());
    f.pending.store(1);
    kv::request insert{.type = kv::request_type::insert, .key = 1, .value = 1,
                       .on_done = count_batch_done, .user = &f.batch};
    f.submit_from_task([&](tessera::context& ctx) { f.tree.submit(insert, &ctx); });
    ASSERT_EQ(f.pending.load(std::memory_order_acquire), 0u);
    EXPECT_EQ(f.inserts_in.load(), 1u) << workers << " workers: the insert took a task";
    EXPECT_EQ(insert.status, kv::request_status::ok);
    EXPECT_EQ(f.tree.height(), 2u) << "the separator was not linked";
    f.model[1] = 1;
    expect_consistent(f.tree, f.model);
    expect_equal_contents(f.rt, f.tree, f.model);

    // The right leaf's keys: from the root's separator up.
    const kv::key_type sep = f.tree.root()->key(0);
    std::vector<kv::request> removes;
    for (const auto& [k, v] : f.model) {
      if (k >= sep)
        removes.push_back({.type = kv::request_type::remove, .key = k,
                           .on_done = count_batch_done, .user = &f.batch});
    }
    ASSERT_FALSE(removes.empty());
    f.pending.store(removes.size());
    f.submit_from_task(
        [&](tessera::context& ctx) { f.tree.submit(std::span<kv::request>(removes), ctx); });
    ASSERT_EQ(f.pending.load(std::memory_order_acquire), 0u);
    EXPECT_EQ(f.others_in.load(), removes.size()) << workers << " workers: a remove took a task";
    for (const kv::request& r : removes) {
      EXPECT_EQ(r.status, kv::request_status::ok) << r.key;
      f.model.erase(r.key);
    }
    EXPECT_EQ(f.tree.retired_nodes(), 1u) << "the emptied leaf was not unlinked";
    expect_consistent(f.tree, f.model);
    expect_equal_contents(f.rt, f.tree, f.model);
  }
}

// A request whose key lies beyond the leaf its descent reached (the leaf split earlier in the
// same run, the separator's link task not run yet) follows the right link in submit and
// completes there, a lookup and an insert alike. At one worker the link task is queued behind
// the running task; at two it may run meanwhile (then the descent goes through the new root).
TEST(task_tree, a_key_beyond_a_leaf_split_in_the_same_run_completes_in_submit) {
  for (const unsigned workers : {1u, 2u}) {
    full_root_leaf f(workers);
    ASSERT_TRUE(f.ready());
    f.pending.store(3);
    const kv::key_type last = 2 * (full_root_leaf::full - 1);
    kv::request split{.type = kv::request_type::insert, .key = 1, .value = 1,
                      .on_done = count_batch_done, .user = &f.batch};
    kv::request find{.type = kv::request_type::lookup, .key = last,
                     .on_done = count_batch_done, .user = &f.batch};
    kv::request add{.type = kv::request_type::insert, .key = last + 1, .value = last + 1,
                    .on_done = count_batch_done, .user = &f.batch};
    f.submit_from_task([&](tessera::context& ctx) {
      f.tree.submit(split, &ctx);
      f.tree.submit(find, &ctx);
      f.tree.submit(std::span<kv::request>(&add, 1), ctx);
    });
    ASSERT_EQ(f.pending.load(std::memory_order_acquire), 0u);
    EXPECT_EQ(f.lookups_in.load(), 1u) << workers << " workers: the lookup took a task";
    EXPECT_EQ(f.inserts_in.load(), 2u) << workers << " workers: an insert took a task";
    EXPECT_EQ(find.status, kv::request_status::ok);
    EXPECT_EQ(find.value, last);
    EXPECT_EQ(add.status, kv::request_status::ok);
    EXPECT_EQ(f.tree.height(), 2u) << "the separator was not linked";
    f.model[1] = 1;
    f.model[last + 1] = last + 1;
    expect_consistent(f.tree, f.model);
    expect_equal_contents(f.rt, f.tree, f.model);
  }
}
