// The `dag` subcommand: the shapes, the order check, registration and the loop over
// configurations.
#include "dag/dag.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "common/random.h"
#include "common/registry.h"

namespace tessera::bench::dag {

std::string_view to_string(shape s) noexcept {
  switch (s) {
    case shape::chain: return "chain";
    case shape::tree: return "tree";
    case shape::layered: return "layered";
    case shape::wavefront: return "wavefront";
  }
  return "?";
}

namespace {

using edge_list = std::vector<std::pair<std::uint32_t, std::uint32_t>>;

/// Compressed successor and predecessor lists of `edges` over `n` nodes.
graph compress(shape kind, std::uint32_t n, const edge_list& edges) {
  graph g;
  g.kind = kind;
  g.nodes = n;
  g.succ_begin.assign(std::size_t{n} + 1, 0);
  g.pred_begin.assign(std::size_t{n} + 1, 0);
  for (const auto& [a, b] : edges) {
    ++g.succ_begin[a + 1];
    ++g.pred_begin[b + 1];
  }
  for (std::uint32_t v = 0; v < n; ++v) {
    g.succ_begin[v + 1] += g.succ_begin[v];
    g.pred_begin[v + 1] += g.pred_begin[v];
  }
  g.succ.resize(edges.size());
  g.pred.resize(edges.size());
  std::vector<std::uint64_t> s(g.succ_begin.begin(), g.succ_begin.end() - 1);
  std::vector<std::uint64_t> p(g.pred_begin.begin(), g.pred_begin.end() - 1);
  for (const auto& [a, b] : edges) {
    g.succ[s[a]++] = b;
    g.pred[p[b]++] = a;
  }
  return g;
}

std::uint32_t side_of(std::uint64_t nodes) {
  const double side = std::ceil(std::sqrt(static_cast<double>(nodes)));
  return std::max<std::uint32_t>(1, static_cast<std::uint32_t>(side));
}

}  // namespace

graph make_graph(shape kind, std::uint64_t nodes, std::uint64_t edges) {
  if (nodes == 0 || nodes >= 0xFFFF'FFF0ULL)
    throw usage_failure("tessera-bench: --nodes: between 1 and 4,294,967,280");
  edge_list e;
  switch (kind) {
    case shape::chain: {
      const auto n = static_cast<std::uint32_t>(nodes);
      e.reserve(n);
      for (std::uint32_t v = 0; v + 1 < n; ++v) e.emplace_back(v, v + 1);
      return compress(kind, n, e);
    }
    case shape::tree: {
      // out-tree 0..m-1 (heap order), in-tree node j at id 2m-1-j (topological ids)
      const auto m = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, nodes / 2));
      e.reserve(2 * std::size_t{m});
      for (std::uint32_t i = 0; i < m; ++i) {
        const std::uint64_t left = 2 * std::uint64_t{i} + 1;
        const std::uint32_t in = 2 * m - 1 - i;
        for (std::uint64_t c = left; c < left + 2 && c < m; ++c) {
          e.emplace_back(i, static_cast<std::uint32_t>(c));
          e.emplace_back(static_cast<std::uint32_t>(2 * m - 1 - c), in);
        }
        if (left >= m) e.emplace_back(i, in);  // a leaf feeds its mirror
      }
      return compress(kind, 2 * m, e);
    }
    case shape::layered: {
      const auto n = static_cast<std::uint32_t>(nodes);
      const std::uint32_t width = std::min(side_of(n), n);
      const std::uint64_t later = n > width ? n - width : 0;  // nodes after the first layer
      const std::uint64_t total = edges == 0 ? 2 * std::uint64_t{n} : edges;
      if (total < later)
        throw usage_failure("tessera-bench: --edges: a layered graph of " + std::to_string(n) +
                            " nodes needs at least " + std::to_string(later));
      const std::uint64_t most = later * width;
      if (total > most)
        throw usage_failure("tessera-bench: --edges: a layered graph of " + std::to_string(n) +
                            " nodes in layers of " + std::to_string(width) + " has room for " +
                            std::to_string(most));
      e.reserve(total);
      std::uint64_t counter = 0x5eed;
      const auto random_below = [&counter](std::uint64_t bound) {
        return below(mix64(++counter), bound);
      };
      // per node one predecessor in the layer before, then the extra edges spread at random
      std::vector<std::vector<std::uint32_t>> extra(n);
      for (std::uint32_t v = width; v < n; ++v) {
        const std::uint32_t layer_start = (v / width - 1) * width;
        const std::uint32_t u = layer_start + static_cast<std::uint32_t>(random_below(width));
        extra[v].push_back(u);
      }
      for (std::uint64_t k = later; k < total;) {
        const std::uint32_t v = width + static_cast<std::uint32_t>(random_below(later));
        const std::uint32_t layer_start = (v / width - 1) * width;
        const std::uint32_t u = layer_start + static_cast<std::uint32_t>(random_below(width));
        std::vector<std::uint32_t>& p = extra[v];
        if (p.size() >= width || std::find(p.begin(), p.end(), u) != p.end()) continue;
        p.push_back(u);
        ++k;
      }
      for (std::uint32_t v = 0; v < n; ++v) {
        for (const std::uint32_t u : extra[v]) e.emplace_back(u, v);
        std::vector<std::uint32_t>().swap(extra[v]);
      }
      return compress(kind, n, e);
    }
    case shape::wavefront: {
      const std::uint32_t side = side_of(nodes);
      const std::uint32_t n = side * side;
      e.reserve(2 * std::size_t{n});
      for (std::uint32_t v = 0; v < n; ++v) {
        if ((v + 1) % side != 0) e.emplace_back(v, v + 1);
        if (v + side < n) e.emplace_back(v, v + side);
      }
      return compress(kind, n, e);
    }
  }
  return {};
}

void node_work::check(const char* implementation) const {
  const std::string what = std::string(implementation) + " " +
                           std::string(to_string(m_graph->kind)) + ": ";
  if (m_counts.total() != m_graph->nodes)
    throw bench_failure(what + std::to_string(m_counts.total()) + " nodes ran, expected " +
                        std::to_string(m_graph->nodes));
  if (m_out_of_order.load(std::memory_order_relaxed))
    throw bench_failure(what + "a node started before one of its predecessors finished");
  for (std::uint32_t v = 0; v < m_graph->nodes; ++v) {
    if (m_done[v] != m_stamp)
      throw bench_failure(what + "node " + std::to_string(v) + " did not run");
  }
}

namespace {

shape parse_shape(const std::string& name) {
  if (name == "tree") return shape::tree;
  if (name == "layered") return shape::layered;
  if (name == "wavefront") return shape::wavefront;
  return shape::chain;
}

/// The competitors, in the order they run and are listed (each in its own file).
const implementation_table<measurement (*)(const config&)> implementations{
    {"tessera", run_tessera}, {"onetbb", run_onetbb}, {"openmp", run_openmp}};

void run(const run_context& ctx) {
  const auto nodes = static_cast<std::uint64_t>(ctx.flags.integer("nodes"));
  const auto edges = static_cast<std::uint64_t>(ctx.flags.integer("edges"));
  const auto work = static_cast<std::uint64_t>(ctx.flags.integer("work"));
  for (const auto& shape_name : ctx.flags.list("shape")) {
    const graph g = make_graph(parse_shape(shape_name), nodes, edges);
    for (const unsigned w : ctx.workers) {
      const std::string details = "shape=" + shape_name + " nodes=" + std::to_string(g.nodes);
      const std::vector<measurement> results =
          measure_in_turns(ctx.implementations, [&](const std::string& impl) {
            const config cfg{.workers = w,
                             .dag = &g,
                             .work = work,
                             .repeat = ctx.repeat,
                             .label = ctx.label(impl, w, details),
                             .tessera = tessera_settings::from(ctx.flags)};
            return implementations.at(impl)(cfg);
          });
      for (std::size_t i = 0; i < ctx.implementations.size(); ++i) {
        row r("dag", ctx.implementations[i], w, results[i]);
        r.with("shape", shape_name)
            .with("nodes", static_cast<std::int64_t>(g.nodes))
            .with("edges", static_cast<std::int64_t>(g.edges()))
            .with("work", static_cast<std::int64_t>(work));
        if (ctx.implementations[i] == "openmp")
          r.with_remark("OpenMP's time includes making the tasks and their dependences (it has "
                        "no graph to build once)");
        ctx.report.add(std::move(r));
      }
    }
  }
}

const registration dag_benchmark({
    .name = "dag",
    .help = "task graphs (chain, tree, layered, wavefront): per-node cost of dependencies",
    .implementations = implementations.names(),
    .reference = "onetbb",
    .flags = tessera_settings::add_flags(
        {int_flag("nodes", 1'000'000, "nodes per graph (ops; rounded to fit the shape)", 1,
                  4'000'000'000),
         choice_list_flag("shape", "all", {"chain", "tree", "layered", "wavefront"},
                          "graph shapes to run"),
         int_flag("edges", 0, "edges of the layered shape (0: twice the nodes)", 0),
         int_flag("work", 0, "spin iterations per node (about 1 ns each; 0: empty nodes)", 0,
                  1'000'000'000)}),
    .run = run,
});

}  // namespace

}  // namespace tessera::bench::dag
