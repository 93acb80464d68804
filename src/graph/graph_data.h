// src/graph/graph_data.h — what a task_graph holds (internal): bodies, annotations, edges, and
// the successor lists its runs read.
//
// Nodes are numbers 0..n-1. A node names its body by index (add_many's nodes share one body);
// annotations and names are kept only once a node has one. Edges are collected as pairs and
// turned into compressed successor lists (CSR: succ_begin[v] .. succ_begin[v + 1] in succ) and
// in-degrees by prepare(), which the first spawn after a change calls, under the mutex; later
// spawns read the lists only.
//
//   graph_data& d = graph_access::data(graph);
//   d.prepare();                         // throws std::invalid_argument on a cycle
//   for (std::uint32_t i = d.succ_begin[v]; i < d.succ_begin[v + 1]; ++i) ready(d.succ[i]);
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/graph.h"
#include "util/mutex.h"

namespace tessera::detail {

struct run_state;  // run.cpp
/// Frees a run's state (null: nothing).
void free_run_state(run_state* run) noexcept;

/// A node's task annotations (task.h), copied into its task's header in every run.
struct node_annotation {
  const void* data = nullptr;
  std::uint32_t data_size = 0;
  std::uint16_t target = 0;
  std::uint8_t priority = static_cast<std::uint8_t>(priority::normal);
  std::uint8_t access = 0;
  std::uint8_t is_resource = 0;
  std::uint8_t target_kind = 0;
};

/// One body: called for `count` nodes from `first` on, with their number relative to `first`.
struct body_record {
  const graph_body_ops* ops;
  void* body;
  std::uint32_t first;
};

/// Bump allocation for bodies (most are a few bytes of captures): 64 KiB chunks, a body larger
/// than a quarter of one in a block of its own.
class body_arena {
 public:
  void* allocate(std::size_t bytes);
  /// Gives back the last allocation (its body's constructor threw).
  void undo(void* p) noexcept;
  std::size_t bytes() const noexcept { return m_total; }

 private:
  static constexpr std::size_t chunk_bytes = std::size_t{64} * 1024;
  std::vector<std::unique_ptr<std::byte[]>> m_chunks;
  std::vector<std::unique_ptr<std::byte[]>> m_large;
  std::size_t m_used = chunk_bytes;  // in the last chunk; full: the next allocation starts one
  std::size_t m_total = 0;
  void* m_last = nullptr;
  std::size_t m_last_used = 0;  // m_used before the last allocation
};

struct graph_data {
  graph_data() = default;
  graph_data(const graph_data&) = delete;
  graph_data& operator=(const graph_data&) = delete;
  ~graph_data();

  std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(body_of.size()); }
  /// Builds the successor lists, in-degrees and roots if edges or nodes changed since the last
  /// call, and checks for cycles (std::invalid_argument naming a node on one). Thread-safe:
  /// the first caller after a change builds, under the mutex; the others wait, then read.
  void prepare();
  /// What the error message calls node `v`: its number and, if it has one, its name.
  std::string describe(std::uint32_t v) const;
  /// Node v's body. A graph whose nodes share one body (one add_many) does not read body_of:
  /// a run then touches one per-node array less (in a big graph, a cache miss per node less).
  const body_record& body_for(std::uint32_t v) const noexcept {
    return bodies.size() == 1 ? bodies.front() : bodies[body_of[v]];
  }

  // ---- nodes ----
  std::vector<std::uint32_t> body_of;        // per node: index into bodies
  std::vector<body_record> bodies;
  body_arena arena;
  std::vector<node_annotation> annotations;  // empty, or one per node once any is annotated
  std::unordered_map<std::uint32_t, std::string> names;

  // ---- edges ----
  std::vector<std::pair<std::uint32_t, std::uint32_t>> new_edges;  // not in the CSR yet
  std::vector<std::uint32_t> succ_begin;  // size() + 1 entries once prepared
  std::vector<std::uint32_t> succ;
  std::vector<std::uint32_t> in_degree;
  std::vector<std::uint32_t> roots;  // nodes without predecessors, ascending

  /// The CSR describes the graph as it is. Acquire/release: a spawn that sees true reads the
  /// lists prepare() wrote.
  std::atomic<bool> prepared{false};
  mutex prepare_mutex;
  /// Runs of this graph whose state is not freed yet (release on the decrement: a graph
  /// destroyed after seeing 0 is destroyed after the run's last read of it).
  std::atomic<std::uint32_t> runs_in_flight{0};
  /// A finished run's state (its counts with it), kept for the next run to take: a graph run
  /// again and again reuses one allocation instead of faulting in fresh pages each run. Null:
  /// none kept (none finished yet, or a run holds it). A run takes it with an exchange
  /// (acquire) and gives it back with an exchange (acq_rel) when its last task is destroyed;
  /// run.cpp states the ordering. Freed by the destructor.
  std::atomic<run_state*> spare_run{nullptr};

 private:
  void build();
  [[noreturn]] void report_cycle(const std::vector<std::uint32_t>& remaining) const;
};

}  // namespace tessera::detail
