// src/runtime/task_lifetime.h — the end of a task's life: its destructor, then its block.
//
//   destroy_task(t);   // t is the runtime's (spawned, or returned to it) and done
#pragma once

#include <cstdint>

#include "memory/task_allocator.h"
#include "tessera/detail/task_access.h"
#include "tessera/detail/task_destroyers.h"
#include "tessera/task.h"
#include "util/compiler.h"

namespace tessera::detail {

/// Runs the task's destructor, if its type has one to run, and frees its block (inline: once
/// per task).
TESSERA_ALWAYS_INLINE void destroy_task(task* t) noexcept {
  const std::uint8_t block = hdr(t).m_block;
  run_task_destructor(t, hdr(t).m_destroyer);
  task_allocator::release(t, block);
}

}  // namespace tessera::detail
