// src/graph/graph_access.h — the library's way into a task_graph and a graph_run (internal).
//
//   graph_data& d = graph_access::data(graph);
//   graph_run run = graph_access::make_run(state, ctx, node);   // for one node's body
#pragma once

#include <cstdint>
#include <vector>


#include "graph/graph_data.h"
#include "tessera/graph.h"

namespace tessera::detail {

struct graph_access {
  static graph_data& data(task_graph& g) noexcept { return *g.m_data; }
  /// Node i's annotation (the table is made, one per node, at the first).
  static node_annotation& annotation(graph_data& d, std::uint32_t i) {
    if (d.annotations.empty()) d.annotations.resize(d.size());
    return d.annotations.at(i);
  }
  /// Stops the process with a message if a run of the graph is in flight (the graph is being
  /// destroyed or replaced: the run would read freed memory).
  static void require_no_runs(const graph_data& d) noexcept;

  static graph_run make_run(run_state* run, context& ctx, std::uint32_t node) noexcept {
    return {run, ctx, node};
  }
  /// The node a graph_run names (a node task running several nodes reuses one graph_run).
  static void set_node(graph_run& r, std::uint32_t node) noexcept { r.m_node = node; }
  static std::vector<task*>& added(graph_run& r) noexcept { return r.m_added; }
  static run_state* state(const graph_run& r) noexcept { return r.m_run; }
  /// The running node's deferral (nullptr: it did not defer), handed over to the node task.
  static deferral* take_deferral(graph_run& r) noexcept {
    deferral* d = r.m_deferral;
    r.m_deferral = nullptr;
    return d;
  }
  static context& ctx(const graph_run& r) noexcept { return *r.m_ctx; }
};

}  // namespace tessera::detail
