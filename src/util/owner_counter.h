// src/util/owner_counter.h — a statistics counter written by one thread and read by any.
//
//   std::atomic<std::uint64_t> retries{0};
//   bump(retries);                                   // owner thread only
//   retries.load(std::memory_order_relaxed);         // anyone: a snapshot
#pragma once

#include <atomic>
#include <cstdint>

namespace tessera::detail {

/// Adds `n` to a counter only its owner writes: a relaxed load and store, no read-modify-write.
inline void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace tessera::detail
