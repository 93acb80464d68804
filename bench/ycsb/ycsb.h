// bench/ycsb/ycsb.h — the `ycsb` subcommand: YCSB load and run phases ([MxTasks] §6) on the tessera
// task tree and on the optimistic-lock-coupling baseline driven by threads and by oneTBB.
//
// A workload is prepared once (generated or read from traces) as two arrays of ycsb::operation,
// each operation paired with the answer it must give (`expect`), plus, for a phase with scans,
// the sorted keys that every scan covering them must deliver (phase_data::stable_keys). Every
// implementation is a `store`: it builds a fresh tree, executes a phase — all operations handed
// out in batches of 500 — checks every answer while it runs, and exposes the quiescent tree to
// kv::check_tree.
//
//   workload_data w = prepare_workload({.workload = 'a', .records = 1000, .operations = 1000});
//   std::unique_ptr<store> s = make_threads_store(2, 500, true);
//   s->create_tree();
//   error_log errors;
//   progress meter("threads load", w.load.ops.size(), 2, false);
//   const double seconds = s->execute(w.load, meter, errors);  // errors.count() wrong answers
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/tessera_settings.h"
#include "kv/node.h"
#include "kv/task_tree.h"
#include "ycsb/generator.h"
#include "ycsb/operation.h"
#include "ycsb/progress.h"
#include "ycsb/verify.h"

namespace tessera::bench::ycsb_bench {

/// One phase: the operations in the order they are handed out, and what each must answer.
struct phase_data {
  std::vector<::ycsb::operation> ops;
  std::vector<expect> expected;  ///< one per operation
  /// Keys in the tree after the phase, when that does not depend on the order of execution.
  std::optional<std::uint64_t> keys_after;
  std::uint32_t max_scan_length = 0;  ///< room a scan needs
  /// Keys present throughout the phase (loaded, and neither inserted nor removed by it), sorted
  /// ascending: what a scan must not skip (scan_error). Filled only for a phase with scans of
  /// length > 0 (8 bytes a key: 80 MB at 10 M records); empty otherwise.
  std::vector<std::uint64_t> stable_keys;
  /// What the tree must hold after the phase (content_error), both sorted ascending: the stable
  /// keys the phase updates (update or read-modify-write), which must hold updated_value_of(key),
  /// and the keys it inserts or removes, which may hold either legal value or be absent. Every
  /// other key in the tree must hold the value it was loaded with. 8 bytes per key named.
  std::vector<std::uint64_t> updated_keys;
  std::vector<std::uint64_t> unsettled_keys;
  /// How many keys not in unsettled_keys the tree holds after the phase: the loaded keys that no
  /// insert or remove of the phase names (content_error counts them, so a lost key fails even
  /// where keys_after is unknown).
  std::uint64_t settled_count = 0;
};

struct workload_options {
  char workload = 'c';
  std::optional<::ycsb::distribution> distribution;  ///< default: the workload's own
  std::uint64_t records = 1000;
  std::uint64_t operations = 1000;
  std::uint64_t seed = 0x5eed;
  std::string load_file;  ///< non-empty: the load phase replays this trace (INSERT lines only)
  std::string run_file;   ///< non-empty: the run phase replays this trace
};

struct workload_data {
  phase_data load;
  phase_data run;
  std::string workload;      ///< "a".."f", or "trace"
  std::string distribution;  ///< "zipfian", "uniform", "latest", or "trace"
  std::string description;   ///< one line for stderr
};

/// Generates or reads both phases and classifies every operation. Throws ycsb::trace_error for a
/// malformed or unreadable trace and std::invalid_argument for an impossible workload spec.
workload_data prepare_workload(const workload_options& options);

/// One implementation under test, for one worker count. Not thread-safe; the tree is built and
/// destroyed by the caller's thread.
class store {
 public:
  virtual ~store() = default;
  /// A fresh, empty tree (the previous one must have been destroyed).
  virtual void create_tree() = 0;
  virtual void destroy_tree() = 0;
  /// Executes every operation of `phase`, batches of the configured size handed out to the
  /// workers, and checks each answer into `errors`; ticks `meter` (one counter per worker).
  /// Returns the seconds from the first operation handed out until the tree is quiescent.
  /// Throws bench_failure if the implementation itself misbehaved (operations lost, a task
  /// threw).
  virtual double execute(const phase_data& phase, progress& meter, error_log& errors) = 0;
  /// The root of the quiescent tree, for kv::check_tree.
  [[nodiscard]] virtual const kv::node* root() const = 0;
  /// Keys in the quiescent tree (a walk over the leaves).
  [[nodiscard]] virtual std::size_t size() const = 0;
  /// After the last run of a configuration: runtime statistics on stderr, if asked for.
  virtual void report_statistics(const std::string& /*label*/) const {}
  /// A store whose tree is not made of kv::node (root() == nullptr: the external competitors,
  /// external.cpp) checks the quiescent tree after `phase` through its own lookups instead of
  /// kv::check_tree and content_error: every key of its load phase present, with the value the
  /// phase must have left. Counts the keys found into `keys`; returns what is wrong, if anything.
  [[nodiscard]] virtual wrong_answer check_by_lookups(const phase_data& /*phase*/,
                                                      std::uint64_t& keys) const {
    keys = 0;
    return "this store cannot check itself by lookups";
  }
};

/// How the tessera store runs: the shared runtime flags (--pin, --runtime-stats) and its own.
struct tessera_config {
  tessera_settings runtime;  ///< bench/common: pinning, statistics
  unsigned workers = 1;
  unsigned prefetch_distance = 2;
  kv::tree_sync sync = kv::tree_sync::automatic;
  std::uint32_t batch = 500;        ///< requests per driver batch
  unsigned batches_per_worker = 2;  ///< batches in flight per worker
  std::size_t coupled_bytes = kv::tree_options{}.coupled_bytes;  ///< kv::tree_options
  std::optional<std::size_t> coupled_leaf_bytes{};  ///< kv::tree_options (empty: the LLC)
  std::size_t visit_bytes = kv::tree_options{}.visit_bytes;  ///< kv::tree_options
};

std::unique_ptr<store> make_tessera_store(const tessera_config& config);
/// `pin`: worker i on the CPU of tessera's worker i (--pin), like tessera's.
std::unique_ptr<store> make_threads_store(unsigned workers, std::size_t batch, bool pin);
std::unique_ptr<store> make_tbb_store(unsigned workers, std::size_t batch, bool pin);
#if defined(TESSERA_YCSB_EXTERNAL)
/// index-microbench's BTreeOLC and ART-OLC on kv::thread_driver (external.cpp; only with CMake's
/// TESSERA_INDEX_MICROBENCH_DIR).
std::unique_ptr<store> make_btreeolc_store(unsigned workers, std::size_t batch, bool pin);
std::unique_ptr<store> make_artolc_store(unsigned workers, std::size_t batch, bool pin);
#endif

}  // namespace tessera::bench::ycsb_bench
