// src/runtime/context_access.h — the runtime's one way into a tessera::context (internal).
//
// A context is the running task's view of its worker. The worker sets the running task; the
// guarded executor (sync/guarded_execution.h) opens and closes an optimistic read around a
// task's run; the loops' entry points (runtime.cpp) find the worker behind a context.
//
//   context_access::current(m_ctx) = t;                  // the worker, before t runs
//   context_access::begin_optimistic(m_ctx, &h, v);      // the executor, before a read
#pragma once

#include <cstdint>

#include "tessera/context.h"

namespace tessera::detail {

struct context_access {
  static context make(class runtime* rt, worker* w, std::uint16_t index) {
    return context(rt, w, index);
  }
  static task*& current(context& c) noexcept { return c.m_current; }
  static task* current(const context& c) noexcept { return c.m_current; }
  static worker& worker_of(const context& c) noexcept { return *c.m_worker; }
  static class runtime& runtime_of(const context& c) noexcept { return *c.m_runtime; }

  /// An optimistic read of `h` from version `v` starts: validate() checks against them.
  static void begin_optimistic(context& c, const resource_header* h, std::uint64_t v) noexcept {
    c.m_read_version = v;
    c.m_read_header = h;
    c.m_validating = true;
    c.m_validated = false;
  }
  static void end_optimistic(context& c) noexcept { c.m_validating = false; }
  /// validate() returned true during the run that just ended.
  static bool validated(const context& c) noexcept { return c.m_validated; }
  /// The running task is an optimistic reader whose run has not validated yet.
  static bool reading_unvalidated(const context& c) noexcept {
    return c.m_validating && !c.m_validated;
  }
};

}  // namespace tessera::detail
