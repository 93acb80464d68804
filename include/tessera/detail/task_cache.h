// tessera/detail/task_cache.h — level 1 of the task allocator ([MxTasks] §5.2): the calling
// thread's LIFO free lists, one per size class. Internal; it sits in the public tree only so that
// make_task and the runtime's free path take a block without a function call. Levels 2 and 3
// (the node heaps, the OS) are in src/memory/task_allocator.*, which also refills and drains
// these lists.
//
// Thread-safety: a thread touches only its own cache; no atomics. The fast paths below never
// refill or drain: they report failure and the caller takes the out-of-line path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::detail {

/// A free block's header. Each list's length is kept in its top block (`depth`: the blocks from
/// this one down to the list's floor), so a pop writes no counter: it only moves the head.
struct free_block {
  free_block* next;   // the block below; nullptr only in a floor
  std::size_t depth;  // blocks from this one down to the floor, this one included
};

struct task_cache {
  /// 64, 128, ..., 4096 bytes: tasks, and resources up to a page (runtime_options::resources).
  static constexpr std::size_t class_count = 7;
  static constexpr std::size_t max_block = 4096;
  static constexpr std::size_t batch_blocks = 64;
  /// The inline push goes out of line when a list holds this many blocks (it gives a batch back
  /// to the node heap). Large enough that a worker's own churn stays on the worker: with a limit
  /// of two batches a worker with ~1,000 tasks in flight (YCSB's two batch slots of 500
  /// requests) would give back and refill batches all the time through the node heap it shares
  /// with the other workers, so a block freed on one worker would next be allocated on another,
  /// and the first touch of every new task would be a cache-line transfer between cores. Bounded
  /// still: 2,048 blocks per class, 128 KiB of 64-byte blocks to 8 MiB of 4 KiB ones.
  static constexpr std::size_t push_limit = 32 * batch_blocks;

  /// The depth of the closed floor: at least the push limit, so the inline push fails and takes
  /// the out-of-line path (one compare decides "class cached here, list not full, flush armed").
  static constexpr std::size_t refuse = std::size_t{1} << 62;

  /// The top of each list; every list ends in a floor, never in nullptr. Index class_count
  /// (new_block) is always the closed floor.
  free_block* head[class_count + 1] = {&closed_floor, &closed_floor, &closed_floor, &closed_floor,
                                       &closed_floor, &closed_floor, &closed_floor, &closed_floor};
  static_assert(class_count + 1 == 8, "one floor initializer per list");
  /// One block per class held in front of the list: a worker's completion path puts the block of
  /// the task that just finished here (task_cache_keep) and the next pop of its class takes it
  /// back, so a task that spawns one child per completion (a chain, half of a tree's
  /// allocations) never touches the list. A push and a pop of the list each carry the head and
  /// the head's link from one operation to the next through memory; the spare carries one word.
  /// Index new_block holds a sentinel, so no block of operator new is ever kept. Only worker
  /// threads keep blocks here: their loop flushes the cache when it ends (flush includes the
  /// spares), also when the exit flush was never armed.
  free_block* spare[class_count + 1] = {nullptr, nullptr, nullptr, nullptr,
                                        nullptr, nullptr, nullptr, &closed_floor};
  unsigned node = 0;
  bool registered = false;  // the thread-exit flush is armed (set by the first slow path)
  /// The thread-exit flush ran: later allocations and frees (a thread_local destroyed after it)
  /// go straight to the node heap (task_allocator.cpp). In the padding after `registered`: the
  /// cache's size, and its place in the thread's TLS block, stay as they were.
  bool closed = false;
  /// Classes this thread refilled out of line since its last flush (bit c: class c), for which
  /// task_allocator::refill_ahead takes a batch ahead. In the padding too.
  std::uint8_t refilled = 0;

  /// The bottoms of the lists: never handed out (their `next` is nullptr, which is how a pop sees
  /// an empty list) and never written. An armed thread's empty lists end at the open floor
  /// (depth 0); an unarmed thread's, and the new_block list, at the closed floor (depth
  /// `refuse`). Shared by all threads, read-only.
  static free_block open_floor;
  static free_block closed_floor;

  static constexpr unsigned size_class(std::size_t bytes) noexcept {
    return bytes <= 64     ? 0
           : bytes <= 128  ? 1
           : bytes <= 256  ? 2
           : bytes <= 512  ? 3
           : bytes <= 1024 ? 4
           : bytes <= 2048 ? 5
                           : 6;
  }
  static constexpr std::size_t class_bytes(unsigned c) noexcept { return std::size_t{64} << c; }
  /// What a task records of its block (task::m_block): the size class, or `new_block` for a
  /// block from operator new (the system allocator, or larger than `max_block`). The free path
  /// reads the class from the task instead of deriving it from the size.
  static constexpr std::uint8_t new_block = class_count;
  static constexpr std::uint8_t block_of(std::size_t bytes, bool system) noexcept {
    return system || bytes > max_block ? new_block : static_cast<std::uint8_t>(size_class(bytes));
  }
};

// Constant-initialized, trivially destructible: an access is a plain TLS offset, no guard and no
// wrapper call, also from inline code in other translation units. Defined in task_allocator.cpp.
extern constinit thread_local task_cache tl_task_cache;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// Sanitizer builds take the out-of-line paths, which poison free blocks (ASan).
inline constexpr bool task_cache_inline = false;
#else
inline constexpr bool task_cache_inline = true;
#endif

/// A block of class `c` from the calling thread's spare or list, or nullptr (both empty: refill
/// out of line). No counter: the length lives in the blocks.
inline void* task_cache_pop(unsigned c) noexcept {
  task_cache& tc = tl_task_cache;
  if (free_block* s = tc.spare[c]) {
    tc.spare[c] = nullptr;
    return s;
  }
  free_block* blk = tc.head[c];
  free_block* below = blk->next;
  if (below == nullptr) return nullptr;  // blk is a floor
  tc.head[c] = below;
  return blk;
}

/// Worker threads only (see task_cache::spare): keeps `p` (a block of class `c`, or new_block)
/// as the class's spare; false if the class has one already (or `c` is new_block).
inline bool task_cache_keep(void* p, unsigned c) noexcept {
  task_cache& tc = tl_task_cache;
  if (tc.spare[c] != nullptr) return false;
  tc.spare[c] = static_cast<free_block*>(p);
  return true;
}

/// Gives `p` (a block of class `c`, or new_block) to the calling thread's list; false when the
/// list is full, the thread-exit flush is not armed yet or `c` is new_block (all three read as a
/// full list, see task_cache::closed_floor; the caller takes the out-of-line path).
inline bool task_cache_push(void* p, unsigned c) noexcept {
  task_cache& tc = tl_task_cache;
  free_block* below = tc.head[c];
  const std::size_t depth = below->depth;
  if (depth >= task_cache::push_limit) return false;
  auto* blk = static_cast<free_block*>(p);
  blk->next = below;
  blk->depth = depth + 1;
  tc.head[c] = blk;
  return true;
}

}  // namespace tessera::detail
