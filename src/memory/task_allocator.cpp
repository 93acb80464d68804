#include "memory/task_allocator.h"

#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <utility>
#include <vector>

#include "util/mutex.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define TESSERA_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define TESSERA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define TESSERA_POISON(p, n) ((void)(p), (void)(n))
#define TESSERA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace tessera::detail {
namespace {

/// A batch: an intrusive list of up to batch_blocks blocks, linked and numbered as the bottom of a
/// thread's list (the tail's `next` is nullptr and its `depth` 1, the head's `depth` is `count`):
/// installed in an empty list, it needs only its tail linked to the floor.
struct batch {
  free_block* head = nullptr;
  free_block* tail = nullptr;
  std::size_t count = 0;

  /// Puts `blk` (unpoisoned header) on top of the batch.
  void push(free_block* blk) noexcept {
    blk->next = head;
    blk->depth = ++count;
    head = blk;
    if (tail == nullptr) tail = blk;
  }
};

constexpr unsigned max_nodes = 64;

/// Set when a placement was refused: said once on stderr, and no chunk is placed after it (each
/// refusal would be one system call and the same answer). Relaxed: a flag, nothing it orders.
std::atomic<bool> placement_refused{false};

/// Asks the kernel to place a new chunk on `node` (before anything touches it) on a machine with
/// more than one node. A refusal costs nothing but the placement.
void place_chunk(void* p, unsigned node) noexcept {
  if (placement_refused.load(std::memory_order_relaxed)) return;
  static const bool several_nodes = numa_available() >= 0 && numa_max_node() > 0;
  if (!several_nodes) return;
  if (const int err = task_allocator::place_on_node(p, task_allocator::chunk_bytes, node);
      err != 0 && !placement_refused.exchange(true, std::memory_order_relaxed)) {
    std::fprintf(stderr,
                 "tessera: could not place task memory on NUMA node %u (mbind: %s); the kernel "
                 "places it from now on\n",
                 node, std::strerror(err));
  }
}

struct node_heap {
  detail::mutex mutex;
  std::vector<batch> batches[task_allocator::class_count] GUARDED_BY(mutex);
  /// batches[c].size(), written under the mutex: lets a refill on another node skip this heap
  /// without taking its mutex (relaxed: the mutex orders the batch itself).
  std::atomic<std::size_t> held[task_allocator::class_count] = {};
  unsigned node = 0;
  std::atomic<std::size_t> os_bytes{0};

  char* chunk_cursor[task_allocator::class_count] GUARDED_BY(mutex) = {};
  char* chunk_end[task_allocator::class_count] GUARDED_BY(mutex) = {};

  /// A chunk aligned to its size (a huge page), advised MADV_HUGEPAGE, placed before its first
  /// touch. Mapped twice as long and trimmed: mmap aligns to 4 KiB only.
  static char* os_chunk(unsigned node, std::atomic<std::size_t>& counter) {
    constexpr std::size_t bytes = task_allocator::chunk_bytes;
    void* p = ::mmap(nullptr, 2 * bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t aligned = (start + bytes - 1) & ~(std::uintptr_t{bytes} - 1);
    if (aligned != start) ::munmap(p, aligned - start);
    ::munmap(reinterpret_cast<void*>(aligned + bytes), start + bytes - aligned);
    auto* chunk = reinterpret_cast<char*>(aligned);
    // Transparent huge pages where the kernel has them ("madvise" or "always" in
    // /sys/kernel/mm/transparent_hugepage/enabled): one TLB entry for 2 MiB of tasks or
    // resources. A tree's nodes are resources, and a lookup's prefetch of a node that misses the
    // TLB waits for a page walk first (docs/performance-notes.md, "Resource memory on huge
    // pages"). A kernel without them says EINVAL: the chunk stays on 4 KiB pages.
    (void)::madvise(chunk, bytes, MADV_HUGEPAGE);
    place_chunk(chunk, node);
    counter.fetch_add(bytes, std::memory_order_relaxed);
    return chunk;
  }

  void give(unsigned c, const batch& b) noexcept REQUIRES(mutex) {
    try {
      batches[c].push_back(b);
    } catch (...) {
      // Out of memory for the vector: drop the blocks (they stay mapped; no corruption).
    }
    held[c].store(batches[c].size(), std::memory_order_relaxed);
  }

  /// A held batch, or an empty one.
  batch take_held(unsigned c) noexcept REQUIRES(mutex) {
    auto& list = batches[c];
    if (list.empty()) return {};
    batch b = list.back();
    list.pop_back();
    held[c].store(list.size(), std::memory_order_relaxed);
    return b;
  }

  /// Reserves the memory of one new batch of class `c` from this heap's chunk of that class
  /// (mapping a new chunk first when it is used up): `batch_blocks` blocks, which never straddle
  /// two chunks (a chunk holds a whole number of batches of every class). Nothing is touched
  /// here: the caller carves the range after it let go of the mutex (carve), so that the first
  /// touch of a fresh chunk (a huge page zeroed by the kernel, milliseconds on some VMs) never
  /// holds up another thread's refill.
  char* reserve(unsigned c) REQUIRES(mutex) {
    const std::size_t bytes = task_allocator::batch_blocks * task_allocator::class_bytes(c);
    if (chunk_cursor[c] == chunk_end[c]) {
      chunk_cursor[c] = os_chunk(node, os_bytes);
      chunk_end[c] = chunk_cursor[c] + task_allocator::chunk_bytes;
    }
    char* first = chunk_cursor[c];
    chunk_cursor[c] += bytes;
    return first;
  }
};
static_assert(task_allocator::chunk_bytes %
                      (task_allocator::batch_blocks * task_allocator::max_block) ==
                  0,
              "a chunk holds whole batches of every class");

/// A batch of the `batch_blocks` blocks of class `c` starting at `first` (memory reserve()
/// handed to this thread alone). Blocks come back poisoned (under ASan), as every block of a
/// batch from a heap: an overrun into a fresh block not yet handed out is reported.
batch carve(unsigned c, char* first) noexcept {
  const std::size_t size = task_allocator::class_bytes(c);
  batch b;
  for (std::size_t i = 0; i < task_allocator::batch_blocks; ++i) {
    auto* blk = reinterpret_cast<free_block*>(first + i * size);
    b.push(blk);
    TESSERA_POISON(blk, size);
  }
  return b;
}

struct heaps {
  std::array<node_heap, max_nodes> nodes;
  /// 1 + the highest node a thread was set to (task_allocator::set_thread_node).
  std::atomic<unsigned> nodes_used{1};
  heaps() {
    for (unsigned i = 0; i < max_nodes; ++i) nodes[i].node = i;
  }
};

heaps& global_heaps() {
  // Never destroyed: thread caches of threads that outlive main's statics give blocks back to it.
  static heaps* h = new heaps();
  return *h;
}

bool is_floor(const free_block* b) noexcept {
  return b == &task_cache::open_floor || b == &task_cache::closed_floor;
}

/// The floor an empty list of this thread ends at.
free_block* floor_of(const task_cache& tc) noexcept {
  return tc.registered ? &task_cache::open_floor : &task_cache::closed_floor;
}

/// The length of the list whose top is `top` (a floor or a poisoned free block).
std::size_t depth_of(free_block* top) noexcept {
  if (is_floor(top)) return top->depth;
  TESSERA_UNPOISON(top, sizeof(free_block));
  const std::size_t d = top->depth;
  TESSERA_POISON(top, sizeof(free_block));
  return d;
}

/// Puts `blk` on top of list `c` (out of line: poisoned, as every cached block under ASan) and
/// returns the list's new length.
std::size_t put_on_list(task_cache& tc, unsigned c, free_block* blk) noexcept {
  const std::size_t depth = depth_of(tc.head[c]) + 1;
  TESSERA_UNPOISON(blk, sizeof(free_block));  // an object smaller than the header (hand_out)
  blk->next = tc.head[c];
  blk->depth = depth;
  TESSERA_POISON(blk, task_allocator::class_bytes(c));
  tc.head[c] = blk;
  return depth;
}

/// Moves up to `n` blocks from the top of list `c` into a batch (poisoned, as in the heap).
batch take_from_list(task_cache& tc, unsigned c, std::size_t n) noexcept {
  batch b;
  while (b.count < n && !is_floor(tc.head[c])) {
    free_block* blk = tc.head[c];
    TESSERA_UNPOISON(blk, sizeof(free_block));
    tc.head[c] = blk->next;
    b.push(blk);
    TESSERA_POISON(blk, task_allocator::class_bytes(c));
  }
  return b;
}

/// A batch for a refill of class `c` on `node`: one its heap holds; else one another node's heap
/// holds; else new blocks from `node`'s chunks. Blocks freed by a thread of another node go to
/// that node's heap: with a producer here and a consumer there, as with tasks made on one node
/// and run on another, this node's blocks collect there, and a refill that looked only at its
/// own heap would take new memory from the OS for as long as that goes on (123 MiB after 2,000
/// rounds of 1,000 blocks in flight): so it takes them back from there.
batch take_batch(unsigned c, unsigned node) {
  heaps& hs = global_heaps();
  {
    node_heap& own = hs.nodes[node];
    detail::lock hold(own.mutex);
    if (batch b = own.take_held(c); b.head != nullptr) return b;
  }
  const unsigned used = hs.nodes_used.load(std::memory_order_relaxed);
  for (unsigned i = 0; i < used; ++i) {
    node_heap& other = hs.nodes[i];
    if (i == node || other.held[c].load(std::memory_order_relaxed) == 0) continue;
    detail::lock hold(other.mutex);
    if (batch b = other.take_held(c); b.head != nullptr) return b;
  }
  node_heap& own = hs.nodes[node];
  char* first = nullptr;
  {
    detail::lock hold(own.mutex);
    if (batch b = own.take_held(c); b.head != nullptr) return b;  // given back meanwhile
    first = own.reserve(c);
  }
  return carve(c, first);
}

/// Per class, a batch the calling thread took ahead (task_allocator::refill_ahead), held apart
/// from its list until the list runs dry: the list's own blocks, freed here and warm in this
/// core's cache, go first. Trivially destructible; given back by flush().
constinit thread_local batch tl_reserve[task_allocator::class_count];

/// Returns every block of the calling thread's cache (lists, spares and reserves) to its node
/// heap. Nothing is taken ahead again until the thread's next refill (a flush before
/// release_free_chunks, MEMORY PURGE's, would otherwise see the next periodic() take a batch
/// back and keep its chunk mapped).
void flush(task_cache& tc) noexcept {
  tc.refilled = 0;
  auto& heap = global_heaps().nodes[tc.node];
  detail::lock hold(heap.mutex);
  for (unsigned c = 0; c < task_allocator::class_count; ++c) {
    if (tl_reserve[c].head != nullptr) heap.give(c, std::exchange(tl_reserve[c], batch{}));
    if (free_block* s = tc.spare[c]) {  // onto the list's top, flushed with it
      tc.spare[c] = nullptr;
      put_on_list(tc, c, s);
    }
    while (!is_floor(tc.head[c])) heap.give(c, take_from_list(tc, c, task_allocator::batch_blocks));
    tc.head[c] = floor_of(tc);
  }
}

struct cache_owner {
  ~cache_owner() {
    task_cache& tc = tl_task_cache;
    flush(tc);
    // A thread_local destroyed after this flush (one constructed before the thread's first slow
    // path) may still make or free a task: from now on blocks go straight to and from the node
    // heap. On the flushed lists, which nothing flushes again, they would be lost (2 MiB over
    // 40,000 such threads).
    tc.closed = true;
    // Closed floors: the inline push refuses and the inline pop finds nothing (no spares: this
    // is not a worker, whose loop flushed them and keeps none after it ended).
    for (free_block*& h : tc.head) h = &task_cache::closed_floor;
  }
};

/// Under ASan, a block of class `c` handed out for `bytes` is addressable up to `bytes` and
/// poisoned after it, as a malloc'd object's tail is: a task that writes past its own object
/// into the rest of the block is reported.
void hand_out(free_block* blk, std::size_t bytes, unsigned c) noexcept {
  TESSERA_POISON(blk, task_allocator::class_bytes(c));
  TESSERA_UNPOISON(blk, bytes);
}

/// allocate() after the thread's exit flush: one block of a batch, the rest back to the heap.
void* allocate_after_exit(unsigned c, unsigned node, std::size_t bytes) {
  const batch b = take_batch(c, node);
  free_block* blk = b.head;
  TESSERA_UNPOISON(blk, sizeof(free_block));
  if (b.count > 1) {
    node_heap& heap = global_heaps().nodes[node];
    detail::lock hold(heap.mutex);
    heap.give(c, batch{blk->next, b.tail, b.count - 1});
  }
  hand_out(blk, bytes, c);
  return blk;
}

/// deallocate() after the thread's exit flush: a batch of one, to the heap.
void deallocate_after_exit(free_block* blk, unsigned c, unsigned node) noexcept {
  TESSERA_UNPOISON(blk, sizeof(free_block));  // an object smaller than the header (hand_out)
  batch one;
  one.push(blk);
  TESSERA_POISON(blk, task_allocator::class_bytes(c));
  node_heap& heap = global_heaps().nodes[node];
  detail::lock hold(heap.mutex);
  heap.give(c, one);
}

void arm_thread_exit_flush(task_cache& tc) {
  thread_local cache_owner owner;
  (void)owner;
  tc.registered = true;
  // Nothing was cached before (the inline push refused, the pop found empty lists).
  for (unsigned c = 0; c < task_allocator::class_count; ++c) tc.head[c] = floor_of(tc);
}

}  // namespace

// Trivially constructed and destroyed, so an access is a plain TLS offset (no guard, no wrapper
// call); the flush at thread exit is a separate object armed on the first slow path.
constinit thread_local task_cache tl_task_cache;
constinit free_block task_cache::open_floor{nullptr, 0};
constinit free_block task_cache::closed_floor{nullptr, task_cache::refuse};

void* task_allocator::allocate(std::size_t bytes) {
  if (bytes > max_block) return ::operator new(bytes);
  const unsigned c = size_class(bytes);
  task_cache& tc = tl_task_cache;
  if (is_floor(tc.head[c])) [[unlikely]] {
    if (tc.closed) [[unlikely]] return allocate_after_exit(c, tc.node, bytes);
    if (!tc.registered) arm_thread_exit_flush(tc);
    // The reserve refill_ahead took (out of any task), else a batch now.
    const batch b = tl_reserve[c].head != nullptr ? std::exchange(tl_reserve[c], batch{})
                                                  : take_batch(c, tc.node);
    tc.refilled = static_cast<std::uint8_t>(tc.refilled | (1u << c));
    // The list is empty: the batch becomes its bottom.
    TESSERA_UNPOISON(b.tail, sizeof(free_block));
    b.tail->next = tc.head[c];
    TESSERA_POISON(b.tail, sizeof(free_block));
    tc.head[c] = b.head;
  }
  free_block* blk = tc.head[c];
  TESSERA_UNPOISON(blk, sizeof(free_block));
  tc.head[c] = blk->next;
  hand_out(blk, bytes, c);
  return blk;
}

void task_allocator::refill_ahead() noexcept {
  task_cache& tc = tl_task_cache;
  if (tc.closed) return;
  for (unsigned m = tc.refilled; m != 0; m &= m - 1) {
    const auto c = static_cast<unsigned>(std::countr_zero(m));
    if (tl_reserve[c].head != nullptr || depth_of(tc.head[c]) >= batch_blocks) continue;
    try {
      tl_reserve[c] = take_batch(c, tc.node);
    } catch (...) {  // std::bad_alloc from a new chunk: left to the allocation that needs it
    }
  }
}

void task_allocator::release_slow(void* p, std::uint8_t block) noexcept {
  if (block == task_cache::new_block) {
    ::operator delete(p);
  } else {
    deallocate(p, class_bytes(block));
  }
}

void task_allocator::deallocate(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes > max_block) {
    ::operator delete(p);
    return;
  }
  const unsigned c = size_class(bytes);
  task_cache& tc = tl_task_cache;
  if (tc.closed) [[unlikely]] {
    deallocate_after_exit(static_cast<free_block*>(p), c, tc.node);
    return;
  }
  if (!tc.registered) [[unlikely]] {  // frees without allocations
    arm_thread_exit_flush(tc);
  }
  if (put_on_list(tc, c, static_cast<free_block*>(p)) > task_cache::push_limit) {
    // Give one batch back so frees from other threads cannot pile up here.
    const batch b = take_from_list(tc, c, batch_blocks);
    auto& heap = global_heaps().nodes[tc.node];
    detail::lock hold(heap.mutex);
    heap.give(c, b);
  }
}

void task_allocator::set_thread_node(unsigned node) noexcept {
  task_cache& tc = tl_task_cache;
  if (tc.node != node) {
    flush(tc);
    tc.node = node < max_nodes ? node : 0;
    std::atomic<unsigned>& used = global_heaps().nodes_used;
    unsigned seen = used.load(std::memory_order_relaxed);
    while (seen < tc.node + 1 &&
           !used.compare_exchange_weak(seen, tc.node + 1, std::memory_order_relaxed)) {
    }
  }
}

std::size_t task_allocator::thread_cached_blocks() noexcept {
  const task_cache& tc = tl_task_cache;
  std::size_t n = 0;
  for (unsigned c = 0; c < class_count; ++c) {
    if (tc.registered) n += depth_of(tc.head[c]);
    if (tc.spare[c] != nullptr) ++n;
    n += tl_reserve[c].count;
  }
  return n;
}

void task_allocator::flush_thread_cache() noexcept { flush(tl_task_cache); }

int task_allocator::place_on_node(void* p, std::size_t bytes, unsigned node) noexcept {
  if (node >= max_nodes) return EINVAL;
  // MPOL_PREFERRED, not MPOL_BIND (what numa_tonode_memory uses): a full node then lends pages
  // from another instead of getting the process OOM-killed, and a refusal is ours to report
  // (libnuma prints "mbind: Invalid argument" for every chunk when a cpuset leaves the node
  // out). maxnode counts one bit more than the mask has, as libnuma passes it.
  const unsigned long mask = 1ul << node;
  if (mbind(p, bytes, MPOL_PREFERRED, &mask, max_nodes + 1, 0) == 0) return 0;
  return errno;
}

namespace {

/// release_free_chunks for class `c` of `heap`: the batches it holds are taken out under its
/// mutex, their blocks sorted by address outside it, every chunk whose blocks are all there is
/// unmapped, and the rest go back as new batches. Blocks given to the heap meanwhile stay where
/// they are (a chunk with one of them is not complete here, so it stays). Returns the bytes
/// unmapped. Out of memory for the sort: nothing changes.
std::size_t release_class(node_heap& heap, unsigned c) noexcept {
  std::vector<batch> taken;
  {
    detail::lock hold(heap.mutex);
    taken.swap(heap.batches[c]);
    heap.held[c].store(0, std::memory_order_relaxed);
  }
  if (taken.empty()) return 0;
  const std::size_t size = task_allocator::class_bytes(c);
  std::vector<free_block*> blocks;
  std::vector<batch> kept;
  try {
    std::size_t count = 0;
    for (const batch& b : taken) count += b.count;
    blocks.reserve(count);
    kept.reserve(count / task_allocator::batch_blocks + 1);
  } catch (...) {
    detail::lock hold(heap.mutex);
    for (const batch& b : taken) heap.give(c, b);
    return 0;
  }
  for (const batch& b : taken) {
    for (free_block* blk = b.head; blk != nullptr;) {
      blocks.push_back(blk);
      TESSERA_UNPOISON(blk, sizeof(free_block));
      free_block* next = blk->next;
      TESSERA_POISON(blk, size);
      blk = next;
    }
  }
  std::sort(blocks.begin(), blocks.end(), std::less<>{});  // (a total order of addresses)
  constexpr std::uintptr_t chunk_mask = ~(std::uintptr_t{task_allocator::chunk_bytes} - 1);
  const auto chunk_of = [](const free_block* blk) {
    return reinterpret_cast<std::uintptr_t>(blk) & chunk_mask;
  };
  const std::size_t per_chunk = task_allocator::chunk_bytes / size;
  std::size_t released = 0;
  batch current;
  for (std::size_t i = 0; i < blocks.size();) {
    const std::uintptr_t chunk = chunk_of(blocks[i]);
    std::size_t end = i;
    while (end < blocks.size() && chunk_of(blocks[end]) == chunk) ++end;
    // A chunk belongs to one class of one heap (node_heap::reserve), and a block is in at most
    // one list: all of its blocks here means none is in use or cached anywhere.
    if (end - i == per_chunk) {
      void* p = reinterpret_cast<void*>(chunk);
      TESSERA_UNPOISON(p, task_allocator::chunk_bytes);  // the range may be mapped again later
      ::munmap(p, task_allocator::chunk_bytes);
      released += task_allocator::chunk_bytes;
    } else {
      for (std::size_t k = i; k < end; ++k) {
        TESSERA_UNPOISON(blocks[k], sizeof(free_block));
        current.push(blocks[k]);
        TESSERA_POISON(blocks[k], size);
        if (current.count == task_allocator::batch_blocks) {
          kept.push_back(current);  // reserved above: no allocation
          current = batch{};
        }
      }
    }
    i = end;
  }
  if (current.count != 0) kept.push_back(current);
  {
    detail::lock hold(heap.mutex);
    for (const batch& b : kept) heap.give(c, b);
  }
  heap.os_bytes.fetch_sub(released, std::memory_order_relaxed);
  return released;
}

}  // namespace

std::size_t task_allocator::release_free_chunks() noexcept {
  flush(tl_task_cache);
  heaps& hs = global_heaps();
  const unsigned used = hs.nodes_used.load(std::memory_order_relaxed);
  std::size_t released = 0;
  for (unsigned n = 0; n < used; ++n) {
    for (unsigned c = 0; c < class_count; ++c) released += release_class(hs.nodes[n], c);
  }
  return released;
}

std::size_t task_allocator::os_bytes() noexcept {
  std::size_t n = 0;
  for (auto& h : global_heaps().nodes) n += h.os_bytes.load(std::memory_order_relaxed);
  return n;
}

}  // namespace tessera::detail
