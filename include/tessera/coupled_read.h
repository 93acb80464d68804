// tessera/coupled_read.h — reading a resource the running task is not annotated with, as
// optimistic lock coupling does: take the resource's version, read, check the version.
//
// A task runs under the primitive of the one resource it is annotated with. A traversal that
// would rather read the next object in the same run (a tree's upper levels, which stay in the
// caches: a trip through the queue and the prefetch window costs more than the read) can do so
// where the next object's primitive keeps a version: optimistic_latch and optimistic_scheduled
// (whose writers make the version odd while they write), and none: as applied in a runtime of one
// worker, nothing overlaps the running task, and a resource made with primitive::none named (or
// isolation::none) was declared to need no synchronization, so its reads count as they are, as
// its tasks' do. Elsewhere (spinlock, rwlatch, scheduling) the
// reader cannot be told whether a writer overlapped it, so coupled_begin refuses, and the task
// takes the ordinary way: it annotates itself with the object and returns itself.
//
//   // inside execute, after ctx.validate() succeeded for the task's own node n:
//   node* c = child_of(n, k);
//   if (const auto v = tessera::coupled_begin(c)) {
//     node* next = child_of(c, k);                    // racy_load reads only
//     if (tessera::coupled_valid(c, *v)) { /* next is what c held at version *v */ }
//   }
//   annotate_resource(c, tessera::access::read);      // the ordinary way
//   return this;
//
// The object must be a resource (runtime::make_resource) that stays allocated while it is read
// (a retired resource is freed only after every task that could see it ended, so one reached
// through a validated pointer does). Reads between the two calls go through racy_load
// (optimistic.h); their result may be torn and counts only when coupled_valid returns true.
// Memory ordering: coupled_begin loads the version with acquire (the reads after it see at least
// the writes of that version); coupled_valid orders the reads before it ahead of its re-read of
// the version (tessera/detail/version_fence.h, the fence the runtime's own version protocol
// uses). A writer's odd version is refused at once
// (no waiting).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "tessera/detail/resource_header.h"
#include "tessera/detail/version_fence.h"
#include "tessera/resource.h"

namespace tessera {

/// A version of `object` to check a read against with coupled_valid, or nullopt where no
/// coupled read is possible now (a primitive without a version, or a writer inside).
[[nodiscard]] inline std::optional<std::uint64_t> coupled_begin(const void* object) noexcept {
  const detail::resource_header& h = *detail::resource_header::of(object);
  switch (h.applied) {
    case primitive::none: return std::uint64_t{0};  // nothing to overlap (see above)
    case primitive::optimistic_latch:
    case primitive::optimistic_scheduled: {
      // acquire: the reads that follow see at least the writes that led to this version.
      const std::uint64_t v = h.version.load(std::memory_order_acquire);
      if ((v & 1) != 0) return std::nullopt;  // a writer is inside
      return v;
    }
    default: return std::nullopt;
  }
}

/// True if nothing was written to `object` since coupled_begin returned `version`.
[[nodiscard]] inline bool coupled_valid(const void* object, std::uint64_t version) noexcept {
  const detail::resource_header& h = *detail::resource_header::of(object);
  if (h.applied == primitive::none) return true;
  detail::version_acquire_fence();  // the data reads before it, ahead of the re-read
  return h.version.load(std::memory_order_relaxed) == version;
}

}  // namespace tessera
