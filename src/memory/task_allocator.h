// src/memory/task_allocator.h — the multi-level task allocator of [MxTasks] §5.2.
//
// Level 1: a per-thread LIFO free list per size class, used without any synchronization.
// Level 2: a per-NUMA-node heap per size class (mutex-protected), exchanging whole batches of
//          blocks with the thread caches.
// Level 3: the operating system: 2 MiB chunks, 2 MiB-aligned and advised for transparent huge
//          pages, placed on the node with libnuma (preferred, not bound: a full node lends pages
//          from another; a refusal is said once on stderr).
//
// A block freed on another thread goes to that thread's list; when a list grows past push_limit
// (32 batches), one batch goes back to the thread's node heap, so cross-thread frees never pile up
// memory on one thread without bound. A refill takes a batch from its node's heap, else from
// another node's (blocks freed by threads of that node), and only then new blocks from the OS, so
// they do not pile up on a node either. Blocks over the largest class (4 KiB) come from operator
// new. The allocator serves tasks and, by default, resources (runtime_options::resources).
//
//   void* p = tessera::detail::task_allocator::allocate(96);   // 128-byte class
//   tessera::detail::task_allocator::deallocate(p, 96);
//
// Thread-safety: allocate/deallocate may be called from any thread. A block may be freed on a
// thread other than the one that allocated it (the heap's mutex orders the hand-over).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#include "tessera/detail/task_cache.h"

namespace tessera::detail {

class task_allocator {
 public:
  static constexpr std::size_t class_count = task_cache::class_count;
  static constexpr std::size_t max_block = task_cache::max_block;
  static constexpr std::size_t batch_blocks = task_cache::batch_blocks;
  /// The most blocks of one class a thread's list holds before it gives a batch back.
  static constexpr std::size_t push_limit = task_cache::push_limit;
  static constexpr std::size_t chunk_bytes = std::size_t{2} << 20;

  /// The out-of-line paths: they refill and drain the thread cache and arm its exit flush
  /// (make_task pops from the cache inline first, see task_cache.h).
  static void* allocate(std::size_t bytes);
  static void deallocate(void* p, std::size_t bytes) noexcept;

  /// Frees a task's block, `block` being what task_cache::block_of said when it was allocated:
  /// a push on the thread cache inline, anything else out of line.
  static void release(void* p, std::uint8_t block) noexcept {
    if constexpr (task_cache_inline) {
      if (task_cache_push(p, block)) return;
    }
    release_slow(p, block);
  }
  static void release_slow(void* p, std::uint8_t block) noexcept;

  /// For each class the calling thread refilled before (task_cache::refilled) whose list holds
  /// less than a batch, takes the batch its next refill will need, from its node heap or new
  /// chunks, and holds it apart until the list runs dry. A worker calls it between tasks
  /// (periodic()): the first touch of a new chunk, a 2 MiB page the kernel zeroes (~0.1 ms,
  /// milliseconds on a VM whose host takes free memory back), and the heap's mutex then come
  /// there, not in a task's allocation, which may hold a latch others wait for (a tree's split
  /// makes its new node under the leaf's). Never throws: out of memory, the allocation that needs
  /// the block reports it.
  static void refill_ahead() noexcept;
  /// The NUMA node this thread's refills come from (workers call it once at start).
  static void set_thread_node(unsigned node) noexcept;

  /// Blocks currently cached by the calling thread (all classes); for tests.
  static std::size_t thread_cached_blocks() noexcept;
  /// Returns the calling thread's cached blocks to its node heap.
  static void flush_thread_cache() noexcept;
  /// Asks the kernel to take the pages of [p, p + bytes) from `node` while it has free memory
  /// there (MPOL_PREFERRED): 0, or the errno of the refusal (EINVAL for a node that is not there
  /// or that the process's cpuset leaves out). The heaps call it for every chunk on a machine of
  /// several nodes; exposed for tests.
  static int place_on_node(void* p, std::size_t bytes, unsigned node) noexcept;
  /// Returns to the operating system every chunk whose blocks are all free in the node heaps,
  /// after flushing the calling thread's cache into them; blocks that other threads cache (up
  /// to push_limit per class and thread) or use keep their chunks. Returns the bytes unmapped.
  /// Thread-safe; holds each heap's mutex only to take its batches out and to give them back
  /// (the sort of the free blocks is outside it).
  static std::size_t release_free_chunks() noexcept;
  /// Bytes obtained from the operating system and not returned (all nodes); for tests.
  static std::size_t os_bytes() noexcept;

  static constexpr unsigned size_class(std::size_t bytes) noexcept {
    return task_cache::size_class(bytes);
  }
  static constexpr std::size_t class_bytes(unsigned c) noexcept {
    return task_cache::class_bytes(c);
  }
};

}  // namespace tessera::detail
