// src/graph/graph.cpp — building a task_graph: nodes, annotations, edges, the successor lists
// and the cycle check. Running one is in run.cpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

#include "graph/graph_access.h"
#include "graph/graph_data.h"

namespace tessera {
namespace detail {

// ---- body_arena ---------------------------------------------------------------------------------

void* body_arena::allocate(std::size_t bytes) {
  constexpr std::size_t align = __STDCPP_DEFAULT_NEW_ALIGNMENT__;
  bytes = std::max<std::size_t>((bytes + align - 1) & ~(align - 1), align);
  m_total += bytes;
  if (bytes > chunk_bytes / 4) {
    m_large.push_back(std::make_unique<std::byte[]>(bytes));
    m_last = nullptr;
    return m_large.back().get();
  }
  if (m_used + bytes > chunk_bytes) {
    m_chunks.push_back(std::make_unique<std::byte[]>(chunk_bytes));
    m_used = 0;
  }
  m_last_used = m_used;
  m_last = m_chunks.back().get() + m_used;
  m_used += bytes;
  return m_last;
}

void body_arena::undo(void* p) noexcept {
  if (p == m_last) {
    m_used = m_last_used;
    m_last = nullptr;
  }
  // otherwise (a block of its own, or not the last one) it stays, unused, until the graph goes
}

// ---- graph_data --------------------------------------------------------------------------------

graph_data::~graph_data() {
  free_run_state(spare_run.load(std::memory_order_acquire));
  for (const body_record& b : bodies) b.ops->destroy(b.body);
}

std::string graph_data::describe(std::uint32_t v) const {
  std::string s = "node " + std::to_string(v);
  if (auto it = names.find(v); it != names.end()) s += " (\"" + it->second + "\")";
  return s;
}

void graph_data::prepare() {
  if (prepared.load(std::memory_order_acquire)) return;  // the lists are written: read them
  const lock hold(prepare_mutex);
  if (prepared.load(std::memory_order_relaxed)) return;
  build();
  prepared.store(true, std::memory_order_release);  // publishes the lists to later spawns
}

void graph_data::build() {
  const std::uint32_t n = size();
  // Out-degrees: the lists built before (for the nodes they knew) plus the new edges.
  std::vector<std::uint32_t> begin(std::size_t{n} + 1, 0);
  const std::uint32_t old_n =
      succ_begin.empty() ? 0 : static_cast<std::uint32_t>(succ_begin.size() - 1);
  for (std::uint32_t v = 0; v < old_n; ++v) begin[v + 1] = succ_begin[v + 1] - succ_begin[v];
  for (const auto& [a, b] : new_edges) ++begin[a + 1];
  std::uint64_t total = 0;
  for (std::uint32_t v = 0; v < n; ++v) {
    total += begin[v + 1];
    if (total > std::numeric_limits<std::uint32_t>::max())
      throw std::length_error("tessera: a task_graph holds at most 2^32 - 1 edges");
    begin[v + 1] = static_cast<std::uint32_t>(total);
  }
  std::vector<std::uint32_t> out(total);
  std::vector<std::uint32_t> fill(begin.begin(), begin.end() - 1);
  for (std::uint32_t v = 0; v < old_n; ++v) {
    for (std::uint32_t i = succ_begin[v]; i < succ_begin[v + 1]; ++i) out[fill[v]++] = succ[i];
  }
  for (const auto& [a, b] : new_edges) out[fill[a]++] = b;

  std::vector<std::uint32_t> indeg(n, 0);
  for (const std::uint32_t b : out) ++indeg[b];
  std::vector<std::uint32_t> start;
  for (std::uint32_t v = 0; v < n; ++v) {
    if (indeg[v] == 0) start.push_back(v);
  }

  // Kahn's algorithm: every node is reached unless it is on a cycle or after one.
  std::vector<std::uint32_t> left(indeg);
  std::vector<std::uint32_t> stack(start);
  std::uint64_t reached = 0;
  while (!stack.empty()) {
    const std::uint32_t v = stack.back();
    stack.pop_back();
    ++reached;
    for (std::uint32_t i = begin[v]; i < begin[v + 1]; ++i) {
      if (--left[out[i]] == 0) stack.push_back(out[i]);
    }
  }
  if (reached != n) {
    // The unreached nodes, for the report; the graph keeps its edges (the caller may fix them).
    std::vector<std::uint32_t> remaining;
    for (std::uint32_t v = 0; v < n; ++v) {
      if (left[v] != 0) remaining.push_back(v);
    }
    // Keep what was built (every edge): the next prepare() starts from it.
    new_edges.clear();
    succ_begin = std::move(begin);
    succ = std::move(out);
    in_degree = std::move(indeg);
    roots.clear();
    report_cycle(remaining);
  }
  succ_begin = std::move(begin);
  succ = std::move(out);
  in_degree = std::move(indeg);
  roots = std::move(start);
  new_edges.clear();
  new_edges.shrink_to_fit();
}

void graph_data::report_cycle(const std::vector<std::uint32_t>& remaining) const {
  // Every node left has a predecessor left (else its count would have reached zero): walking
  // from one to a predecessor left, again and again, must come back to a node it passed, and
  // the walk from there to it is a cycle.
  const std::uint32_t n = size();
  std::vector<char> is_left(n, 0);
  for (const std::uint32_t v : remaining) is_left[v] = 1;
  std::vector<std::uint32_t> pred(n, no_node);  // one predecessor left, per node left
  for (std::uint32_t a = 0; a < n; ++a) {
    if (is_left[a] == 0) continue;
    for (std::uint32_t i = succ_begin[a]; i < succ_begin[a + 1]; ++i) {
      if (is_left[succ[i]] != 0) pred[succ[i]] = a;
    }
  }
  std::vector<std::uint32_t> step(n, no_node);
  std::vector<std::uint32_t> path;
  std::uint32_t v = remaining.front();
  while (step[v] == no_node) {
    step[v] = static_cast<std::uint32_t>(path.size());
    path.push_back(v);
    v = pred[v];
  }
  // path[step[v]..] walks the cycle backwards: print it in the edges' direction.
  std::vector<std::uint32_t> cycle(path.begin() + step[v], path.end());
  std::reverse(cycle.begin(), cycle.end());
  std::string msg = "tessera: task_graph has a cycle through " + describe(cycle.front()) + ": ";
  const std::size_t shown = std::min<std::size_t>(cycle.size(), 8);
  for (std::size_t i = 0; i < shown; ++i) msg += describe(cycle[i]) + " -> ";
  msg += cycle.size() > shown ? "... -> " + describe(cycle.front()) : describe(cycle.front());
  throw std::invalid_argument(msg);
}

}  // namespace detail

// ---- task_graph ---------------------------------------------------------------------------------

task_graph::task_graph() : m_data(std::make_unique<detail::graph_data>()) {}
task_graph::task_graph(task_graph&&) noexcept = default;
task_graph& task_graph::operator=(task_graph&& other) noexcept {
  if (this != &other) {
    if (m_data) detail::graph_access::require_no_runs(*m_data);
    m_data = std::move(other.m_data);
  }
  return *this;
}
task_graph::~task_graph() {
  if (m_data) detail::graph_access::require_no_runs(*m_data);
}

void task_graph::require_idle(const char* what) const {
  if (!m_data) throw std::logic_error("tessera: task_graph used after it was moved from");
  // acquire: a run freed before this read is over with the graph
  if (m_data->runs_in_flight.load(std::memory_order_acquire) != 0) {
    throw std::logic_error(std::string("tessera: ") + what +
                           " of a task_graph while a run of it is in flight");
  }
}

void* task_graph::allocate_body(std::size_t bytes) {
  require_idle("add");
  if (m_data->body_of.size() >= detail::no_node - 1)
    throw std::length_error("tessera: a task_graph holds at most 2^32 - 2 nodes");
  return m_data->arena.allocate(bytes);
}

void task_graph::free_body(void* mem) noexcept { m_data->arena.undo(mem); }

graph_node task_graph::commit_body(void* mem, const detail::graph_body_ops* ops,
                                   std::uint32_t count) {
  detail::graph_data& d = *m_data;
  const std::uint64_t first = d.body_of.size();
  if (first + count >= detail::no_node) {
    ops->destroy(mem);
    throw std::length_error("tessera: a task_graph holds at most 2^32 - 2 nodes");
  }
  try {
    d.bodies.push_back({ops, mem, static_cast<std::uint32_t>(first)});
  } catch (...) {
    ops->destroy(mem);
    throw;
  }
  const auto body = static_cast<std::uint32_t>(d.bodies.size() - 1);
  try {
    d.body_of.resize(first + count, body);
    if (!d.annotations.empty()) d.annotations.resize(first + count);
  } catch (...) {
    d.body_of.resize(first);
    d.bodies.pop_back();
    ops->destroy(mem);
    throw;
  }
  d.prepared.store(false, std::memory_order_relaxed);
  return {this, static_cast<std::uint32_t>(first)};
}

graph_node task_graph::node(std::uint32_t index) {
  if (index >= size()) {
    throw std::out_of_range("tessera: task_graph::node(" + std::to_string(index) + ") of " +
                            std::to_string(size()) + " nodes");
  }
  return {this, index};
}

std::uint32_t task_graph::size() const noexcept { return m_data ? m_data->size() : 0; }

std::size_t task_graph::edge_count() const noexcept {
  return m_data ? m_data->succ.size() + m_data->new_edges.size() : 0;
}

void task_graph::reserve(std::size_t nodes, std::size_t edges) {
  m_data->body_of.reserve(nodes);
  m_data->new_edges.reserve(edges);
}

void task_graph::precede(graph_node before, graph_node after) {
  require_idle("precede");
  if (before.m_graph != this || after.m_graph != this) {
    throw std::invalid_argument("tessera: task_graph::precede with a node of another graph");
  }
  m_data->new_edges.emplace_back(before.m_index, after.m_index);
  m_data->prepared.store(false, std::memory_order_relaxed);
}

void task_graph::precede(std::span<const graph_node> before, std::span<const graph_node> after) {
  require_idle("precede");
  for (const graph_node& a : before) {
    for (const graph_node& b : after) precede(a, b);
  }
}

void task_graph::validate() {
  if (!m_data) throw std::logic_error("tessera: task_graph used after it was moved from");
  m_data->prepare();
}

void task_graph::set_priority(std::uint32_t i, priority p) {
  require_idle("annotate");
  detail::graph_access::annotation(*m_data, i).priority = static_cast<std::uint8_t>(p);
}

void task_graph::set_target(std::uint32_t i, std::uint8_t kind, std::uint16_t value) {
  require_idle("annotate");
  detail::node_annotation& a = detail::graph_access::annotation(*m_data, i);
  a.target_kind = kind;
  a.target = value;
}

void task_graph::set_data(std::uint32_t i, const void* data, std::size_t bytes, access mode,
                          bool resource) {
  require_idle("annotate");
  detail::node_annotation& a = detail::graph_access::annotation(*m_data, i);
  a.data = data;
  a.data_size = detail::task_header::saturate(bytes);
  a.access = static_cast<std::uint8_t>(mode);
  a.is_resource = resource ? 1 : 0;
}

void task_graph::set_name(std::uint32_t i, std::string_view name) {
  require_idle("name");
  m_data->names[i] = std::string(name);
}

// ---- graph_node --------------------------------------------------------------------------------

graph_node& graph_node::annotate(priority p) {
  m_graph->set_priority(m_index, p);
  return *this;
}
graph_node& graph_node::annotate(worker_id w) {
  m_graph->set_target(m_index, detail::task_header::target_worker, w.value);
  return *this;
}
graph_node& graph_node::annotate(numa_node_id n) {
  m_graph->set_target(m_index, detail::task_header::target_node, n.value);
  return *this;
}
void graph_node::set_data(const void* data, std::size_t bytes, access mode, bool resource) {
  m_graph->set_data(m_index, data, bytes, mode, resource);
}
graph_node& graph_node::name(std::string_view name) {
  m_graph->set_name(m_index, name);
  return *this;
}
graph_node& graph_node::precede(graph_node successor) {
  m_graph->precede(*this, successor);
  return *this;
}
graph_node& graph_node::succeed(graph_node predecessor) {
  m_graph->precede(predecessor, *this);
  return *this;
}

}  // namespace tessera
