// dag on tessera: the graph is a tessera::task_graph built once (add_many: one body for all
// nodes, node i is the dag's node i); a run is runtime::spawn(graph, g) and wait(g).
#include <string>

#include "dag/dag.h"
#include "tessera/tessera.h"

namespace tessera::bench::dag {

measurement run_tessera(const config& cfg) {
  const graph& d = *cfg.dag;
  runtime rt(cfg.tessera.options(cfg.workers));
  node_work work(d, cfg.workers, cfg.work);
  task_graph tg;
  tg.reserve(d.nodes, d.edges());
  tg.add_many(d.nodes,
              [&work](context& ctx, std::uint32_t v) { work.visit(v, ctx.worker().value); });
  for (std::uint32_t v = 0; v < d.nodes; ++v) {
    for (std::uint64_t i = d.succ_begin[v]; i < d.succ_begin[v + 1]; ++i)
      tg.precede(tg.node(v), tg.node(d.succ[i]));
  }
  tg.validate();  // the successor lists are built here, not in the first timed run
  const measurement m = measure(cfg.label, cfg.repeat, [&] {
    work.start_run();
    const group g = rt.make_group();
    stopwatch clock;
    rt.spawn(tg, g);
    rt.wait(g);  // the nodes' writes are visible after the wait
    const double seconds = clock.seconds();
    work.check("tessera");
    return sample{.ops = d.nodes, .seconds = seconds};
  });
  cfg.tessera.print_statistics(cfg.label, rt);
  return m;
}

}  // namespace tessera::bench::dag
