// join/tessera_join.h — the morsel-driven hash join on tessera, as a task graph.
//
// One graph per (input, records per task), built once and run many times (a query plan run per
// query). A run is a fresh join_phases (join_phases.h) and these nodes:
//
//   bounds ──▶ bounded ──▶ allocate p (on worker p) ──▶ probe start
//     │          │            └─ spawns p's build chain (worker p), completes when it finished
//     │          └─ chooses the table; where the build reads a scattered copy, a loop over
//     │             partition morsel 0..M-1 (bounded completes when it finished)
//     └─ a loop over bound morsel 0..M-1 (bounds completes when it finished)
//   probe start: parallel_reduce over probe morsel 0..N-1 ──▶ its continuation stores the sum
//
// The dense table's memory and the scatter buffer are kept from one run to the next
// (run_memory): each "allocate p" clears p's run of counters on worker p, and the scatter
// overwrites its buffer, instead of the kernel faulting in and zeroing fresh pages every run.
//
// P = the runtime's workers: each partition's table is allocated and filled only by tasks
// annotated with its worker (worker_id{p}), so no latch guards it and its memory is first
// touched where it is used. The bound and partition phases are loop nodes
// (graph_run::parallel_for): the runtime splits the morsels into pieces at its own grain, and the
// loop's last piece readies the next node, so these phases cost a few tasks each whatever the
// records per task. "bounded" chooses the table (join_phases::choose_table) and starts the
// partition loop only where the build needs the scatter (not for a dense table of few
// partitions, whose build reads the keys themselves). The probe phase is a graph edge after
// the build phase: "probe start" runs after every allocate node, each of which completes when
// its partition's build chain (one task on worker p running a step of about R rows, returning
// itself for the next) finished, and starts a tessera loop over the probe morsels
// (parallel_reduce from a task, one morsel of R rows per piece): each participant adds its
// pieces' counts and sums into a slot of its own, and the loop's continuation, in the run's
// group, stores their total. A loop's piece costs less than a graph node (no task, no
// successor count, no shared fan-in counter): at 128 records per task a customer-orders run at
// scale factor 1 took 21.1 M instructions, 26.9 M with a node per morsel (callgrind, 1 worker).
//
//   tessera::runtime rt({.workers = 2});
//   join::tessera_join j(rt, input, 4096);     // records per task
//   join::join_result r = j.run();             // from a thread that is not a worker
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "join/join_phases.h"
#include "join/join_query.h"
#include "tessera/graph.h"
#include "tessera/runtime.h"

namespace join {

class tessera_join {
 public:
  /// Throws std::invalid_argument for 0 records per task or probe columns of different lengths.
  /// `table_memory`: where the dense table's memory and the scatter buffer are kept between
  /// runs; nullptr: a run_memory of this join's own. Several joins may share one if they never
  /// run at the same time (a benchmark that takes turns between granularities); it must outlive
  /// them.
  tessera_join(tessera::runtime& rt, const join_input& input, std::size_t records_per_task,
               run_memory* table_memory = nullptr);
  tessera_join(const tessera_join&) = delete;
  tessera_join& operator=(const tessera_join&) = delete;
  ~tessera_join();

  /// Runs the join once and waits for it (not from a worker); rethrows a task's exception.
  join_result run();

  /// Graph nodes of one run: bounds, bounded, allocate and build tasks and probe start (the
  /// loops' pieces are not nodes).
  std::size_t tasks_per_run() const noexcept;

 private:
  void build_graph();

  tessera::runtime& m_rt;
  join_input m_input;
  std::size_t m_records;
  unsigned m_partitions;
  std::size_t m_build_morsels;
  std::size_t m_probe_morsels;
  run_memory m_own_memory;     ///< the runs' table and scatter memory, kept from run to run...
  run_memory* m_table_memory;  ///< ...here, or in the caller's
  std::unique_ptr<join_phases> m_run;  ///< the run in flight (one at a time)
  join_result m_result;
  tessera::task_graph m_graph;
};

}  // namespace join
