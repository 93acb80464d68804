// src/trace/trace_buffer.h — one worker's ring of trace events (tessera/trace.h).
//
// An event is 16 bytes, four to a cache line: 48 bits of clock ticks, the id of the task's type
// (trace_types), 48 bits of payload (a task's resource address, or an instant's value and peer)
// and 16 bits of kind, primitive and retries. Nothing is formatted, looked up by name or
// allocated while the worker runs: trace_session::finish does that after it stopped. A task
// span has no end of its own: it ends where the worker's next task, forwarded task or span_end
// event begins, so a task costs at most one clock read and one 16-byte store.
//
// A clock read is dear (a TSC read is ~11 ns of CPU on the 2-core AMD EPYC VM, a tenth of a
// YCSB task): while a worker's tasks are short, it reads the clock only every 2nd to 64th task
// (trace_clock_sampler) and records the others untimed; the writer spaces untimed events
// evenly between the timed ones around them, and marks their spans.
//
// The rest is kept off the task's path (task_begins, inlined into the worker's loop): the type's
// stamp comes from a one-entry cache (the last type seen; a miss, or a timed task, is a call), a
// task's optimistic retries are settled at the next task's start or the span's end (a compare
// with the executor's running count; a task that retried is rare), and a forwarded task marks
// its own event where it is forwarded (task_forwarded). So an untimed task is a compare with the
// cached type, a countdown, a compare of the retry count and a 16-byte store at a cursor.
//
// Owner-only: the worker writes its ring with plain stores (no atomic, no lock; the ring is
// allocated when the runtime starts). When it is full, a new event overwrites the oldest one;
// how many were overwritten is recorded() - capacity. Nobody else reads the ring while the
// worker runs: the writer (trace_session::finish) reads it after the worker thread was joined,
// and the join orders every store of the worker before those reads.
//
//   trace_buffer b(1024);
//   b.record(trace_event::instant(trace_clock::now(), trace_kind::park, 0));
//   b.task_begins(&typeid(t), trace_event::task_payload(resource, primitive), retries);
//   b.for_each([](const trace_event& e) { … });                  // after the owner stopped
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/compiler.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#else
#include <chrono>
#endif

namespace tessera::detail {

/// What an event stands for; the writer gives each its Chrome phase and name.
enum class trace_kind : std::uint8_t {
  task,            ///< a task began to run (a span until the next task, forwarded or span_end)
  forwarded,       ///< a task was passed to its resource's pool instead of running here
  span_end,        ///< the worker left its run of tasks: the open task span ends here
  pool_handed,     ///< `value` pools went from this worker (`worker`) to `peer`
  tasks_stolen,    ///< `value` queued tasks went from this worker to thief `peer`
  park,            ///< the worker went to sleep
  wake,            ///< the worker woke (`value`: 1 if by the safety timeout)
  epoch_advanced,  ///< this worker advanced the global epoch to `value`
  group_completed, ///< a group's last task finished here (`value`: the group's slot)
  queue_length,    ///< `value` tasks queued in this worker's pools, `peer` in its window
};

/// Ticks of a clock shared by all CPUs: the TSC on x86 (invariant on every CPU this runtime is
/// meant for; a read is 10-20 ns on AMD Zen, less on Intel, and not trapped by KVM), the steady
/// clock's nanoseconds elsewhere. The writer converts ticks to nanoseconds with a rate it
/// measures against the steady clock over the runtime's life.
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

/// One event. Ticks are kept modulo 2^48 (a day at 3 GHz; the writer restores the high bits,
/// walking back from the time it writes: a worker records at least a wake every park timeout,
/// so two of its events are never that far apart). Addresses keep their low 48 bits (user
/// space on x86-64 and AArch64; a tag in the top byte is dropped).
struct trace_event {
  static constexpr unsigned low_bits = 48;
  static constexpr std::uint64_t low_mask = (std::uint64_t{1} << low_bits) - 1;

  static constexpr std::uint64_t untimed_bit = std::uint64_t{1} << 63;

  std::uint64_t stamp = 0;    ///< ticks (low 48 bits) | type id << 48 (task, forwarded) |
                              ///< untimed_bit (a task that read no clock: ticks are 0)
  std::uint64_t payload = 0;  ///< see below (low 48 bits) | kind << 48 | primitive << 52 |
                              ///< retries << 56 (task)

  /// A task span's start: its type's id (trace_types), the resource it runs on (nullptr:
  /// none) and that resource's primitive.
  static trace_event task(std::uint64_t ticks, std::uint16_t type_id, const void* resource,
                          std::uint8_t primitive) noexcept {
    return {(ticks & low_mask) | type_bits(type_id), task_payload(resource, primitive)};
  }
  /// A task event's payload: the resource it runs on (nullptr: none) and its primitive.
  static std::uint64_t task_payload(const void* resource, std::uint8_t primitive) noexcept {
    return (reinterpret_cast<std::uintptr_t>(resource) & low_mask) |
           (std::uint64_t{primitive & 0xFu} << 52);
  }
  /// A task event's stamp without its ticks: the type's id in its place.
  static std::uint64_t type_bits(std::uint16_t type_id) noexcept {
    return std::uint64_t{type_id & 0x7FFFu} << 48;
  }
  /// Any other kind: `value` and `peer` as trace_kind says.
  static trace_event instant(std::uint64_t ticks, trace_kind kind, std::uint32_t value,
                             std::uint16_t peer = 0) noexcept {
    return {ticks & low_mask, std::uint64_t{value} | (std::uint64_t{peer} << 32) |
                                  (std::uint64_t{static_cast<std::uint8_t>(kind)} << 48)};
  }

  /// An instant that read no clock: the writer places it between the timed events around it.
  static trace_event untimed_instant(trace_kind kind, std::uint32_t value,
                                     std::uint16_t peer = 0) noexcept {
    trace_event e = instant(0, kind, value, peer);
    e.stamp |= untimed_bit;
    return e;
  }

  std::uint64_t ticks_low() const noexcept { return stamp & low_mask; }
  /// The same task event without its time: the writer places it between its neighbours.
  static trace_event untimed_task(std::uint16_t type_id, const void* resource,
                                  std::uint8_t primitive) noexcept {
    trace_event e = task(0, type_id, resource, primitive);
    e.stamp |= untimed_bit;
    return e;
  }
  bool timed() const noexcept { return (stamp & untimed_bit) == 0; }
  std::uint16_t type_id() const noexcept {
    return static_cast<std::uint16_t>((stamp >> 48) & 0x7FFFu);
  }
  trace_kind kind() const noexcept { return static_cast<trace_kind>((payload >> 48) & 0xFu); }
  std::uint8_t primitive() const noexcept { return (payload >> 52) & 0xFu; }
  std::uint8_t retries() const noexcept { return static_cast<std::uint8_t>(payload >> 56); }
  std::uint64_t resource() const noexcept { return payload & low_mask; }
  std::uint32_t value() const noexcept { return static_cast<std::uint32_t>(payload); }
  std::uint16_t peer() const noexcept { return static_cast<std::uint16_t>(payload >> 32); }

  void set_kind(trace_kind k) noexcept {
    payload = (payload & ~(std::uint64_t{0xF} << 48)) |
              (std::uint64_t{static_cast<std::uint8_t>(k)} << 48);
  }
  /// Optimistic retries, 255 for 255 or more (a read falls back to a latch long before).
  void set_retries(std::uint64_t r) noexcept {
    payload = (payload & ~(std::uint64_t{0xFF} << 56)) | ((r < 255 ? r : 255) << 56);
  }
};
static_assert(sizeof(trace_event) == 16);

/// When a worker's task reads the clock: every task while tasks are long, every 2nd, 4th, ...
/// 64th while they are short, so that reads stay about `short_ticks` or more apart (4096 ticks:
/// 1-2 us of TSC; a read, 11 ns on the 2-core AMD EPYC VM, is then under 1 % of the time).
/// Owner-only. The first task after the worker left its run of tasks (restart()) always reads:
/// idle time is never spread over tasks.
class trace_clock_sampler {
 public:
  /// Two reads closer than this: read half as often; more than 4x apart: twice as often.
  static constexpr std::uint64_t short_ticks = 4096;
  static constexpr std::uint32_t max_every = 64;

  explicit trace_clock_sampler(bool every_task) noexcept
      : m_max(every_task ? 1 : max_every) {}

  /// For the next task: true if it reads the clock (then call read()).
  bool due() noexcept { return --m_countdown == 0; }
  /// The next task's start was read at `ticks`.
  void read(std::uint64_t ticks) noexcept {
    if (m_last != 0) {
      const std::uint64_t elapsed = ticks - m_last;
      if (elapsed < short_ticks) {
        if (m_every < m_max) m_every *= 2;
      } else if (elapsed > 4 * short_ticks && m_every > 1) {
        m_every /= 2;
      }
    }
    m_last = ticks;
    m_countdown = m_every;
  }
  /// The worker left its run of tasks: the next task reads the clock, and the time until then
  /// is not a task's.
  void restart() noexcept {
    m_countdown = 1;
    m_last = 0;
  }
  std::uint32_t every() const noexcept { return m_every; }

 private:
  std::uint32_t m_countdown = 1;
  std::uint32_t m_every = 1;
  std::uint32_t m_max;
  std::uint64_t m_last = 0;  // ticks of the last read since restart(); 0: none
};

/// The task types a worker has seen, each with a 16-bit id: an open-addressed table of a fixed
/// size, owner-only, allocated once. id_of is a hash, a load and a compare for a type seen
/// before; the id is the type's slot, so the writer reads the type back from it. Id 0: no type
/// (the table is full, a case for programs with thousands of task types).
class trace_types {
 public:
  static constexpr std::size_t slots = 1024;

  std::uint16_t id_of(const void* type) noexcept {
    std::size_t i = slot_for(type);
    for (;;) {
      const void* there = m_types[i];
      if (there == type) [[likely]] return static_cast<std::uint16_t>(i);
      if (there == nullptr) return insert(i, type);
      i = next(i);
    }
  }
  /// The type of id `id`, or nullptr for 0. After the owner stopped.
  const void* type(std::uint16_t id) const noexcept {
    return id < slots ? m_types[id] : nullptr;
  }

 private:
  static std::size_t next(std::size_t i) noexcept {
    i = (i + 1) & (slots - 1);
    return i == 0 ? 1 : i;  // slot 0 stays empty: id 0 means "no type"
  }
  static std::size_t slot_for(const void* type) noexcept {
    const std::uint64_t h =
        (static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(type)) >> 3) *
        0x9E3779B97F4A7C15ull;
    const std::size_t i = static_cast<std::size_t>(h >> 54);  // 10 bits: slots
    return i == 0 ? 1 : i;
  }
  std::uint16_t insert(std::size_t i, const void* type) noexcept {
    if (m_used >= slots * 3 / 4) return 0;  // keeps probe runs short
    ++m_used;
    m_types[i] = type;
    return static_cast<std::uint16_t>(i);
  }
  static_assert(slots == std::size_t{1} << 10);

  const void* m_types[slots] = {};  // NOLINT(*-avoid-c-arrays): 8 KiB inside the ring's object
  std::size_t m_used = 0;
};

/// Cache-line aligned and padded: the owner writes its cursor at every task, and the rings of
/// two workers (or a ring and whatever the allocator puts beside it) must not share a line.
class alignas(64) trace_buffer {
 public:
  /// `events` rounded up to a power of two, at least 16; `time_every_task`: no sampling
  /// (trace_options::time_every_task).
  explicit trace_buffer(std::size_t events, bool time_every_task = false)
      : m_sampler(time_every_task) {
    std::size_t n = 16;
    while (n < events) n *= 2;
    m_events = std::make_unique<trace_event[]>(n);
    m_next = m_events.get();
    m_end = m_next + n;
  }
  trace_buffer(const trace_buffer&) = delete;
  trace_buffer& operator=(const trace_buffer&) = delete;

  /// Owner thread only. If this overwrites the open span's task event (a ring smaller than
  /// what one task's run records), the span is dropped with it: nothing marks a newer event.
  void record(const trace_event& e) noexcept {
    trace_event* slot = push();
    if (slot == m_task) [[unlikely]] m_task = nullptr;
    *slot = e;
  }

  /// Owner thread only: a task of type `type` (its std::type_info) begins, with payload
  /// trace_event::task_payload. `retries`: the worker's optimistic retries so far (a running
  /// count); those since the last task began are that task's. Its span is open until the next
  /// task begins, close_span() or task_forwarded().
  TESSERA_ALWAYS_INLINE void task_begins(const void* type, std::uint64_t payload,
                                         std::uint64_t retries) noexcept {
    if (retries != m_retries) [[unlikely]] settle_retries(retries);
    std::uint64_t stamp = m_type_stamp;  // untimed_bit | the last type's id
    if (type != m_type) [[unlikely]] stamp = type_stamp(type);
    if (m_sampler.due()) [[unlikely]] stamp = timed_stamp(stamp);
    trace_event* e = push();
    e->stamp = stamp;
    e->payload = payload;
    m_task = e;
  }
  /// Owner thread only: the task that began last was passed to its resource's pool instead of
  /// running here (another worker's span, if any): its event says so, and its span is closed.
  void task_forwarded() noexcept {
    if (m_task != nullptr) m_task->set_kind(trace_kind::forwarded);
    m_task = nullptr;
  }
  /// Owner thread only: the worker leaves its run of tasks; the open task span, if any, ends
  /// now (a span_end event at a clock read), and the next task reads the clock.
  void close_span(std::uint64_t retries) noexcept {
    if (retries != m_retries) [[unlikely]] settle_retries(retries);
    if (m_task != nullptr) {
      record(trace_event::instant(trace_clock::now(), trace_kind::span_end, 0));
      m_task = nullptr;
    }
    m_sampler.restart();
  }

  std::size_t capacity() const noexcept { return static_cast<std::size_t>(m_end - begin()); }
  /// Events recorded over the ring's life, kept or not.
  std::uint64_t recorded() const noexcept {
    return m_laps * capacity() + static_cast<std::uint64_t>(m_next - begin());
  }
  std::uint64_t dropped() const noexcept {
    return recorded() > capacity() ? recorded() - capacity() : 0;
  }
  /// The events kept, oldest first: `f(const trace_event&)` for each. After the owner stopped.
  template <class F>
  void for_each(F&& f) const {
    for (std::uint64_t i = 0, n = kept_count(); i < n; ++i) f(kept(i));
  }
  /// The i-th event kept (0: the oldest). After the owner stopped.
  const trace_event& kept(std::uint64_t i) const noexcept {
    return begin()[(dropped() + i) & (capacity() - 1)];
  }
  std::uint64_t kept_count() const noexcept { return recorded() - dropped(); }

  /// When the worker's tasks read the clock.
  trace_clock_sampler& sampler() noexcept { return m_sampler; }
  /// The worker's task types (the ids in its task events).
  trace_types& types() noexcept { return m_types; }
  const trace_types& types() const noexcept { return m_types; }

 private:
  const trace_event* begin() const noexcept { return m_events.get(); }
  /// The slot of the next event; the cursor goes round the ring.
  TESSERA_ALWAYS_INLINE trace_event* push() noexcept {
    trace_event* e = m_next;
    if (++m_next == m_end) [[unlikely]] {
      m_next = m_events.get();
      ++m_laps;
    }
    return e;
  }
  /// A type other than the last one: its id from the table, and the cache updated.
  TESSERA_NOINLINE std::uint64_t type_stamp(const void* type) noexcept {
    m_type = type;
    m_type_stamp = trace_event::untimed_bit | trace_event::type_bits(m_types.id_of(type));
    return m_type_stamp;
  }
  /// A task that reads the clock: `stamp` (an untimed one) with the ticks in place.
  TESSERA_NOINLINE std::uint64_t timed_stamp(std::uint64_t stamp) noexcept {
    const std::uint64_t now = trace_clock::now();
    m_sampler.read(now);
    return (stamp & ~(trace_event::untimed_bit | trace_event::low_mask)) |
           (now & trace_event::low_mask);
  }
  /// Optimistic retries happened since the last task began: they are that task's.
  TESSERA_NOINLINE void settle_retries(std::uint64_t retries) noexcept {
    if (m_task != nullptr) m_task->set_retries(retries - m_retries);
    m_retries = retries;
  }

  // Written at every task, on one line: the cursor, the type cache, the retry count, the sampler.
  trace_event* m_next = nullptr;  // where the next event goes
  trace_event* m_end = nullptr;   // the end of the ring
  const void* m_type = nullptr;   // the last task type seen (nullptr: none yet)
  std::uint64_t m_type_stamp = 0; // untimed_bit | m_type's id (trace_event::type_bits)
  std::uint64_t m_retries = 0;    // the worker's optimistic retries when its last task began
  trace_event* m_task = nullptr;  // the last task's event while its span is open, else nullptr
  trace_clock_sampler m_sampler;
  std::uint64_t m_laps = 0;       // times the cursor went round
  std::unique_ptr<trace_event[]> m_events;
  trace_types m_types;
};

}  // namespace tessera::detail
