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
  const auto morsels = static_cast<std::uint32_t>(m_build_morsels);
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
  const tessera::graph_node partitioned = g.add([](tessera::context&) {});
  g.node(partitioned.index()).name("partitioned");
  // bound morsel m ──▶ bounded (chooses the table; adds partition morsel m ──▶ partitioned
  // where the build reads a scattered copy) ──▶ partitioned
  const tessera::graph_node bounded =
      g.add([this, partitioned](tessera::context&, tessera::graph_run& run) {
        m_run->choose_table();
        if (!m_run->scatters()) return;
        for (std::size_t m = 0; m < m_build_morsels; ++m)
          run.add([this, m](tessera::context&) { m_run->partition_morsel(m); })
              .before(partitioned);
      });
  g.node(bounded.index()).name("bounded").precede(partitioned);
  if (morsels > 0) {
    const std::int64_t* keys = m_input.build_keys.data();
    const tessera::graph_node first_bound = g.add_many(
        morsels, [this](tessera::context&, std::uint32_t m) { m_run->bound_morsel(m); });
    std::vector<tessera::graph_node> bounds;
    bounds.reserve(morsels);
    for (std::uint32_t m = 0; m < morsels; ++m) {
      const std::size_t row = std::size_t{m} * m_records;
      const std::size_t rows = std::min(m_records, m_input.build_keys.size() - row);
      bounds.push_back(g.node(first_bound.index() + m));
      bounds.back().annotate_data(keys + row, rows * sizeof(std::int64_t));
    }
    g.precede(bounds, bounded);
  }
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
    g.precede(partitioned, a);
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
  return 2 * m_build_morsels + 2 + m_partitions * (1 + chunks) + 1;  // with a scatter
}

}  // namespace join
