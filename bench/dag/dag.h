// bench/dag/dag.h — task graphs: every node a task that runs after its predecessors.
//
// Four generated shapes, `nodes` nodes each (rounded to fit the shape), node ids in a
// topological order (every edge goes from a lower id to a higher one):
//   chain      0 -> 1 -> ... -> n-1
//   tree       a binary fan-out tree of n/2 nodes (i -> 2i+1, 2i+2), whose leaves feed the
//              leaves of a mirrored fan-in tree that ends in one sink
//   layered    layers of ceil(sqrt(n)) nodes; each node after the first layer has one
//              predecessor in the layer before, and `edges` - that many more go from random
//              nodes of the layer before to random nodes (no edge twice)
//   wavefront  a side x side grid; (x, y) before (x + 1, y) and (x, y + 1)
// Each node checks that its predecessors finished in this run (their stamps), spins `work`
// iterations of a multiply-add chain (about a nanosecond each), stamps itself and counts on its
// worker. A run's time counts only once every node ran exactly once, in order.
//
//   const dag d = make_dag(shape::wavefront, 1'000'000, 0);
//   measurement m = run_tessera({.workers = 2, .graph = &d, .work = 0, .repeat = 3});
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/tessera_settings.h"
#include "common/timing.h"
#include "common/worker_counters.h"

namespace tessera::bench::dag {

enum class shape : std::uint8_t { chain, tree, layered, wavefront };

std::string_view to_string(shape s) noexcept;

/// A generated graph: successors and predecessors in compressed lists.
struct graph {
  shape kind = shape::chain;
  std::uint32_t nodes = 0;
  std::vector<std::uint64_t> succ_begin, pred_begin;  // nodes + 1 entries each
  std::vector<std::uint32_t> succ, pred;
  std::uint64_t edges() const noexcept { return succ.size(); }
};

/// `edges`: for layered only (0: twice the nodes).
graph make_graph(shape kind, std::uint64_t nodes, std::uint64_t edges);

/// What every implementation's node does (see the top of this file), and the run's check.
class node_work {
 public:
  node_work(const graph& g, unsigned workers, std::uint64_t work)
      : m_graph(&g), m_done(g.nodes, 0), m_counts(workers), m_work(work) {}

  /// A new run: stamps of the last one count as not done.
  void start_run() noexcept {
    ++m_stamp;
    m_counts.reset();
    m_out_of_order.store(false, std::memory_order_relaxed);
  }
  /// Node v's body, on worker `worker`.
  void visit(std::uint32_t v, unsigned worker) noexcept {
    const graph& g = *m_graph;
    for (std::uint64_t i = g.pred_begin[v]; i < g.pred_begin[v + 1]; ++i) {
      if (m_done[g.pred[i]] != m_stamp) m_out_of_order.store(true, std::memory_order_relaxed);
    }
    spin(m_work, v);
    m_done[v] = m_stamp;  // read by the successors: ordered by the graph's edges
    m_counts.add(worker);
  }
  /// Throws bench_failure unless every node ran once, after its predecessors.
  void check(const char* implementation) const;

 private:
  static void spin(std::uint64_t n, std::uint64_t x) noexcept {
    for (std::uint64_t i = 0; i < n; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      __asm__ volatile("" : "+r"(x));  // kept: the work cannot be folded away
    }
  }

  const graph* m_graph;
  std::vector<std::uint32_t> m_done;
  std::uint32_t m_stamp = 0;
  worker_counters m_counts;
  std::atomic<bool> m_out_of_order{false};
  std::uint64_t m_work;
};

struct config {
  unsigned workers = 1;
  const graph* dag = nullptr;
  std::uint64_t work = 0;
  unsigned repeat = 3;
  std::string label;
  tessera_settings tessera;  ///< pin: every implementation (common/placement.h); the rest: tessera
};

measurement run_tessera(const config& cfg);
measurement run_onetbb(const config& cfg);
measurement run_openmp(const config& cfg);

}  // namespace tessera::bench::dag
