// dag on oneTBB: a tbb::flow::graph of continue_nodes (one per node, make_edge per edge), built
// once inside the arena; a run puts a continue_msg to every node without predecessors and
// waits for the graph (continue_nodes count their predecessors afresh for the next run).
#include <tbb/flow_graph.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/onetbb_placement.h"
#include "dag/dag.h"

namespace tessera::bench::dag {

measurement run_onetbb(const config& cfg) {
  using node_type = tbb::flow::continue_node<tbb::flow::continue_msg>;
  const graph& d = *cfg.dag;
  onetbb_arena arena(cfg.workers, cfg.tessera.pin);  // this_worker = slot; --pin
  node_work work(d, cfg.workers, cfg.work);
  std::unique_ptr<tbb::flow::graph> fg;
  std::vector<std::unique_ptr<node_type>> nodes;
  std::vector<node_type*> roots;
  arena.execute([&] {
    fg = std::make_unique<tbb::flow::graph>();
    nodes.reserve(d.nodes);
    for (std::uint32_t v = 0; v < d.nodes; ++v) {
      nodes.push_back(std::make_unique<node_type>(
          *fg, [&work, v](const tbb::flow::continue_msg&) { work.visit(v, this_worker); }));
    }
    for (std::uint32_t v = 0; v < d.nodes; ++v) {
      for (std::uint64_t i = d.succ_begin[v]; i < d.succ_begin[v + 1]; ++i)
        tbb::flow::make_edge(*nodes[v], *nodes[d.succ[i]]);
      if (d.pred_begin[v] == d.pred_begin[v + 1]) roots.push_back(nodes[v].get());
    }
  });
  const measurement m = measure(cfg.label, cfg.repeat, [&] {
    work.start_run();
    stopwatch clock;
    arena.execute([&] {
      for (node_type* r : roots) r->try_put(tbb::flow::continue_msg());
      fg->wait_for_all();
    });
    const double seconds = clock.seconds();
    work.check("onetbb");
    return sample{.ops = d.nodes, .seconds = seconds};
  });
  arena.execute([&] {  // the nodes and the graph go in the arena they were made in
    nodes.clear();
    fg.reset();
  });
  return m;
}

}  // namespace tessera::bench::dag
