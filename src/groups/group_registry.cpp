#include "groups/group_registry.h"

#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/futex.h"
#include "runtime/test_hooks.h"
#include "tessera/detail/task_access.h"

namespace tessera::detail {
namespace {

/// what() of an exception, or "unknown exception".
std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
  }
  return "unknown exception";
}

}  // namespace

group_registry::~group_registry() {
  // A group nobody waited for keeps its slot, and what its tasks threw, until now: say so, or
  // the exceptions are lost without a word.
  std::vector<std::exception_ptr> errors;
  const std::uint32_t open = m_table.never_closed(errors);
  if (open != 0 && m_report_unhandled) {
    std::fprintf(stderr,
                 "tessera: %u group%s never waited for (each group needs runtime::wait, "
                 "context::when_done or runtime::detach, or it keeps its slot until the runtime "
                 "ends)%s%s%s\n",
                 open, open == 1 ? " was" : "s were",
                 errors.empty() ? "" : "; their tasks threw, first: ",
                 errors.empty() ? "" : what_of(errors.front()).c_str(),
                 errors.size() > 1 ? " (and more)" : "");
  }
}

void group_registry::close_for_wait(group g) {
  if (!g.valid())
    throw std::logic_error("tessera: wait on group{}, which names no group (make one with "
                           "make_group())");
  if (!m_table.current(g))
    throw std::logic_error(
        "tessera: wait on a group that is no longer open (it was waited for already: a group "
        "allows one wait) or that another runtime made");
#if defined(TESSERA_DEBUG_CHECKS)
  if (auto* hook = test_hooks::group_wait_checked.load(std::memory_order_acquire)) hook();
#endif
  group_slot& s = m_table.slot(g);
  lock hold(s.mutex);
  // Again under the mutex (group_table::release bumps the generation under it): another wait
  // on g may have completed and released it since the check above, and the slot be reused.
  if (!s.waitable(g)) throw std::logic_error("tessera: a group can be waited for only once");
  s.closed = true;
}

void group_registry::wait_closed(group g) {
  group_slot& s = m_table.slot(g);
  // acquire: every write of the group's tasks happens-before we return (paired with the
  // completer's release store of `done`).
  while (s.done.load(std::memory_order_acquire) == 0) {
    futex_wait(s.done, 0);
  }
  std::exception_ptr error;
  {
    lock hold(s.mutex);
    error = s.error;
  }
  m_table.release(g);
  if (error) std::rethrow_exception(error);
}

void group_registry::close_with_continuation(group g, task* continuation, group joins,
                                             std::uint8_t slot) {
  if (!m_table.current(g))
    throw std::logic_error("tessera: when_done on a stale or unknown group");
  group_slot& s = m_table.slot(g);
  lock hold(s.mutex);
  // Before anything is touched: the continuation stays the caller's (to discard), and no group
  // holds a count for it. The generation again, under the mutex: see close_for_wait().
  if (!s.waitable(g)) throw std::logic_error("tessera: a group can be waited for only once");
  if (joins.valid() && !m_table.current(joins))
    throw std::logic_error("tessera: when_done with a continuation annotated with a stale or "
                           "completed group");
  // In the group it waits for, the continuation would wait for itself.
  if (joins == g)
    throw std::logic_error(
        "tessera: when_done(g, continuation) with the continuation in g (by its annotation, or "
        "as a task of g, whose continuation joins its group): it would wait for itself");
  // The continuation joins its group now, so an outer wait covers it.
  hdr(continuation).m_group = joins;
  if (joins.valid()) m_table.join(joins);
  hdr(continuation).m_epoch_slot = slot;
  s.closed = true;
  s.continuation = continuation;
}

void group_registry::close_detached(group g) {
  if (!g.valid()) throw std::logic_error("tessera: detach of group{}, which names no group");
  if (!m_table.current(g))
    throw std::logic_error(
        "tessera: detach of a group that is no longer open (waited for, continued with "
        "when_done or detached already) or that another runtime made");
  group_slot& s = m_table.slot(g);
  lock hold(s.mutex);
  if (!s.waitable(g))
    throw std::logic_error("tessera: detach of a group that was waited for (or detached) already");
  s.closed = true;
  s.detached = true;
}

bool group_registry::cancel(group g) {
  if (!g.valid()) throw std::logic_error("tessera: cancel of group{}, which names no group");
  if (!m_table.current(g)) return false;  // completed and released (or another runtime's)
  group_slot& s = m_table.slot(g);
  lock hold(s.mutex);
  // Again under the mutex (release changes the generation under it): not a group reusing the
  // slot. A completed group, or one cancelled before, has nothing left to cancel.
  if (s.generation.load(std::memory_order_relaxed) != g.generation || s.completed ||
      s.cancelled.load(std::memory_order_relaxed)) {
    return false;
  }
  s.cancelled.store(true, std::memory_order_relaxed);
  // Before the caller's notifications: a worker that acquires its attention word sees it.
  m_cancellations.fetch_add(1, std::memory_order_relaxed);
  return true;
}

task* group_registry::complete(group g) noexcept {
  group_slot& s = m_table.slot(g);
  task* cont;
  std::exception_ptr error;
  bool detached;
  {
    lock hold(s.mutex);
    cont = s.continuation;
    error = s.error;
    detached = s.detached;
    s.completed = true;  // cancel() finds nothing left to cancel from now on
    if (s.cancelled.load(std::memory_order_relaxed)) {
      m_cancellations.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  if (cont == nullptr && !detached) {
    error = nullptr;  // the waiter takes the slot's reference; ours must not outlive the wake-up
    // release: publish the group's work to the waiter; then wake it.
    s.done.store(1, std::memory_order_release);
    futex_wake(s.done, futex_wake_all);
    return nullptr;
  }
  m_table.release(g);
  if (cont == nullptr) {  // detached: nobody waits
    if (error) record_unhandled(std::move(error), "a task of a detached group");
    return nullptr;
  }
  // The exception moves on to the group the continuation belongs to (or to the unhandled list).
  if (error) {
    const group next = hdr(cont).m_group;
    if (next.valid()) {
      m_table.record_exception(next, std::move(error));
    } else {
      record_unhandled(std::move(error),
                       "a task of a group given to when_done, whose continuation is in no group,");
    }
  }
  return cont;
}

void group_registry::record_exception(group g, std::exception_ptr e) {
  if (g.valid()) {
    m_table.record_exception(g, std::move(e));
    return;
  }
  record_unhandled(std::move(e), "a task without a group");
}

void group_registry::record_unhandled(std::exception_ptr e, const char* whose) {
  if (m_report_unhandled && !m_unhandled_reported.exchange(true)) {
    std::fprintf(stderr,
                 "tessera: %s threw (%s); nobody waits for it, and the worker goes on. Further "
                 "ones are collected silently: runtime::take_unhandled_exceptions()\n",
                 whose, what_of(e).c_str());
  }
  lock hold(m_unhandled_mutex);
  m_unhandled.push_back(std::move(e));
}

std::vector<std::exception_ptr> group_registry::take_unhandled() {
  lock hold(m_unhandled_mutex);
  return std::exchange(m_unhandled, {});
}

}  // namespace tessera::detail
