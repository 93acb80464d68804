// The join's task graph (join/tessera_join.h).
#include "join/tessera_join.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "tessera/context.h"
#include "tessera/group.h"
#include "tessera/ids.h"
#include "tessera/loop_options.h"
#include "tessera/parallel_reduce.h"

namespace join {

tessera_join::tessera_join(tessera::runtime& rt, const join_input& input,
                           std::size_t records_per_task)
    : m_rt(rt), m_input(input), m_records(records_per_task), m_partitions(rt.workers()) {
  const join_phases shape(input, m_partitions, records_per_task);  // checks the arguments
  m_build_morsels = shape.build_morsels();
  m_probe_morsels = shape.probe_morsels();
  if (m_build_morsels > std::numeric_limits<std::uint32_t>::max() / 2)
    throw std::invalid_argument("join: " + std::to_string(m_build_morsels) +
                                " build tasks are too many for one graph; use more records "
                                "per task");
  build_graph();
}

tessera_join::~tessera_join() = default;

void tessera_join::build_graph() {
  tessera::task_graph& g = m_graph;
  // The probe phase: one loop over the probe morsels (a piece is one morsel of R rows), each
  // participant adding its pieces' counts and sums into a slot of its own, and the continuation
  // storing their total.
  const tessera::graph_node probe_start = g.add([this](tessera::context& ctx) {
    tessera::parallel_reduce(
        ctx, 0, m_probe_morsels, join_result{},
        [this](std::size_t first, std::size_t last) {
          join_result r;
          for (std::size_t m = first; m < last; ++m) r += m_run->probe(m);
          return r;
        },
        [](join_result a, const join_result& b) {
          a += b;
          return a;
        },
        [this](tessera::context&, const join_result& r) { m_result = r; },
        tessera::loop_options{.grain = 1});
  });
  g.node(probe_start.index()).name("probe start");
  // bounds (a loop over the build morsels) ──▶ bounded (chooses the table, then, where the build
  // reads a scattered copy, a loop over the build morsels partitioning them) ──▶ allocate p.
  // Both loops are split by the runtime at its own grain, the node after each readied by the
  // loop's last piece (graph_run::parallel_for): a phase costs a few tasks, not one per morsel.
  const tessera::graph_node bounds = g.add([this](tessera::context&, tessera::graph_run& run) {
    run.parallel_for(0, m_build_morsels, [this](std::size_t first, std::size_t last) {
      for (std::size_t m = first; m < last; ++m) m_run->bound_morsel(m);
    });
  });
  g.node(bounds.index()).name("bounds");
  const tessera::graph_node bounded =
      g.add([this](tessera::context&, tessera::graph_run& run) {
        m_run->choose_table();
        if (!m_run->scatters()) return;
        run.parallel_for(0, m_build_morsels, [this](std::size_t first, std::size_t last) {
          for (std::size_t m = first; m < last; ++m) m_run->partition_morsel(m);
        });
      });
  g.node(bounded.index()).name("bounded");
  g.precede(bounds, bounded);
  const tessera::graph_node allocate = g.add_many(
      m_partitions,
      [this, probe_start](tessera::context&, tessera::graph_run& run, std::uint32_t p) {
        m_run->allocate_partition(p);
        const std::size_t chunk = m_run->build_chunk_morsels();
        for (std::size_t first = 0; first < m_build_morsels; first += chunk) {
          const std::size_t last = std::min(first + chunk, m_build_morsels);
          run.add([this, p, first, last](tessera::context&) { m_run->build(p, first, last); })
              .annotate(tessera::worker_id{static_cast<std::uint16_t>(p)})
              .before(probe_start);
        }
      });
  for (unsigned p = 0; p < m_partitions; ++p) {
    tessera::graph_node a = g.node(allocate.index() + p);
    a.annotate(tessera::worker_id{static_cast<std::uint16_t>(p)});
    g.precede(bounded, a);
    g.precede(a, probe_start);
  }
  g.validate();
}

join_result tessera_join::run() {
  m_run = std::make_unique<join_phases>(m_input, m_partitions, m_records);
  m_result = {};
  const tessera::group g = m_rt.make_group();
  m_rt.spawn(m_graph, g);
  m_rt.wait(g);
  m_run.reset();
  return m_result;
}

std::size_t tessera_join::tasks_per_run() const noexcept {
  const std::size_t chunks = (m_build_morsels + m_partitions - 1) / m_partitions;
  return 3 + m_partitions * (1 + chunks);  // nodes; the loops' pieces are not counted
}

}  // namespace join
