// The join's task graph (join/tessera_join.h).
#include "join/tessera_join.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "tessera/context.h"
#include "tessera/group.h"
#include "tessera/ids.h"
#include "tessera/loop_options.h"
#include "tessera/parallel_reduce.h"

namespace join {

namespace {

/// Partition p's build: step after step of build_chunk_morsels() morsels on worker p (the task
/// returns itself between two), the last one finishing the allocate node's completion.
class build_chain final : public tessera::task {
 public:
  build_chain(join_phases& run, unsigned p, std::size_t morsels,
              tessera::graph_run::completion done) noexcept
      : m_run(&run), m_p(p), m_morsels(morsels), m_chunk(run.build_chunk_morsels()),
        m_done(std::move(done)) {}

  tessera::task* execute(tessera::context& ctx) override {
    const std::size_t last = std::min(m_next + m_chunk, m_morsels);
    m_run->build(m_p, m_next, last);
    m_next = last;
    if (m_next < m_morsels) return this;
    return m_done.done_then(ctx);  // probe start, if this was its last predecessor
  }

 private:
  join_phases* m_run;
  unsigned m_p;
  std::size_t m_morsels;
  std::size_t m_chunk;
  std::size_t m_next = 0;
  tessera::graph_run::completion m_done;
};

}  // namespace

tessera_join::tessera_join(tessera::runtime& rt, const join_input& input,
                           std::size_t records_per_task, run_memory* table_memory)
    : m_rt(rt),
      m_input(input),
      m_records(records_per_task),
      m_partitions(rt.workers()),
      m_table_memory(table_memory != nullptr ? table_memory : &m_own_memory) {
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
        [this](std::size_t first, std::size_t last) { return m_run->probe_morsels(first, last); },
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
  // allocate p (on worker p) defers its completion to a chain of build steps on worker p, one
  // task returning itself per step of about R rows, the last step completing the node: no task
  // per step, and no count that every step decrements.
  const tessera::graph_node allocate = g.add_many(
      m_partitions,
      [this](tessera::context& ctx, tessera::graph_run& run, std::uint32_t p) {
        m_run->allocate_partition(p);
        if (m_build_morsels == 0) return;
        auto* chain = ctx.make_task<build_chain>(*m_run, p, m_build_morsels, run.defer());
        chain->annotate(tessera::worker_id{static_cast<std::uint16_t>(p)});
        ctx.spawn(chain);
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
  m_run = std::make_unique<join_phases>(m_input, m_partitions, m_records, m_table_memory);
  m_result = {};
  const tessera::group g = m_rt.make_group();
  m_rt.spawn(m_graph, g);
  m_rt.wait(g);
  m_run.reset();
  return m_result;
}

std::size_t tessera_join::tasks_per_run() const noexcept {
  return 3 + 2 * std::size_t{m_partitions};  // nodes and build chains; not the loops' pieces
}

}  // namespace join
