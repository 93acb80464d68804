#include "memory/resource_memory.h"

#include <sys/mman.h>  // msync
#include <unistd.h>    // sysconf

#include <cstdint>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer's annotations (libtsan): is_live_resource's probe of memory it does not own.
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

#include "memory/task_allocator.h"
#include "runtime/test_hooks.h"

namespace tessera::detail {
namespace {
/// Resources (header + object) start on a cache line of their own.
constexpr std::align_val_t resource_alignment{64};
}  // namespace

resource_header* allocate_resource_memory(std::size_t bytes, resource_memory from) {
  const std::size_t total = sizeof(resource_header) + ((bytes + 63) & ~std::size_t{63});
  // A block of the task allocator is aligned to its class (chunks are 2 MiB-aligned, blocks
  // carved at multiples of their size), so to 64 at least.
  const std::uint8_t block = task_cache::block_of(total, from != resource_memory::pool);
  void* mem = block == task_cache::new_block ? ::operator new(total, resource_alignment)
                                             : task_allocator::allocate(total);
  auto* h = ::new (mem) resource_header();
  h->block = block;
  return h;
}

void free_resource(resource_header* h) noexcept {
  if (h->destroy != nullptr) h->destroy(h->object());
  // Volatile: a plain store just before the delete is dead to the optimizer and may be dropped
  // (a resource destroyed twice would then still look live to is_live_resource).
  *static_cast<volatile std::uint32_t*>(&h->magic) = 0;
#if defined(TESSERA_DEBUG_CHECKS)
  // Before the delete (the object's address is only an identity to the hook): from here on the
  // resource is dead to every check, as after the delete.
  if (auto* hook = test_hooks::resource_freed.load(std::memory_order_acquire)) hook(h->object());
#endif
  const std::uint8_t block = h->block;
  h->~resource_header();
  if (block == task_cache::new_block) {
    ::operator delete(static_cast<void*>(h), resource_alignment);
  } else {
    task_allocator::deallocate(h, task_cache::class_bytes(block));
  }
}

bool is_live_resource(const void* object) noexcept {
  const auto address = reinterpret_cast<std::uintptr_t>(object);
  if (address % alignof(resource_header) != 0 || address < sizeof(resource_header)) return false;
  const auto* h = reinterpret_cast<const resource_header*>(address - sizeof(resource_header));
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  // msync of an unmapped range fails with ENOMEM: the header's page is not there.
  if (address % page == 0 &&
      ::msync(reinterpret_cast<void*>(address - page), page, MS_ASYNC) != 0) {
    return false;
  }
#if defined(__SANITIZE_ADDRESS__)
  if (__asan_region_is_poisoned(const_cast<resource_header*>(h), sizeof(resource_header)) !=
      nullptr) {
    return false;
  }
#endif
#if defined(__SANITIZE_THREAD__)
  // A probe of memory the caller may not own (a freed resource, the heap before a plain object):
  // what it reads decides nothing but the error, so ThreadSanitizer is told not to report it as
  // a use after free or a race.
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  const bool live = h->magic == resource_header::live_magic;
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  return live;
#else
  return h->magic == resource_header::live_magic;
#endif
}

}  // namespace tessera::detail

namespace tessera {

std::size_t release_free_memory() noexcept { return detail::task_allocator::release_free_chunks(); }

void release_thread_cache() noexcept { detail::task_allocator::flush_thread_cache(); }

}  // namespace tessera
