// Task graphs (tessera/graph.h): every node runs exactly once per run and after all of its
// predecessors (chains, fan-in, fan-out, diamonds, random layered DAGs, 2-D wavefronts); cycles
// are reported naming a node on them; a throwing node stops its successors only; cancel; reruns;
// dynamic nodes; runs started from a task; overlapping runs of one graph; a large graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_support.h"
#include "tessera/tessera.h"

namespace tessera::test {
namespace {

class graph_test : public runtime_fixture {};

using edge_list = std::vector<std::pair<std::uint32_t, std::uint32_t>>;

/// A generated shape: node count and edges.
struct shape {
  std::string name;
  std::uint32_t nodes = 0;
  edge_list edges;
};

shape chain(std::uint32_t n) {
  shape s{"chain", n, {}};
  for (std::uint32_t i = 0; i + 1 < n; ++i) s.edges.emplace_back(i, i + 1);
  return s;
}
shape fan_out(std::uint32_t n) {  // 0 before 1..n-1
  shape s{"fan_out", n, {}};
  for (std::uint32_t i = 1; i < n; ++i) s.edges.emplace_back(0, i);
  return s;
}
shape fan_in(std::uint32_t n) {  // 0..n-2 before n-1
  shape s{"fan_in", n, {}};
  for (std::uint32_t i = 0; i + 1 < n; ++i) s.edges.emplace_back(i, n - 1);
  return s;
}
shape diamonds(std::uint32_t k) {  // k diamonds in a row: a -> b, c -> d = next a
  shape s{"diamonds", 3 * k + 1, {}};
  for (std::uint32_t i = 0; i < k; ++i) {
    const std::uint32_t a = 3 * i;
    s.edges.insert(s.edges.end(), {{a, a + 1}, {a, a + 2}, {a + 1, a + 3}, {a + 2, a + 3}});
  }
  return s;
}
/// `layers` layers of `width` nodes; each node of a layer after the first gets 1-3 predecessors
/// from earlier layers (mostly the one before).
shape layered(std::uint32_t layers, std::uint32_t width, std::uint64_t seed) {
  shape s{"layered", layers * width, {}};
  std::uint64_t r = seed;
  for (std::uint32_t l = 1; l < layers; ++l) {
    for (std::uint32_t i = 0; i < width; ++i) {
      const std::uint32_t v = l * width + i;
      const unsigned preds = 1 + static_cast<unsigned>(mix(++r) % 3);
      for (unsigned p = 0; p < preds; ++p) {
        const std::uint32_t back =
            mix(++r) % 4 == 0 ? 1 + static_cast<std::uint32_t>(mix(++r) % l) : 1;
        const std::uint32_t u = (l - back) * width + static_cast<std::uint32_t>(mix(++r) % width);
        s.edges.emplace_back(u, v);
      }
    }
  }
  return s;
}
shape wavefront(std::uint32_t w, std::uint32_t h) {  // (x, y) before (x + 1, y) and (x, y + 1)
  shape s{"wavefront", w * h, {}};
  for (std::uint32_t y = 0; y < h; ++y) {
    for (std::uint32_t x = 0; x < w; ++x) {
      if (x + 1 < w) s.edges.emplace_back(y * w + x, y * w + x + 1);
      if (y + 1 < h) s.edges.emplace_back(y * w + x, (y + 1) * w + x);
    }
  }
  return s;
}

/// Stamps each node's start and end from one counter (its order is consistent with
/// happens-before), and counts its runs.
struct recorder {
  explicit recorder(std::uint32_t n) : start(n), end(n), runs(n) {}
  std::atomic<std::uint64_t> clock{0};
  std::vector<std::atomic<std::uint64_t>> start, end;
  run_counts runs;

  void reset() {
    for (auto& a : start) a.store(0, std::memory_order_relaxed);
    for (auto& a : end) a.store(0, std::memory_order_relaxed);
    runs = run_counts(start.size());
  }
  void node(std::uint32_t v) {
    start[v].store(clock.fetch_add(1) + 1, std::memory_order_relaxed);
    runs.hit(v);
    end[v].store(clock.fetch_add(1) + 1, std::memory_order_relaxed);
  }
  /// "" if every node ran once and after its predecessors.
  std::string check(const edge_list& edges) const {
    std::string bad = runs.exactly_once();
    if (!bad.empty()) return bad;
    for (const auto& [a, b] : edges) {
      if (end[a].load() >= start[b].load()) {
        return "node " + std::to_string(b) + " started before its predecessor " +
               std::to_string(a) + " ended";
      }
    }
    return "";
  }
};

/// A graph of `s` whose nodes report to `rec`.
task_graph build(const shape& s, recorder& rec) {
  task_graph g;
  g.add_many(s.nodes, [&rec](context&, std::uint32_t i) { rec.node(i); });
  for (const auto& [a, b] : s.edges) g.precede(g.node(a), g.node(b));
  return g;
}

TEST_P(graph_test, every_node_runs_once_after_its_predecessors) {
  auto& r = start();
  const std::vector<shape> shapes{chain(300),     fan_out(300),          fan_in(300),
                                  diamonds(100),  layered(20, 30, 7),    layered(8, 100, 11),
                                  wavefront(20, 20), chain(1),           diamonds(1)};
  for (const shape& s : shapes) {
    recorder rec(s.nodes);
    task_graph g = build(s, rec);
    for (int round = 0; round < 3; ++round) {
      rec.reset();
      const group grp = r.make_group();
      r.spawn(g, grp);
      r.wait(grp);
      EXPECT_EQ(rec.check(s.edges), "") << s.name << " round " << round;
    }
  }
}

TEST_P(graph_test, nodes_added_one_by_one_with_edges_added_between_runs) {
  auto& r = start();
  std::vector<int> seen;
  std::atomic<int> sum{0};
  task_graph g;
  auto a = g.add([&](context&) { seen.push_back(1); });
  auto b = g.add([&](context&) { seen.push_back(2); });
  a.precede(b);
  group grp = r.make_group();
  r.spawn(g, grp);
  r.wait(grp);
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
  // a third node after b, added once the graph ran (the lists are rebuilt)
  auto c = g.add([&](context&) { seen.push_back(3); });
  c.succeed(b);
  auto d = g.add([&sum](context&) { sum.fetch_add(1); });  // independent
  (void)d;
  seen.clear();
  grp = r.make_group();
  r.spawn(g, grp);
  r.wait(grp);
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(sum.load(), 1);
  EXPECT_EQ(g.size(), 4u);
  EXPECT_EQ(g.edge_count(), 2u);
}

TEST_P(graph_test, bulk_edges_connect_every_pair) {
  auto& r = start();
  recorder rec(6);
  task_graph g;
  g.add_many(6, [&rec](context&, std::uint32_t i) { rec.node(i); });
  const std::vector<graph_node> first{g.node(0), g.node(1), g.node(2)};
  const std::vector<graph_node> second{g.node(3), g.node(4)};
  g.precede(first, second);
  g.precede(second, g.node(5));
  const group grp = r.make_group();
  r.spawn(g, grp);
  r.wait(grp);
  edge_list edges;
  for (std::uint32_t a = 0; a < 3; ++a) {
    for (std::uint32_t b = 3; b < 5; ++b) edges.emplace_back(a, b);
  }
  edges.insert(edges.end(), {{3, 5}, {4, 5}});
  EXPECT_EQ(rec.check(edges), "");
  EXPECT_EQ(g.edge_count(), 8u);
}

TEST_P(graph_test, a_cycle_is_reported_naming_a_node_on_it_and_nothing_runs) {
  auto& r = start();
  std::atomic<int> ran{0};
  task_graph g;
  auto before = g.add([&ran](context&) { ran.fetch_add(1); }).name("before");
  auto a = g.add([&ran](context&) { ran.fetch_add(1); }).name("alpha");
  auto b = g.add([&ran](context&) { ran.fetch_add(1); });
  auto c = g.add([&ran](context&) { ran.fetch_add(1); }).name("gamma");
  auto after = g.add([&ran](context&) { ran.fetch_add(1); }).name("after");
  before.precede(a);
  a.precede(b);
  b.precede(c);
  c.precede(a);
  c.precede(after);
  const group grp = r.make_group();
  std::string msg;
  try {
    r.spawn(g, grp);
  } catch (const std::invalid_argument& e) {
    msg = e.what();
  }
  r.wait(grp);  // nothing was spawned
  EXPECT_EQ(ran.load(), 0);
  ASSERT_FALSE(msg.empty()) << "no std::invalid_argument";
  EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
  // the node named first is on the cycle: 1 (alpha), 2 or 3 (gamma), never 0 or 4
  const bool on_cycle = msg.find("through node 1 (\"alpha\")") != std::string::npos ||
                        msg.find("through node 2:") != std::string::npos ||
                        msg.find("through node 3 (\"gamma\")") != std::string::npos;
  EXPECT_TRUE(on_cycle) << msg;
  EXPECT_THROW(g.validate(), std::invalid_argument);

  task_graph self;
  auto s = self.add([](context&) {}).name("loner");
  s.precede(s);
  try {
    self.validate();
    ADD_FAILURE() << "a self-loop was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("node 0 (\"loner\")"), std::string::npos) << e.what();
  }
}

TEST_P(graph_test, a_throwing_node_stops_its_successors_only) {
  auto& r = start();
  std::atomic<int> after_throw{0};
  std::atomic<int> independent{0};
  task_graph g;
  auto a = g.add([](context&) {});
  auto thrower = g.add([](context&) { throw std::runtime_error("node failed"); });
  auto b = g.add([&after_throw](context&) { after_throw.fetch_add(1); });
  auto c = g.add([&after_throw](context&) { after_throw.fetch_add(1); });
  a.precede(thrower);
  thrower.precede(b);
  b.precede(c);
  // an independent chain of 100 and a node after both a and the chain
  auto first =
      g.add_many(100, [&independent](context&, std::uint32_t) { independent.fetch_add(1); });
  for (std::uint32_t i = first.index(); i + 1 < first.index() + 100; ++i)
    g.precede(g.node(i), g.node(i + 1));
  for (int round = 0; round < 3; ++round) {
    independent = 0;
    const group grp = r.make_group();
    r.spawn(g, grp);
    EXPECT_THROW(r.wait(grp), std::runtime_error);
    EXPECT_EQ(after_throw.load(), 0);
    EXPECT_EQ(independent.load(), 100);
  }
}

TEST_P(graph_test, a_throwing_node_does_not_stop_nodes_readied_beside_it) {
  // One node readies many at once: one runs next in its task, the others wait in that task
  // (or as tasks of their own). A throw in one of them must not drop the others, nor the chains
  // behind them.
  auto& r = start();
  constexpr std::uint32_t fan = 8;
  constexpr std::uint32_t depth = 5;
  std::atomic<int> after_throw{0};
  std::atomic<int> independent{0};
  task_graph g;
  auto root = g.add([](context&) {});  // a root's task spawns all it readies: head is next
  auto head = g.add([](context&) {});
  root.precede(head);
  auto heads = g.add_many(fan, [&independent](context&, std::uint32_t i) {
    if (i == fan / 2) throw std::runtime_error("node failed");
    independent.fetch_add(1);
  });
  auto tails = g.add_many(fan * depth, [&](context&, std::uint32_t i) {
    (i / depth == fan / 2 ? after_throw : independent).fetch_add(1);
  });
  for (std::uint32_t i = 0; i < fan; ++i) {
    head.precede(g.node(heads.index() + i));
    g.precede(g.node(heads.index() + i), g.node(tails.index() + i * depth));
    for (std::uint32_t k = 0; k + 1 < depth; ++k)
      g.precede(g.node(tails.index() + i * depth + k), g.node(tails.index() + i * depth + k + 1));
  }
  for (int round = 0; round < 20; ++round) {
    independent = 0;
    const group grp = r.make_group();
    r.spawn(g, grp);
    EXPECT_THROW(r.wait(grp), std::runtime_error);
    EXPECT_EQ(after_throw.load(), 0);
    EXPECT_EQ(independent.load(), static_cast<int>((fan - 1) * (depth + 1)));
  }
}

TEST_P(graph_test, cancel_drops_the_nodes_not_started) {
  auto& r = start();
  constexpr std::uint32_t n = 2000;
  gate gt;
  std::atomic<std::uint32_t> ran{0};
  std::atomic<int> saw_cancel{0};
  task_graph g;
  auto head = g.add([&](context& ctx) {
    gt.pass();
    if (ctx.cancelled()) saw_cancel.fetch_add(1);
  });
  auto body = g.add_many(n, [&ran](context&, std::uint32_t) { ran.fetch_add(1); });
  head.precede(body);
  for (std::uint32_t i = body.index(); i + 1 < body.index() + n; ++i)
    g.precede(g.node(i), g.node(i + 1));
  // a wide part too: 64 nodes after the head
  auto wide = g.add_many(64, [&ran](context&, std::uint32_t) { ran.fetch_add(1); });
  for (std::uint32_t i = 0; i < 64; ++i) g.precede(head, g.node(wide.index() + i));
  const group grp = r.make_group();
  r.spawn(g, grp);
  gt.wait_for_arrivals(1);
  EXPECT_TRUE(r.cancel(grp));
  gt.release();
  r.wait(grp);
  EXPECT_EQ(saw_cancel.load(), 1);
  EXPECT_LT(ran.load(), n) << "the chain after the cancelled head ran on";
  // the graph is whole again: a new run runs everything
  ran = 0;
  const group again = r.make_group();
  r.spawn(g, again);
  r.wait(again);
  EXPECT_EQ(ran.load(), n + 64);
}

TEST_P(graph_test, cancel_from_a_node_stops_a_long_chain_running_on) {
  // A chain's nodes run one after another in one task (run in place): a cancellation from one
  // of them still drops the rest.
  auto& r = start();
  constexpr std::uint32_t n = 20'000;
  constexpr std::uint32_t canceller = 1'000;
  std::atomic<std::uint32_t> ran{0};
  std::atomic<std::uint32_t> cancelled_at{0};
  group grp;
  task_graph g;
  g.add_many(n, [&](context& ctx, std::uint32_t i) {
    ran.fetch_add(1, std::memory_order_relaxed);
    if (i == canceller) {
      cancelled_at.store(ctx.runtime().cancel(grp) ? 1 : 2);
    }
  });
  for (std::uint32_t i = 0; i + 1 < n; ++i) g.precede(g.node(i), g.node(i + 1));
  g.validate();
  grp = r.make_group();
  r.spawn(g, grp);
  r.wait(grp);
  EXPECT_EQ(cancelled_at.load(), 1u);
  EXPECT_EQ(ran.load(), canceller + 1) << "the chain ran on after the node that cancelled";
}

/// Reruns a graph from tasks: each run's when_done continuation checks the run's record, resets
/// it and starts the next run (no thread blocks between two runs).
struct checked_reruns {
  task_graph* graph;
  recorder* rec;
  const edge_list* edges;
  std::atomic<std::size_t>* left;
  std::atomic<std::size_t>* failures;
  void operator()(context& ctx) const {
    if (rec->clock.load() != 0 && !rec->check(*edges).empty()) failures->fetch_add(1);
    if (left->fetch_sub(1) == 1) return;
    rec->reset();
    rec->clock = 0;
    const group g = ctx.runtime().make_group();
    ctx.spawn(*graph, g);
    ctx.when_done(g, checked_reruns{*this});
  }
};

TEST_P(graph_test, a_graph_reruns_ten_thousand_times) {
  auto& r = start();
  const std::size_t rounds = scaled(10'000, 1'000);
  const shape s = layered(3, 4, 5);
  recorder rec(s.nodes);
  task_graph g = build(s, rec);
  std::atomic<std::size_t> left{rounds + 1};
  std::atomic<std::size_t> failures{0};
  const group outer = r.make_group();
  r.spawn(checked_reruns{&g, &rec, &s.edges, &left, &failures}, outer);
  r.wait(outer);
  EXPECT_EQ(left.load(), 0u);
  EXPECT_EQ(failures.load(), 0u);
  // and from outside, waiting for each run
  for (int i = 0; i < 200; ++i) {
    rec.reset();
    const group grp = r.make_group();
    r.spawn(g, grp);
    r.wait(grp);
    ASSERT_EQ(rec.check(s.edges), "") << "round " << i;
  }
}

/// Runs `graph` `rounds` times from tasks, each run's when_done continuation starting the next.
struct rerun_from_tasks {
  task_graph* graph;
  std::atomic<std::size_t>* left;
  void operator()(context& ctx) const {
    if (left->fetch_sub(1) == 1) return;
    const group g = ctx.runtime().make_group();
    ctx.spawn(*graph, g);
    ctx.when_done(g, rerun_from_tasks{*this});
  }
};

TEST_P(graph_test, runs_started_from_tasks_continue_with_when_done) {
  auto& r = start();
  const std::size_t rounds = scaled(2'000, 200);
  std::atomic<std::size_t> nodes{0};
  task_graph g;
  g.add_many(10, [&nodes](context&, std::uint32_t) { nodes.fetch_add(1); });
  for (std::uint32_t i = 0; i + 1 < 10; i += 2) g.precede(g.node(i), g.node(i + 1));
  std::atomic<std::size_t> left{rounds + 1};
  const group outer = r.make_group();
  r.spawn(rerun_from_tasks{&g, &left}, outer);
  r.wait(outer);  // the continuations join the outer group: it completes after the last
  EXPECT_EQ(nodes.load(), rounds * 10);
  EXPECT_EQ(left.load(), 0u);
}

TEST_P(graph_test, runs_after_a_throw_or_a_cancel_run_every_node) {
  // A run that stopped at a throw or a cancellation leaves its counts part-way; the next run
  // (reusing the run's memory) still runs every node once, after its predecessors.
  auto& r = start();
  const shape s = wavefront(16, 16);
  recorder rec(s.nodes);
  constexpr std::uint32_t stopper = 37;
  enum class mode { normal, throws, cancels };
  std::atomic<mode> how{mode::normal};
  group grp;
  task_graph g;
  g.add_many(s.nodes, [&](context& ctx, std::uint32_t i) {
    rec.node(i);
    if (i != stopper) return;
    if (how.load() == mode::throws) throw std::runtime_error("node failed");
    if (how.load() == mode::cancels) ctx.runtime().cancel(grp);
  });
  for (const auto& [a, b] : s.edges) g.precede(g.node(a), g.node(b));
  for (int round = 0; round < static_cast<int>(scaled(200, 40)); ++round) {
    const mode stop = round % 2 == 0 ? mode::throws : mode::cancels;
    how = stop;
    grp = r.make_group();
    r.spawn(g, grp);
    if (stop == mode::throws) {
      EXPECT_THROW(r.wait(grp), std::runtime_error);
    } else {
      r.wait(grp);
    }
    EXPECT_EQ(rec.runs.at(s.nodes - 1), 0) << "the last node ran after the stop, round " << round;
    how = mode::normal;
    rec.reset();
    grp = r.make_group();
    r.spawn(g, grp);
    r.wait(grp);
    ASSERT_EQ(rec.check(s.edges), "") << "round " << round;
    rec.reset();
  }
}

TEST_P(graph_test, a_run_held_open_overlaps_later_runs_of_its_graph) {
  // Run a's root defers its completion, so a holds its counts while runs b and c start, finish
  // (c reusing b's memory) and leave a's counts alone; then a finishes and d runs.
  auto& r = start();
  const shape s = layered(6, 8, 11);
  std::vector<std::atomic<int>> ran(s.nodes);
  std::atomic<bool> hold{false};
  std::shared_ptr<graph_run::completion> held;
  std::atomic<bool> deferred{false};  // held is set (release)
  task_graph g;
  g.add_many(s.nodes, [&](context&, graph_run& run, std::uint32_t v) {
    ran[v].fetch_add(1);
    if (v == 0 && hold.exchange(false)) {
      held = std::make_shared<graph_run::completion>(run.defer());
      deferred.store(true, std::memory_order_release);
    }
  });
  for (const auto& [a, b] : s.edges) g.precede(g.node(a), g.node(b));
  // node 0 precedes everything that is not a root: make it the only root
  for (std::uint32_t v = 1; v < s.nodes; ++v) g.precede(g.node(0), g.node(v));
  auto expect_runs = [&](int root, int others, const char* when) {
    ASSERT_EQ(ran[0].load(), root) << when;
    for (std::uint32_t v = 1; v < s.nodes; ++v) ASSERT_EQ(ran[v].load(), others) << when << v;
  };
  auto run_once = [&] {
    const group grp = r.make_group();
    r.spawn(g, grp);
    r.wait(grp);
  };
  run_once();  // leaves its memory for a
  hold = true;
  const group a = r.make_group();
  r.spawn(g, a);
  while (!deferred.load(std::memory_order_acquire)) std::this_thread::yield();
  expect_runs(2, 1, "a held: ");
  run_once();  // b
  run_once();  // c
  expect_runs(4, 3, "b and c ran: ");
  r.spawn([&held](context& ctx) { held->done(ctx); }, a);
  r.wait(a);
  expect_runs(4, 4, "a finished: ");
  run_once();  // d
  expect_runs(5, 5, "d ran: ");
}

TEST_P(graph_test, overlapping_runs_of_one_graph_are_independent) {
  auto& r = start();
  constexpr int runs = 8;
  const shape s = layered(10, 20, 3);
  std::vector<std::atomic<int>> started(s.nodes), finished(s.nodes);
  std::vector<std::vector<std::uint32_t>> preds(s.nodes);
  for (const auto& [a, b] : s.edges) preds[b].push_back(a);
  std::atomic<int> violations{0};
  task_graph g;
  g.add_many(s.nodes, [&](context&, std::uint32_t v) {
    // the k-th start of v comes after k finishes of each predecessor (one per run)
    const int k = started[v].fetch_add(1) + 1;
    for (const std::uint32_t u : preds[v]) {
      if (finished[u].load() < k) violations.fetch_add(1);
    }
    finished[v].fetch_add(1);
  });
  for (const auto& [a, b] : s.edges) g.precede(g.node(a), g.node(b));
  g.validate();
  std::vector<group> groups;
  for (int i = 0; i < runs; ++i) {
    groups.push_back(r.make_group());
    r.spawn(g, groups.back());
  }
  for (const group grp : groups) r.wait(grp);
  EXPECT_EQ(violations.load(), 0);
  for (std::uint32_t v = 0; v < s.nodes; ++v) ASSERT_EQ(finished[v].load(), runs) << "node " << v;
}

TEST_P(graph_test, dynamic_nodes_run_after_their_node_and_before_the_node_named) {
  auto& r = start();
  const std::size_t probes = 50;
  std::atomic<std::size_t> probed{0};
  std::atomic<std::size_t> nested{0};
  std::atomic<std::size_t> seen_by_aggregate{0};
  std::atomic<bool> built{false};
  std::atomic<int> early{0};
  task_graph g;
  auto aggregate = g.add([&](context&) { seen_by_aggregate = probed + nested; }).name("aggregate");
  auto build_phase = g.add([&, aggregate](context&, graph_run& run) {
    built = true;
    for (std::size_t m = 0; m < probes; ++m) {
      run.add([&, m, aggregate](context&, graph_run& inner) {
           if (!built) early.fetch_add(1);
           probed.fetch_add(1);
           // every tenth probe adds one more, also before the aggregate
           if (m % 10 == 0) {
             inner.add([&nested](context&) { nested.fetch_add(1); }).before(aggregate);
           }
         })
          .before(aggregate);
    }
  });
  build_phase.precede(aggregate);
  for (int round = 0; round < 3; ++round) {
    probed = 0;
    nested = 0;
    built = false;
    const group grp = r.make_group();
    r.spawn(g, grp);
    r.wait(grp);
    EXPECT_EQ(probed.load(), probes);
    EXPECT_EQ(nested.load(), probes / 10);
    EXPECT_EQ(seen_by_aggregate.load(), probes + probes / 10)
        << "the aggregate ran before a dynamic node it was made to wait for";
    EXPECT_EQ(early.load(), 0);
  }
}

TEST_P(graph_test, dynamic_nodes_of_a_node_that_throws_never_run) {
  auto& r = start();
  std::atomic<int> ran{0};
  task_graph g;
  auto last = g.add([&ran](context&) { ran.fetch_add(100); });
  auto n = g.add([&ran, last](context&, graph_run& run) {
    for (int i = 0; i < 10; ++i) run.add([&ran](context&) { ran.fetch_add(1); }).before(last);
    throw std::runtime_error("after adding");
  });
  n.precede(last);
  const group grp = r.make_group();
  r.spawn(g, grp);
  EXPECT_THROW(r.wait(grp), std::runtime_error);
  EXPECT_EQ(ran.load(), 0);
}

#if defined(TESSERA_DEBUG_CHECKS)
TEST_P(graph_test, before_a_node_that_is_ready_is_refused) {
  auto& r = start();
  task_graph g;
  auto first = g.add([](context&) {});
  auto second = g.add([first](context&, graph_run& run) {
    run.add([](context&) {}).before(first);  // first ran already: throws
  });
  first.precede(second);
  const group grp = r.make_group();
  r.spawn(g, grp);
  EXPECT_THROW(r.wait(grp), std::logic_error);
}
#endif

TEST_P(graph_test, annotations_reach_the_node_tasks) {
  auto& r = start();
  struct counter {
    long value = 0;
  };
  auto* res = r.make_resource<counter>({.isolation = isolation::exclusive});
  const unsigned target = r.workers() - 1;
  std::atomic<int> wrong_worker{0};
  std::atomic<int> not_writing{0};
  task_graph g;
  auto placed = g.add_many(20, [&, target](context& ctx, std::uint32_t) {
    if (ctx.worker().value != target) wrong_worker.fetch_add(1);
  });
  for (std::uint32_t i = 0; i < 20; ++i) g.node(placed.index() + i).annotate(wid(target));
  auto writers = g.add_many(200, [&, res](context& ctx, std::uint32_t) {
    if (!ctx.writing()) not_writing.fetch_add(1);
    res->value = res->value + 1;  // serialized by the resource's primitive
  });
  for (std::uint32_t i = 0; i < 200; ++i) {
    g.node(writers.index() + i).annotate_resource(res, access::write).annotate(priority::high);
  }
  for (std::uint32_t i = 0; i < 20; ++i)
    g.precede(g.node(placed.index() + i), g.node(writers.index() + i));
  const group grp = r.make_group();
  r.spawn(g, grp);
  r.wait(grp);
  EXPECT_EQ(wrong_worker.load(), 0);
  EXPECT_EQ(not_writing.load(), 0);
  EXPECT_EQ(res->value, 200);
  r.wait_idle();
  r.destroy_resource(res);
}

TEST_P(graph_test, an_empty_graph_and_a_graph_without_a_group) {
  auto& r = start();
  task_graph empty;
  const group grp = r.make_group();
  r.spawn(empty, grp);
  r.wait(grp);
  std::atomic<int> ran{0};
  task_graph g;
  g.add_many(100, [&ran](context&, std::uint32_t) { ran.fetch_add(1); });
  r.spawn(g);
  r.wait_idle();
  EXPECT_EQ(ran.load(), 100);
}

TEST_P(graph_test, changing_a_graph_while_it_runs_is_refused) {
  auto& r = start();
  gate gt;
  task_graph g;
  g.add([&gt](context&) { gt.pass(); });
  const group grp = r.make_group();
  r.spawn(g, grp);
  gt.wait_for_arrivals(1);
  EXPECT_THROW(g.add([](context&) {}), std::logic_error);
  EXPECT_THROW(g.precede(g.node(0), g.node(0)), std::logic_error);
  EXPECT_THROW(g.node(0).annotate(priority::high), std::logic_error);
  gt.release();
  r.wait(grp);
  g.add([](context&) {});  // fine again
  EXPECT_EQ(g.size(), 2u);
}

/// A 2-D wavefront of 490,000 nodes (62,500 under sanitizers), built once for every worker
/// count; each node checks that its neighbours before it are done.
struct large_wavefront {
  std::uint32_t side = static_cast<std::uint32_t>(scaled(700, 250));
  std::uint32_t n = side * side;
  std::vector<std::uint8_t> done = std::vector<std::uint8_t>(n, 0);
  std::atomic<std::uint32_t> bad{0};
  task_graph graph;

  large_wavefront() {
    graph.reserve(n, 2 * std::size_t{n});
    graph.add_many(n, [this](context&, std::uint32_t v) {
      const std::uint32_t x = v % side;
      // plain reads: ordered by the graph's edges
      if ((x > 0 && done[v - 1] == 0) || (v >= side && done[v - side] == 0)) bad.fetch_add(1);
      done[v] = 1;
    });
    for (std::uint32_t v = 0; v < n; ++v) {
      if ((v + 1) % side != 0) graph.precede(graph.node(v), graph.node(v + 1));
      if (v + side < n) graph.precede(graph.node(v), graph.node(v + side));
    }
  }
  static large_wavefront& get() {
    static large_wavefront w;
    return w;
  }
};

TEST_P(graph_test, a_large_graph_runs_every_node) {
  auto& r = start();
  large_wavefront& w = large_wavefront::get();
  std::fill(w.done.begin(), w.done.end(), 0);
  w.bad = 0;
  const group grp = r.make_group();
  r.spawn(w.graph, grp);
  r.wait(grp);
  EXPECT_EQ(w.bad.load(), 0u);
  EXPECT_EQ(std::count(w.done.begin(), w.done.end(), 1), static_cast<std::ptrdiff_t>(w.n));
}

// ---- deferred completion (graph_run::parallel_for, graph_run::defer) ----

/// A loop node's pieces, checked: each index once, and the successors after every piece.
struct loop_record {
  explicit loop_record(std::size_t n) : hits(n) {}
  std::vector<std::atomic<std::uint32_t>> hits;
  std::atomic<std::size_t> total{0};
  void hit(std::size_t i) {
    hits[i].fetch_add(1, std::memory_order_relaxed);
    total.fetch_add(1, std::memory_order_relaxed);
  }
  void reset() {
    for (auto& h : hits) h.store(0, std::memory_order_relaxed);
    total = 0;
  }
  std::string exactly_once() const {
    for (std::size_t i = 0; i < hits.size(); ++i)
      if (hits[i].load() != 1)
        return "index " + std::to_string(i) + " ran " + std::to_string(hits[i].load()) + " times";
    return "";
  }
};

TEST_P(graph_test, a_loop_node_completes_when_its_last_piece_finishes) {
  auto& r = start();
  constexpr std::size_t n = 5000;
  loop_record by_index(n), by_range(n), by_ctx(n);
  std::atomic<int> bodies{0};
  std::atomic<int> early{0};  // a successor that started before its loop's last piece
  std::atomic<int> tails{0};
  task_graph g;
  auto head = g.add([](context&) {});
  // three loop nodes after the head, each body form, with a tiny grain (many pieces)
  auto l1 = g.add([&](context&, graph_run& run) {
    bodies.fetch_add(1);
    run.parallel_for(0, n, [&](std::size_t i) { by_index.hit(i); }, loop_options{.grain = 7});
  });
  auto l2 = g.add([&](context&, graph_run& run) {
    bodies.fetch_add(1);
    run.parallel_for(
        0, n, [&](std::size_t f, std::size_t l) { for (; f < l; ++f) by_range.hit(f); },
        loop_options{.grain = 64});
  });
  // a chain of two loop nodes: the second loop starts after the first one's last piece
  auto l3 = g.add([&](context&, graph_run& run) {
    bodies.fetch_add(1);
    run.parallel_for(0, n, [&](context&, std::size_t f, std::size_t l) {
      for (; f < l; ++f) by_ctx.hit(f);
    });
  });
  auto l4 = g.add([&](context&, graph_run& run) {
    if (by_ctx.total.load() != n) early.fetch_add(1);
    run.parallel_for(0, 10, [&](std::size_t) {
      if (by_ctx.total.load() != n) early.fetch_add(1);
    });
  });
  auto empty_loop = g.add([&](context&, graph_run& run) {
    run.parallel_for(5, 5, [&](std::size_t) { early.fetch_add(1); });  // defers nothing
  });
  // a fan-out of successors after l1 and l2, then a join node
  auto fan = g.add_many(8, [&](context&, std::uint32_t) {
    if (by_index.total.load() != n || by_range.total.load() != n) early.fetch_add(1);
  });
  auto tail = g.add([&](context&) {
    if (by_ctx.total.load() != n) early.fetch_add(1);
    tails.fetch_add(1);
  });
  g.precede(head, std::vector<graph_node>{l1, l2, l3, empty_loop});
  for (std::uint32_t i = 0; i < 8; ++i) {
    g.precede(l1, g.node(fan.index() + i));
    g.precede(l2, g.node(fan.index() + i));
    g.precede(g.node(fan.index() + i), tail);
  }
  l3.precede(l4);
  l4.precede(tail);
  empty_loop.precede(tail);
  const int rounds = static_cast<int>(scaled(300, 30));
  for (int round = 0; round < rounds; ++round) {
    by_index.reset();
    by_range.reset();
    by_ctx.reset();
    const group grp = r.make_group();
    r.spawn(g, grp);
    r.wait(grp);
    ASSERT_EQ(by_index.exactly_once(), "") << "round " << round;
    ASSERT_EQ(by_range.exactly_once(), "") << "round " << round;
    ASSERT_EQ(by_ctx.exactly_once(), "") << "round " << round;
    ASSERT_EQ(early.load(), 0) << "round " << round;
    ASSERT_EQ(tails.load(), round + 1);
    ASSERT_EQ(bodies.load(), 3 * (round + 1));
  }
}

TEST_P(graph_test, loop_nodes_rerun_from_tasks_many_times) {
  // A chain of loop nodes, each run of the graph started by the previous run's continuation.
  auto& r = start();
  constexpr std::size_t n = 64;
  std::atomic<std::size_t> sum{0};
  std::atomic<std::size_t> bad{0};
  task_graph g;
  auto a = g.add([&](context&, graph_run& run) {
    run.parallel_for(0, n, [&](std::size_t) { sum.fetch_add(1, std::memory_order_relaxed); },
                     loop_options{.grain = 4});
  });
  auto b = g.add([&](context&, graph_run& run) {
    if (sum.load(std::memory_order_relaxed) != n) bad.fetch_add(1);
    run.parallel_for(0, n, [&](std::size_t) { sum.fetch_add(1, std::memory_order_relaxed); },
                     loop_options{.grain = 16});
  });
  auto c = g.add([&](context&) {
    if (sum.load(std::memory_order_relaxed) != 2 * n) bad.fetch_add(1);
    sum.store(0, std::memory_order_relaxed);
  });
  a.precede(b);
  b.precede(c);
  std::atomic<std::size_t> left{scaled(3'000, 300) + 1};
  const group outer = r.make_group();
  r.spawn(rerun_from_tasks{&g, &left}, outer);
  r.wait(outer);
  EXPECT_EQ(left.load(), 0u);
  EXPECT_EQ(bad.load(), 0u);
}

TEST_P(graph_test, a_throw_inside_a_loop_node_stops_its_successors_only) {
  auto& r = start();
  constexpr std::size_t n = 2000;
  std::atomic<int> after{0};
  std::atomic<int> independent{0};
  task_graph g;
  auto loop = g.add([](context&, graph_run& run) {
    run.parallel_for(
        0, n,
        [](std::size_t i) {
          if (i == 777) throw std::runtime_error("piece failed");
        },
        loop_options{.grain = 10});
  });
  auto b = g.add([&after](context&) { after.fetch_add(1); });
  auto c = g.add([&after](context&, graph_run& run) {
    run.parallel_for(0, 10, [&after](std::size_t) { after.fetch_add(1); });
  });
  loop.precede(b);
  b.precede(c);
  auto other = g.add([&independent](context&, graph_run& run) {
    run.parallel_for(0, 100, [&independent](std::size_t) { independent.fetch_add(1); });
  });
  auto other_after = g.add([&independent](context&) { independent.fetch_add(1000); });
  other.precede(other_after);
  for (int round = 0; round < 5; ++round) {
    independent = 0;
    const group grp = r.make_group();
    r.spawn(g, grp);
    EXPECT_THROW(r.wait(grp), std::runtime_error);
    EXPECT_EQ(after.load(), 0);
    EXPECT_EQ(independent.load(), 1100);
  }
}

TEST_P(graph_test, a_node_that_throws_after_starting_a_loop_stops_its_successors) {
  auto& r = start();
  std::atomic<int> pieces{0};
  std::atomic<int> after{0};
  task_graph g;
  auto loop = g.add([&pieces](context&, graph_run& run) {
    run.parallel_for(0, 100, [&pieces](std::size_t) { pieces.fetch_add(1); });
    throw std::runtime_error("body failed");
  });
  loop.precede(g.add([&after](context&) { after.fetch_add(1); }));
  for (int round = 0; round < 5; ++round) {
    const group grp = r.make_group();
    r.spawn(g, grp);
    EXPECT_THROW(r.wait(grp), std::runtime_error);
    EXPECT_EQ(after.load(), 0);
  }
}

TEST_P(graph_test, cancel_drops_a_loop_node_and_its_successors) {
  auto& r = start();
  constexpr std::size_t n = 4000;
  gate gt;
  std::atomic<std::size_t> ran{0};
  std::atomic<int> after{0};
  task_graph g;
  auto loop = g.add([&](context&, graph_run& run) {
    run.parallel_for(
        0, n,
        [&](std::size_t i) {
          if (i == 0) gt.pass();
          ran.fetch_add(1);
        },
        loop_options{.grain = 1});
  });
  loop.precede(g.add([&after](context&) { after.fetch_add(1); }));
  const group grp = r.make_group();
  r.spawn(g, grp);
  gt.wait_for_arrivals(1);
  EXPECT_TRUE(r.cancel(grp));
  gt.release();
  r.wait(grp);
  EXPECT_EQ(after.load(), 0) << "a successor of a cancelled loop ran";
  // whole again
  ran = 0;
  gt.arrived = 0;
  const group again = r.make_group();
  r.spawn(g, again);
  r.wait(again);
  EXPECT_EQ(ran.load(), n);
  EXPECT_EQ(after.load(), 1);
}

TEST_P(graph_test, a_stopped_loop_node_still_completes) {
  auto& r = start();
  std::stop_source stop;
  std::atomic<int> after{0};
  task_graph g;
  auto loop = g.add([&](context&, graph_run& run) {
    run.parallel_for(
        0, 10000, [&](std::size_t i) { if (i == 3) stop.request_stop(); },
        loop_options{.grain = 1, .stop = stop.get_token()});
  });
  loop.precede(g.add([&after](context&) { after.fetch_add(1); }));
  const group grp = r.make_group();
  r.spawn(g, grp);
  r.wait(grp);
  EXPECT_EQ(after.load(), 1);
}

/// A task holding one completion of a node: finishes it, or throws and drops it.
struct deferred_work {
  std::shared_ptr<graph_run::completion> done;
  std::atomic<int>* count;
  bool fail;
  void operator()(context& ctx) const {
    count->fetch_add(1, std::memory_order_relaxed);
    if (fail) throw std::runtime_error("deferred work failed");
    done->done(ctx);
  }
};

TEST_P(graph_test, defer_completes_a_node_when_every_completion_is_done) {
  auto& r = start();
  constexpr int k = 16;
  std::atomic<int> count{0};
  std::atomic<int> early{0};
  std::atomic<int> after{0};
  task_graph g;
  auto spawner = g.add([&](context& ctx, graph_run& run) {
    for (int i = 0; i < k; ++i)
      ctx.spawn(deferred_work{std::make_shared<graph_run::completion>(run.defer()), &count,
                              false});
  });
  auto succ = g.add([&](context&) {
    if (count.load() % k != 0) early.fetch_add(1);
    after.fetch_add(1);
  });
  spawner.precede(succ);
  for (int round = 0; round < static_cast<int>(scaled(500, 50)); ++round) {
    const group grp = r.make_group();
    r.spawn(g, grp);
    r.wait(grp);
    ASSERT_EQ(count.load(), k * (round + 1));
    ASSERT_EQ(after.load(), round + 1);
    ASSERT_EQ(early.load(), 0);
  }
}

TEST_P(graph_test, a_completion_dropped_without_done_fails_the_node) {
  auto& r = start();
  std::atomic<int> count{0};
  std::atomic<int> after{0};
  task_graph g;
  auto spawner = g.add([&](context& ctx, graph_run& run) {
    for (int i = 0; i < 4; ++i)
      ctx.spawn(deferred_work{std::make_shared<graph_run::completion>(run.defer()), &count,
                              i == 2});
    graph_run::completion unused = run.defer();  // dropped at once: fails the node too
    EXPECT_TRUE(unused.valid());
  });
  spawner.precede(g.add([&after](context&) { after.fetch_add(1); }));
  const group grp = r.make_group();
  r.spawn(g, grp);
  EXPECT_THROW(r.wait(grp), std::runtime_error);
  EXPECT_EQ(after.load(), 0);
  EXPECT_EQ(count.load(), 4);
}

TEST_P(graph_test, defer_is_refused_where_it_cannot_work) {
  auto& r = start();
  std::atomic<int> refused{0};
  task_graph g;
  g.add([&refused](context& ctx, graph_run& run) {
    run.add([&refused](context&, graph_run& inner) {
      try {
        (void)inner.defer();
      } catch (const std::logic_error&) {
        refused.fetch_add(1);
      }
    });
    graph_run::completion c = run.defer();
    c.done(ctx);
    EXPECT_FALSE(c.valid());
    try {
      c.done(ctx);
    } catch (const std::logic_error&) {
      refused.fetch_add(1);
    }
  });
  const group grp = r.make_group();
  r.spawn(g, grp);
  r.wait(grp);
  EXPECT_EQ(refused.load(), 2);
}

TESSERA_INSTANTIATE_WORKER_COUNTS(graph_test);

}  // namespace
}  // namespace tessera::test
