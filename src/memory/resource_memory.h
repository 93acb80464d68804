// src/memory/resource_memory.h — the memory of a resource: its header and object, and the test
// that a pointer is one.
//
// A resource (runtime::make_resource) is a resource_header followed by the user's object, on a
// cache line of its own. The runtime places it (scheduler::allocate_resource picks its pool)
// and frees it through epoch-based reclamation (memory/reclamation.h).
//
//   resource_header* h = allocate_resource_memory(sizeof(T), resource_memory::pool);
//   is_live_resource(h->object());                                // true until freed
//   free_resource(h);                                             // object's destructor, memory
#pragma once

#include <cstddef>

#include "tessera/detail/resource_header.h"
#include "tessera/runtime.h"

namespace tessera::detail {

/// A header (default-constructed) with room for `bytes` of object after it, 64-aligned: a block
/// of the task allocator (chunks on huge pages) where `from` is resource_memory::pool and header
/// and object fit its largest class (4 KiB), else operator new's.
resource_header* allocate_resource_memory(std::size_t bytes, resource_memory from);
/// Runs the object's destructor (if one was registered) and frees the memory.
void free_resource(resource_header* h) noexcept;
/// `object` is one that make_resource made and that is not freed (the checks of retire, move
/// and, with TESSERA_DEBUG_CHECKS, of a spawn on a resource). Reads the header line before
/// `object` only where that cannot fault or trip a sanitizer: the pointer 64-aligned (every
/// resource is), the line addressable under ASan, and, for a pointer at the start of a page,
/// the page before it mapped.
bool is_live_resource(const void* object) noexcept;
/// The object after header `h`, with no member access: `h` may be a misaligned pointer that a
/// user's non-resource gave (resource_header::of), which UBSan rejects as `this`.
inline const void* object_of(const resource_header* h) noexcept {
  return reinterpret_cast<const char*>(h) + sizeof(resource_header);
}

}  // namespace tessera::detail
