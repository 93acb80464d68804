// src/runtime/pool.h — a task pool: the unit of serialization and of stealing.
//
// Every worker starts with `pools_per_worker` pools; pool 0 of each worker is its home pool
// (tasks without a resource that serializes them, and tasks aimed at the worker), the others
// hold the resources that are serialized by scheduling ([MxKernel]'s synchronization domains).
// Per priority a pool has an owner-only FIFO (`local`) and a wait-free inbox for every other
// thread. A pool is run by exactly one worker at a time, its owner; ownership moves only between
// two tasks, under the receiving worker's hand-over mutex, so tasks of a pool never overlap even
// while pools are stolen.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "runtime/local_queue.h"
#include "runtime/mpsc_queue.h"
#include "tessera/ids.h"

namespace tessera::detail {

struct alignas(64) pool {
  // ---- owner-only -----------------------------------------------------------------------------
  std::array<local_queue, priority_count> local;
  std::uint32_t index = 0;    ///< global pool index
  std::uint16_t home_of = 0;  ///< the worker this pool was created for
  bool is_home = false;
  std::size_t queued() const noexcept {
    std::size_t n = 0;
    for (auto& q : local) n += q.size();
    return n;
  }

  // ---- shared ---------------------------------------------------------------------------------
  /// The worker running this pool. Written by the giving worker before the hand-over mutex is
  /// released; read relaxed by spawners (a stale value only costs a wake-up of the old owner,
  /// which the hand-over covers: see worker::adopt_incoming()).
  alignas(64) std::atomic<std::uint32_t> owner{0};
  /// The worker that has this pool in its list (adopted it), or `none`. Written only by that
  /// worker (on adopting, and before handing the pool over); read relaxed by a spawner comparing
  /// it with its own index, which is exact for the spawner itself: only it wrote that value.
  static constexpr std::uint32_t none = UINT32_MAX;
  std::atomic<std::uint32_t> held_by{none};
  /// Sum of the weights of the resources placed here (placement spreads load).
  std::atomic<std::uint32_t> weight{0};
  std::array<mpsc_queue, priority_count> inbox;

  bool inbox_maybe_nonempty() const noexcept {
    for (auto& q : inbox) {
      if (q.maybe_nonempty()) return true;
    }
    return false;
  }
};

}  // namespace tessera::detail
