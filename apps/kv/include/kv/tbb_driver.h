#pragma once
// kv::tbb_driver — runs batches as oneTBB tasks (the "TBB line" of the paper's Fig. 12c): a
// tbb::task_arena of N threads executes a tbb::parallel_for with one task per chunk of
// `chunk_size` indices (simple_partitioner, grain 1 chunk), and TBB's work stealing balances
// the chunks. While a driver lives, a tbb::global_control allows TBB N threads in the process,
// so N may exceed the number of cores (the limit is process-wide: with several drivers alive,
// the smallest N applies to all).
//
// Invariant: run() returns only after every index in [0, count) was processed exactly once;
// the calling thread joins the arena and counts as one of the N threads.
//
// Memory-ordering contract: everything the caller did before run() happens-before every call
// of the function, and every call happens-before run() returns (TBB's join).
//
//   kv::olc_tree tree;
//   kv::tbb_driver driver(8);                                     // arena of 8 threads
//   driver.run(1'000'000, [&](std::size_t i) { tree.insert(i, i); });
//   driver.run(n, [&](std::size_t i, kv::worker_id w) { hits[kv::to_index(w)] += ...; });
//   // worker ids are TBB arena slot indices, in [0, 8)

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cstddef>

#include "kv/batch.h"
#include "kv/node.h"

namespace kv {

class tbb_driver {
 public:
  explicit tbb_driver(unsigned threads, std::size_t chunk_size = default_chunk_size)
      : m_parallelism(tbb::global_control::max_allowed_parallelism, threads),
        m_arena(static_cast<int>(threads)),
        m_threads(threads),
        m_chunk_size(chunk_size) {
    KV_ASSERT(threads > 0 && chunk_size > 0, "tbb_driver needs threads and a chunk size");
  }

  [[nodiscard]] unsigned threads() const noexcept { return m_threads; }
  /// The arena the batches run in (to attach a tbb::task_scheduler_observer, say).
  [[nodiscard]] tbb::task_arena& arena() noexcept { return m_arena; }

  /// Calls fn for every index in [0, count) as oneTBB tasks; blocks until done.
  template <index_function F>
  void run(std::size_t count, F&& fn) {
    const std::size_t chunk = m_chunk_size;
    const std::size_t chunks = (count + chunk - 1) / chunk;
    m_arena.execute([&] {
      tbb::parallel_for(
          tbb::blocked_range<std::size_t>(0, chunks, 1),
          [&](const tbb::blocked_range<std::size_t>& r) {
            const auto w =
                worker_id{static_cast<unsigned>(tbb::this_task_arena::current_thread_index())};
            for (std::size_t c = r.begin(); c != r.end(); ++c) {
              const std::size_t end = std::min(count, (c + 1) * chunk);
              for (std::size_t i = c * chunk; i < end; ++i) invoke_index(fn, i, w);
            }
          },
          tbb::simple_partitioner{});
    });
  }

 private:
  tbb::global_control m_parallelism;
  tbb::task_arena m_arena;
  unsigned m_threads;
  std::size_t m_chunk_size;
};

}  // namespace kv
