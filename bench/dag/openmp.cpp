// dag on OpenMP tasks: one thread of the team makes a task per node, in id order (a topological
// order), with `depend(in: token of each predecessor)` (an iterator over its list) and
// `depend(out: its own token)`; the runtime derives the edges from those, and the barrier at the
// end of the parallel region waits for every task. OpenMP has no graph to build once: making
// the tasks and their dependences is part of every run.
#include <omp.h>

#include <cstdint>
#include <vector>

#include "common/openmp_placement.h"
#include "dag/dag.h"

namespace tessera::bench::dag {

measurement run_openmp(const config& cfg) {
  const graph& d = *cfg.dag;
  omp_set_dynamic(0);
  const int threads = static_cast<int>(cfg.workers);
  const saved_cpu_mask caller;  // OpenMP's thread 0 (this one) is pinned during the runs only
  node_work work(d, cfg.workers, cfg.work);
  std::vector<char> tokens(d.nodes);  // the dependence addresses, one per node
  return measure(cfg.label, cfg.repeat, [&] {
    work.start_run();
    node_work* w = &work;
    // (GCC 12 counts no use in a depend iterator: maybe_unused)
    [[maybe_unused]] char* token = tokens.data();
    const std::uint32_t* pred = d.pred.data();
    const std::uint64_t* pred_begin = d.pred_begin.data();
    const std::uint32_t n = d.nodes;
    place_openmp_threads(threads, cfg.tessera.pin);  // this_worker, and --pin
    stopwatch clock;
#pragma omp parallel num_threads(threads)
#pragma omp single
    {
      for (std::uint32_t v = 0; v < n; ++v) {
        const std::uint32_t* first = pred + pred_begin[v];
        const auto count = static_cast<long>(pred_begin[v + 1] - pred_begin[v]);
#pragma omp task depend(iterator(j = 0 : count), in : token[first[j]]) depend(out : token[v])
        w->visit(v, this_worker);
      }
    }
    const double seconds = clock.seconds();
    work.check("openmp");
    return sample{.ops = n, .seconds = seconds};
  });
}

}  // namespace tessera::bench::dag
