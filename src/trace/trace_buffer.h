// src/trace/trace_buffer.h — one worker's ring of trace events (tessera/trace.h).
//
// Owner-only: the worker writes its ring with plain stores (no atomic, no lock, no allocation:
// the ring is allocated when the runtime starts). When it is full, a new event overwrites the
// oldest one; how many were overwritten is head - capacity. Nobody else reads the ring while
// the worker runs: the writer (trace_session::finish) reads it after the worker thread was
// joined, and the join orders every store of the worker before those reads.
//
//   trace_buffer b(1024);
//   const std::uint64_t t0 = trace_clock::now();
//   …
//   b.record({.start = t0, .end = trace_clock::now(), .kind = trace_kind::task});
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#else
#include <chrono>
#endif

namespace tessera::detail {

/// What an event stands for; the writer gives each its Chrome phase and name.
enum class trace_kind : std::uint8_t {
  task,            ///< a task ran from start to end (a complete span)
  forwarded,       ///< a task was passed to its resource's pool instead of running here
  pool_handed,     ///< `value` pools went from this worker (`worker`) to `peer`
  tasks_stolen,    ///< `value` queued tasks went from this worker to thief `peer`
  park,            ///< the worker went to sleep
  wake,            ///< the worker woke (`value`: 1 if by the safety timeout)
  epoch_advanced,  ///< this worker advanced the global epoch to `value`
  group_completed, ///< a group's last task finished here (`value`: the group's slot)
  queue_length,    ///< `value` tasks queued in this worker's pools, `peer` in its window
};

/// Ticks of a clock shared by all CPUs: the TSC on x86 (invariant on every CPU this runtime is
/// meant for; a read is a few nanoseconds, a tenth of a vDSO clock_gettime in a VM), the
/// steady clock elsewhere. The writer converts ticks to nanoseconds with a rate it measures
/// against the steady clock over the runtime's life.
struct trace_clock {
  static std::uint64_t now() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#else
    return static_cast<std::uint64_t>(
        std::chrono::steady_clock::now().time_since_epoch().count());
#endif
  }
};

struct trace_event {
  std::uint64_t start = 0;              ///< ticks
  std::uint64_t end = 0;                ///< ticks (task spans only)
  const void* type = nullptr;           ///< task: its std::type_info
  const void* resource = nullptr;       ///< task: the resource it ran on, or nullptr
  std::uint32_t value = 0;              ///< task: optimistic retries; else see trace_kind
  std::uint16_t peer = 0;               ///< see trace_kind
  trace_kind kind = trace_kind::task;
  std::uint8_t primitive = 0;           ///< task: tessera::primitive it ran under
};

class trace_buffer {
 public:
  /// `events` rounded up to a power of two, at least 16.
  explicit trace_buffer(std::size_t events) {
    std::size_t n = 16;
    while (n < events) n *= 2;
    m_events = std::make_unique<trace_event[]>(n);
    m_mask = n - 1;
  }
  /// Owner thread only.
  void record(const trace_event& e) noexcept { m_events[m_head++ & m_mask] = e; }
  /// Owner thread only: records `e` and returns its index, for close() and at() while it is
  /// still in the ring.
  std::uint64_t record_open(const trace_event& e) noexcept {
    m_events[m_head & m_mask] = e;
    return m_head++;
  }
  /// The event recorded at `index`, or nullptr if newer ones overwrote it.
  trace_event* at(std::uint64_t index) noexcept {
    return m_head - index <= capacity() ? &m_events[index & m_mask] : nullptr;
  }

  std::size_t capacity() const noexcept { return m_mask + 1; }
  /// Events recorded over the ring's life, kept or not.
  std::uint64_t recorded() const noexcept { return m_head; }
  std::uint64_t dropped() const noexcept {
    return m_head > capacity() ? m_head - capacity() : 0;
  }
  /// The events kept, oldest first: `f(const trace_event&)` for each. After the owner stopped.
  template <class F>
  void for_each(F&& f) const {
    for (std::uint64_t i = dropped(); i < m_head; ++i) f(m_events[i & m_mask]);
  }

 private:
  std::unique_ptr<trace_event[]> m_events;
  std::size_t m_mask = 0;
  std::uint64_t m_head = 0;
};

}  // namespace tessera::detail
