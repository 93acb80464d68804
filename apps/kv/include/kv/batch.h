#pragma once
// kv/batch.h — what the drivers run: a batch is a count of operations and an index function
// called once per index in [0, count). The drivers hand the indices out in chunks of
// `default_chunk_size` (500, as in the paper's evaluation); the function maps an index to an
// operation (a YCSB request, an insert of key i, ...) and performs it.
//
// Invariant: each index is passed exactly once per run. The function is called concurrently
// from all workers, so it must be safe to call concurrently (per-worker state can be indexed
// by the worker_id argument, which lies in [0, threads)).
//
//   std::vector<std::uint64_t> found(threads);
//   driver.run(ops.size(), [&](std::size_t i, kv::worker_id w) {
//     if (tree.lookup(ops[i])) ++found[kv::to_index(w)];   // no sharing between workers
//   });
//   driver.run(n, [&](std::size_t i) { tree.insert(i, i); });  // the worker id is optional

#include <concepts>
#include <cstddef>

namespace kv {

inline constexpr std::size_t default_chunk_size = 500;

/// The worker running a call, numbered from 0 within one driver.
enum class worker_id : unsigned {};

[[nodiscard]] constexpr unsigned to_index(worker_id w) noexcept { return static_cast<unsigned>(w); }

/// Called as fn(index, worker) or fn(index).
template <class F>
concept index_function =
    std::invocable<F&, std::size_t, worker_id> || std::invocable<F&, std::size_t>;

template <index_function F>
inline void invoke_index(F& fn, std::size_t index, worker_id w) {
  if constexpr (std::invocable<F&, std::size_t, worker_id>) {
    fn(index, w);
  } else {
    fn(index);
  }
}

}  // namespace kv
