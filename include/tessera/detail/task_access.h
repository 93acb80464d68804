// tessera/detail/task_access.h — the runtime's one way into a task's header (internal).
//
// Every task carries a detail::task_header (queue link, annotations, allocator and epoch
// bookkeeping) in its private base detail::task_state. The runtime's queues, workers and
// scheduler read and write it through hdr(t); nothing outside the library needs it.
//
//   detail::hdr(t).m_next.store(nullptr, std::memory_order_relaxed);
//   if (detail::hdr(t).m_group.valid()) ...
#pragma once

#include "tessera/task.h"

namespace tessera::detail {

struct task_access {
  static task_header& of(task* t) noexcept { return t->m_header; }
  static const task_header& of(const task* t) noexcept { return t->m_header; }
};

/// The header of `t`.
inline task_header& hdr(task* t) noexcept { return task_access::of(t); }
inline const task_header& hdr(const task* t) noexcept { return task_access::of(t); }

}  // namespace tessera::detail
