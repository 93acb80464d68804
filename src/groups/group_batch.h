// src/groups/group_batch.h — a worker's batched changes to one group's pending count.
//
// A task spawned into the running task's own group adds +1, a completion -1; instead of one
// atomic read-modify-write each, the worker sums them here and applies the sum in one fetch_add
// when it flushes: before a task leaves the worker (remote push, pool hand-over, steal answer),
// every epoch_interval_tasks tasks, on switching to another group, and before idling. Why the
// count stays sound (a group cannot complete early): docs/architecture.md, "Group counts".
// While open, the batch counts as a task in flight of its epoch slot (a pseudo-task), so
// quiescence and epoch advancement wait for its flush, which may spawn a continuation.
//
//   if (g != batch.open_group()) { flush...; batch.open(g, slot, counters); }
//   batch.add(+1);
//   batch.flush(table, counters, [&](group done) { complete(done); });
//
// Owner-only: touched by its worker's thread alone.
#pragma once

#include <atomic>
#include <cstdint>

#include "groups/group_table.h"
#include "memory/epoch.h"
#include "tessera/group.h"
#include "util/compiler.h"

namespace tessera::detail {

class group_batch {
 public:
  /// The group whose count is batched (invalid: none).
  group open_group() const noexcept { return m_group; }
  /// Starts a batch for `g` (none open), counted as a pseudo-task in epoch slot `slot`.
  void open(group g, unsigned slot, epoch_counters& counters) noexcept {
    m_group = g;
    m_slot = static_cast<std::uint8_t>(slot);
    counters.count_spawn(m_slot);
  }
  TESSERA_ALWAYS_INLINE void add(int d) noexcept { m_delta += d; }
  /// Applies the batched change to the open group's count (if any) and closes the batch; calls
  /// `complete(g)` if that brought the count to zero. True if a batch was open.
  template <class Complete>
  bool flush(group_table& table, epoch_counters& counters, Complete&& complete) noexcept {
    if (!m_group.valid()) return false;
    const group g = m_group;
    const std::int64_t d = m_delta;
    m_group = group{};
    m_delta = 0;
    // acq_rel: releases the writes of the tasks completed in this batch to whoever completes the
    // group; the completer acquires everyone's (all updates are RMWs: one release sequence).
    if (d != 0 && table.slot(g).pending.fetch_add(d, std::memory_order_acq_rel) + d == 0) {
      complete(g);
    }
    counters.count_completion(m_slot);  // last: the continuation above is counted already
    return true;
  }

 private:
  group m_group{};
  std::int64_t m_delta = 0;
  std::uint8_t m_slot = 0;  // the epoch slot the open batch is counted in
};

}  // namespace tessera::detail
