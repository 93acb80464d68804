#include "sync/guarded_execution.h"

#include <cstring>
#include <stdexcept>

#include "runtime/task_lifetime.h"

namespace tessera::detail {

// Out of line: the common case (a read that validates) stays small in the worker's loop.
TESSERA_NOINLINE void guarded_executor::undo_torn_run(task* t, const guarded_run& r,
                                                      bool validates_first) noexcept {
  // What the torn run threw is dropped (task.h), and the task is put back as it was
  // dequeued (one that validates first is as it was). A new follow-up it returned is freed: it
  // was never spawned, and the rerun makes its own.
  if (r.outcome == run_outcome::failed) m_error = nullptr;
  if (r.follow != nullptr && r.follow != t) destroy_task(r.follow);
  if (!validates_first) restore_snapshot(t);
  bump(m_retries);
}

TESSERA_NOINLINE guarded_run guarded_executor::reread(task* t, resource_header& h,
                                                      bool validates_first) {
  // The inline run was the first (or found a writer inside and did not run).
  guarded_run r{run_outcome::done};
  for (unsigned run = 1; run < optimistic_runs; ++run) {
    const std::uint64_t v = begin_read(h);
    if (try_read(t, h, v, validates_first, r) == attempt::final) return r;
  }
  return read_pessimistically(t, h);
}

TESSERA_NOINLINE guarded_run guarded_executor::read_pessimistically(task* t, resource_header& h) {
  bump(m_fallbacks);
  // No read is open: validate() says true, writing() false (the task reads).
  if (h.applied == primitive::optimistic_latch) {
    // The latch taken as a writer takes it, the version left alone: this run competes with the
    // writers on their terms (held shared, it would wait behind every writer that queued, since
    // a waiting writer keeps new readers out), and optimistic readers beside it are not torn.
    // acquire/release as for a writer.
    write_lock(h);
    guarded_run r = run_plain(t);
    write_unlock(h);
    return r;
  }
  // optimistic_scheduled: writers run only on the owner of the resource's pool.
  if (owns_pool_of(h)) return run_plain(t);
  return {run_outcome::forwarded};
}

void guarded_executor::take_snapshot(const task* t) {
  if (!m_snapshot) m_snapshot = std::make_unique<std::byte[]>(65536);
  std::memcpy(m_snapshot.get(), static_cast<const void*>(t), copied_bytes(t));
}

void guarded_executor::restore_snapshot(task* t) noexcept {
  std::memcpy(static_cast<void*>(t), m_snapshot.get(), copied_bytes(t));
}

#if defined(TESSERA_DEBUG_CHECKS)
bool guarded_executor::broke_promise(task* t, guarded_run& r) {
  if (!m_changed_early && (context_access::validated(m_ctx) || !changed_since_snapshot(t))) {
    return false;
  }
  // Reported like a throw from the task (its group's waiter gets it).
  if (r.follow != nullptr && r.follow != t) destroy_task(r.follow);  // never spawned
  r.outcome = run_outcome::failed;
  r.follow = nullptr;
  m_error = std::make_exception_ptr(std::logic_error(
      "tessera: a task whose type declares validates_first changed (itself, its annotations) "
      "before context::validate() returned true; a retried optimistic read would rerun it "
      "changed (see tessera/task.h)"));
  return true;
}

void guarded_executor::note_validate(const task* t) noexcept {
  // Only a running optimistic reader calls it (validate() returns first otherwise).
  const bool promised = (hdr(t).m_bytes & task_header::validates_first_bit) != 0;
  if (promised && !context_access::validated(m_ctx) && changed_since_snapshot(t)) {
    m_changed_early = true;
  }
}

bool guarded_executor::changed_since_snapshot(const task* t) const noexcept {
  return std::memcmp(m_snapshot.get(), static_cast<const void*>(t), copied_bytes(t)) != 0;
}
#endif

}  // namespace tessera::detail
