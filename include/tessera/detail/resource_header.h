// tessera/detail/resource_header.h — the 64-byte line the runtime keeps before every resource.
// Internal: user code never reads or writes it. Layout is fixed so that the prefetcher can fetch
// it together with the object's first lines.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tessera {
enum class primitive : std::uint8_t;
}

namespace tessera::detail {

struct alignas(64) resource_header {
  /// Optimistic version. Even: stable. Odd: a writer is inside. Writers bump it twice.
  std::atomic<std::uint64_t> version{0};
  /// Latch word: spinlock (0/1) or reader/writer latch (bit 31 writer, low bits reader count).
  std::atomic<std::uint32_t> latch{0};
  /// Index of the pool that serializes tasks on this resource (scheduling modes).
  std::atomic<std::uint32_t> pool{0};
  /// The primitive selected for the resource (the hints', or the one they name):
  /// runtime::primitive_of.
  primitive prim{};
  /// The primitive the workers apply around its tasks (sync/guarded_execution.h) and route them
  /// by: `prim`, or primitive::none where the runtime needs none (an automatic choice in a
  /// runtime of one worker, where no two tasks ever run at once: select_primitive(hints, 1)).
  primitive applied{};
  std::uint8_t weight = 1;       ///< load weight charged to the pool (from the frequency hint)
  /// Where the memory came from, for freeing: the task allocator's size class of the block, or
  /// task_cache::new_block for operator new (memory/resource_memory.cpp).
  std::uint8_t block = 0;
  std::uint16_t alignment = 64;  ///< alignment of the object (for freeing)
  std::uint32_t object_size = 0;
  void (*destroy)(void*) = nullptr;  ///< runs the object's destructor
  resource_header* retired_next = nullptr;
  std::uint64_t retired_epoch = 0;
  /// Set by the first retire (a second one is an error, not a double free).
  std::atomic<bool> retired{false};
  /// live_magic while the resource exists (cleared when it is freed): with debug checks, a task
  /// annotated with annotate_resource on memory that make_resource did not make is an error at
  /// its spawn instead of a primitive and a pool read out of garbage.
  std::uint32_t magic = live_magic;
  static constexpr std::uint32_t live_magic = 0x7E55E7A5;

  static resource_header* of(const void* object) noexcept {
    return reinterpret_cast<resource_header*>(const_cast<char*>(static_cast<const char*>(object)) -
                                              sizeof(resource_header));
  }
  void* object() noexcept { return reinterpret_cast<char*>(this) + sizeof(resource_header); }
};
static_assert(sizeof(resource_header) == 64);
// A free block's link and length (task_cache.h's free_block) overwrite the first 16 bytes of a
// freed resource; its cleared magic must stay readable (is_live_resource).
static_assert(offsetof(resource_header, magic) >= 16);

}  // namespace tessera::detail
