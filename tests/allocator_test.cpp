// White-box tests of the multi-level task allocator (src/memory/task_allocator.h), without a
// runtime: size classes, reuse, alignment, cross-thread frees that must not pile up memory.
#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "memory/task_allocator.h"
#include "tessera/runtime.h"
#include "test_support.h"

namespace tessera::test {
namespace {

using alloc = detail::task_allocator;

TEST(task_allocator, size_classes) {
  EXPECT_EQ(alloc::size_class(1), 0u);
  EXPECT_EQ(alloc::size_class(64), 0u);
  EXPECT_EQ(alloc::size_class(65), 1u);
  EXPECT_EQ(alloc::size_class(128), 1u);
  EXPECT_EQ(alloc::size_class(256), 2u);
  EXPECT_EQ(alloc::size_class(512), 3u);
  EXPECT_EQ(alloc::size_class(1024), 4u);
  for (unsigned c = 0; c < alloc::class_count; ++c) {
    EXPECT_GE(alloc::class_bytes(c), c == 0 ? 1u : alloc::class_bytes(c - 1) + 1);
    EXPECT_EQ(alloc::size_class(alloc::class_bytes(c)), c);
  }
  EXPECT_EQ(alloc::class_bytes(alloc::class_count - 1), alloc::max_block);
}

TEST(task_allocator, blocks_are_distinct_aligned_and_keep_their_bytes) {
  const std::size_t sizes[] = {1, 48, 64, 65, 128, 200, 256, 300, 512, 1000, 1024, 1025, 5000};
  for (std::size_t size : sizes) {
    std::vector<void*> blocks;
    for (int i = 0; i < 500; ++i) {
      void* p = alloc::allocate(size);
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignof(std::max_align_t), 0u)
          << size << "-byte block misaligned";
      std::memset(p, i & 0xff, size);
      blocks.push_back(p);
    }
    std::set<void*> unique(blocks.begin(), blocks.end());
    ASSERT_EQ(unique.size(), blocks.size()) << "a live block was handed out twice";
    for (int i = 0; i < 500; ++i) {
      auto* b = static_cast<unsigned char*>(blocks[i]);
      ASSERT_TRUE(std::all_of(b, b + size, [&](unsigned char x) { return x == (i & 0xff); }))
          << size << "-byte block " << i << " was overwritten while live";
    }
    for (void* p : blocks) alloc::deallocate(p, size);
  }
  alloc::deallocate(nullptr, 64);  // freeing null is a no-op
}

TEST(task_allocator, freed_blocks_are_reused_without_new_os_memory) {
  // Warm up this thread's cache and the node heap, then cycle: the OS total must not move.
  std::vector<void*> v;
  for (int i = 0; i < 1000; ++i) v.push_back(alloc::allocate(100));
  for (void* p : v) alloc::deallocate(p, 100);
  v.clear();
  const std::size_t before = alloc::os_bytes();
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 1000; ++i) v.push_back(alloc::allocate(100));
    for (void* p : v) alloc::deallocate(p, 100);
    v.clear();
  }
  EXPECT_EQ(alloc::os_bytes(), before);
}

TEST(task_allocator, thread_cache_stays_bounded_and_flushes) {
  std::thread t([] {
    std::vector<void*> v;
    for (int i = 0; i < 5000; ++i) v.push_back(alloc::allocate(200));
    for (void* p : v) alloc::deallocate(p, 200);
    EXPECT_LE(alloc::thread_cached_blocks(), alloc::push_limit)
        << "a thread's free list grew past its limit";
    alloc::flush_thread_cache();
    EXPECT_EQ(alloc::thread_cached_blocks(), 0u);
  });
  t.join();
}

/// refill_ahead (a worker's periodic()) takes the next batch of a class the thread refilled
/// before, when its list holds less than one, and holds it apart: the list's own blocks go first,
/// the batch when the list runs dry. Not for a class never used, not twice; flushed with the rest.
TEST(task_allocator, refill_ahead_holds_the_next_batch_until_the_list_runs_dry) {
  std::thread t([] {
    alloc::refill_ahead();
    EXPECT_EQ(alloc::thread_cached_blocks(), 0u) << "took a batch of a class never used";
    std::set<void*> seen{alloc::allocate(1000)};
    while (alloc::thread_cached_blocks() >= alloc::batch_blocks) seen.insert(alloc::allocate(1000));
    const std::size_t listed = alloc::thread_cached_blocks();
    alloc::refill_ahead();
    const std::size_t held = alloc::thread_cached_blocks();
    ASSERT_GT(held, listed);
    alloc::refill_ahead();
    EXPECT_EQ(alloc::thread_cached_blocks(), held) << "took a second batch";
    // The list first: the held batch stays whole until the list is empty.
    for (std::size_t i = 0; i < listed; ++i) {
      void* p = alloc::allocate(1000);
      std::memset(p, 0x5a, 1000);
      EXPECT_TRUE(seen.insert(p).second) << "a block handed out twice";
    }
    EXPECT_EQ(alloc::thread_cached_blocks(), held - listed);
    for (std::size_t i = 0; i < held - listed; ++i) {
      void* p = alloc::allocate(1000);
      std::memset(p, 0x5a, 1000);
      EXPECT_TRUE(seen.insert(p).second) << "a block handed out twice";
    }
    EXPECT_EQ(alloc::thread_cached_blocks(), 0u);
    for (void* p : seen) alloc::deallocate(p, 1000);
    // Taken ahead again, then given back by the flush with the list.
    seen = {alloc::allocate(1000)};
    while (alloc::thread_cached_blocks() >= alloc::batch_blocks) seen.insert(alloc::allocate(1000));
    alloc::refill_ahead();
    for (void* p : seen) alloc::deallocate(p, 1000);
    alloc::flush_thread_cache();
    EXPECT_EQ(alloc::thread_cached_blocks(), 0u);
    // And not taken ahead again before the thread's next refill: a flush gives memory back.
    alloc::refill_ahead();
    EXPECT_EQ(alloc::thread_cached_blocks(), 0u) << "took a batch back right after a flush";
  });
  t.join();
}

/// A thread with ~1,000 tasks in flight (YCSB's two batch slots of 500) keeps the blocks it frees
/// on its own list: another thread allocating meanwhile gets none of them, and the first thread
/// gets every one of them back. With a limit of two batches they would go through the shared
/// node heap, so blocks freed on one worker would next be allocated on another.
TEST(task_allocator, a_thousand_freed_blocks_stay_with_the_thread_that_freed_them) {
  constexpr std::size_t in_flight = 1000;
  static_assert(in_flight < alloc::push_limit);
  constexpr std::size_t bytes = 100;  // 128-byte class
  std::atomic<int> stage{0};          // 1: a freed its blocks; 2: b took its own
  std::set<void*> freed_by_a;
  std::set<void*> taken_by_b;
  std::set<void*> taken_again_by_a;
  std::thread a([&] {
    std::vector<void*> v;
    for (std::size_t i = 0; i < in_flight; ++i) v.push_back(alloc::allocate(bytes));
    for (void* p : v) alloc::deallocate(p, bytes);
    freed_by_a.insert(v.begin(), v.end());
    v.clear();
    stage.store(1, std::memory_order_release);
    stage.notify_all();
    stage.wait(1, std::memory_order_acquire);
    for (std::size_t i = 0; i < in_flight; ++i) v.push_back(alloc::allocate(bytes));
    taken_again_by_a.insert(v.begin(), v.end());
    for (void* p : v) alloc::deallocate(p, bytes);
    alloc::flush_thread_cache();
  });
  std::thread b([&] {
    stage.wait(0, std::memory_order_acquire);
    std::vector<void*> v;
    for (std::size_t i = 0; i < in_flight; ++i) v.push_back(alloc::allocate(bytes));
    taken_by_b.insert(v.begin(), v.end());
    for (void* p : v) alloc::deallocate(p, bytes);
    alloc::flush_thread_cache();
    stage.store(2, std::memory_order_release);
    stage.notify_all();
  });
  a.join();
  b.join();
  std::size_t shared = 0;
  for (void* p : taken_by_b) shared += freed_by_a.count(p);
  EXPECT_EQ(shared, 0u) << "blocks freed on one thread were allocated on another";
  std::size_t own = 0;
  for (void* p : taken_again_by_a) own += freed_by_a.count(p);
  EXPECT_EQ(own, in_flight) << "the thread did not get all of its own blocks back";
}

/// The inline pop writes no counter: a list's length lives in its top block. Interleaved inline
/// pops and pushes (what make_task and the runtime's free path do), out-of-line refills and the
/// give-back of a batch must keep it exact, and every block must come back once.
TEST(task_allocator, the_inline_paths_keep_the_cached_count_exact) {
  std::thread t([] {
    constexpr unsigned c = 1;  // 128-byte class
    const std::size_t bytes = alloc::class_bytes(c);
    std::vector<void*> live;
    live.push_back(alloc::allocate(bytes));  // arms the thread and fills the list with one batch
    std::size_t cached = alloc::thread_cached_blocks();
    ASSERT_LT(cached, alloc::batch_blocks);  // a batch from the heap may be a partial one
    std::set<void*> seen(live.begin(), live.end());
    // Pops (inline where the build allows it) through many refills, enough blocks to pass the
    // list's limit when they come back.
    for (std::size_t i = 0; i < alloc::push_limit + alloc::batch_blocks + 16; ++i) {
      void* p = detail::task_cache_inline ? detail::task_cache_pop(c) : nullptr;
      if (p == nullptr) p = alloc::allocate(bytes);  // empty list (or sanitizer build): refill
      ASSERT_TRUE(seen.insert(p).second) << "a live block was handed out twice";
      live.push_back(p);
      const std::size_t now = alloc::thread_cached_blocks();
      ASSERT_TRUE(cached == 0 ? now < alloc::batch_blocks : now == cached - 1)
          << "after a pop: " << now << " cached, " << cached << " before";
      cached = now;
    }
    // Pushes past the limit: the list gives a batch back once it passes push_limit.
    std::size_t most = cached;
    unsigned give_backs = 0;
    for (void* p : live) {
      alloc::release(p, static_cast<std::uint8_t>(c));
      const std::size_t now = alloc::thread_cached_blocks();
      ASSERT_TRUE(now == cached + 1 || now == cached + 1 - alloc::batch_blocks)
          << "after a push: " << now << " cached, " << cached << " before";
      if (now < cached) ++give_backs;
      cached = now;
      most = std::max(most, now);
    }
    EXPECT_LE(most, alloc::push_limit);
    EXPECT_GT(give_backs, 0u) << "the list never gave a batch back";
    alloc::flush_thread_cache();
    EXPECT_EQ(alloc::thread_cached_blocks(), 0u);
  });
  t.join();
}

/// A worker's completion keeps the finished task's block as its class's spare (task_cache_keep),
/// and the next pop of that class hands it out again before the list. The spare counts as
/// cached, a second keep of the same class and a block of operator new are refused, and the
/// thread's flush returns the spare with the list, also on a thread whose exit flush was never
/// armed (a worker whose first free was a kept block).
TEST(task_allocator, the_spare_is_handed_out_first_and_flushed) {
  std::thread t([] {
    constexpr unsigned c = 0;
    void* first = alloc::allocate(alloc::class_bytes(c));  // arms the thread, refills the list
    void* second = alloc::allocate(alloc::class_bytes(c));
    const std::size_t cached = alloc::thread_cached_blocks();
    EXPECT_TRUE(detail::task_cache_keep(first, c));
    EXPECT_EQ(alloc::thread_cached_blocks(), cached + 1);
    EXPECT_FALSE(detail::task_cache_keep(second, c)) << "a class keeps one spare";
    EXPECT_FALSE(detail::task_cache_keep(second, detail::task_cache::new_block));
    if (detail::task_cache_inline) {
      EXPECT_EQ(detail::task_cache_pop(c), first) << "the spare goes first";
      EXPECT_EQ(alloc::thread_cached_blocks(), cached);
      EXPECT_TRUE(detail::task_cache_keep(first, c));
    }
    alloc::release_slow(second, static_cast<std::uint8_t>(c));
    alloc::flush_thread_cache();
    EXPECT_EQ(alloc::thread_cached_blocks(), 0u) << "the flush left the spare behind";
  });
  t.join();
  // A thread that never armed its exit flush: the spare still goes back with its flush.
  void* block = alloc::allocate(64);
  std::thread u([block] {
    EXPECT_TRUE(detail::task_cache_keep(block, 0));
    EXPECT_EQ(alloc::thread_cached_blocks(), 1u);
    alloc::flush_thread_cache();
    EXPECT_EQ(alloc::thread_cached_blocks(), 0u);
  });
  u.join();
}

/// task_allocator::release is what the runtime's free path calls: an inline push onto the thread
/// cache that refuses (and goes out of line) until the thread's exit flush is armed, and always
/// for blocks from operator new. A thread whose first call is a release must still end up with
/// the block cached and flushed.
TEST(task_allocator, release_on_a_thread_that_never_allocated) {
  void* small = alloc::allocate(100);
  void* big = ::operator new(4096);
  std::thread t([&] {
    EXPECT_EQ(alloc::thread_cached_blocks(), 0u);
    alloc::release(small, detail::task_cache::block_of(100, false));
    EXPECT_EQ(alloc::thread_cached_blocks(), 1u) << "the first release did not cache the block";
    alloc::release(big, detail::task_cache::new_block);  // operator delete, nothing cached
    EXPECT_EQ(alloc::thread_cached_blocks(), 1u);
    alloc::flush_thread_cache();
    EXPECT_EQ(alloc::thread_cached_blocks(), 0u);
    // After a flush the inline path accepts blocks again.
    void* again = alloc::allocate(100);
    const std::size_t cached = alloc::thread_cached_blocks();  // what the refill left
    alloc::release(again, detail::task_cache::block_of(100, false));
    EXPECT_EQ(alloc::thread_cached_blocks(), cached + 1);
  });
  t.join();
}

/// Two threads: `a` allocates rounds of blocks, `b` frees them. Without the batch give-back the
/// blocks would pile up on `b` and `a` would map new chunks every round.
/// A producer makes blocks, a consumer frees them, 1,000 in flight at a time. With the two on
/// different NUMA nodes (logical nodes: the heaps exist whatever the machine has), the
/// consumer's give-backs go to its node's heap; the producer's refills must take them back from
/// there instead of new memory (taking from their own node's heap only, they would grow the OS
/// memory without bound).
void expect_one_way_frees_not_to_grow_os_memory(unsigned producer_node, unsigned consumer_node) {
  const int rounds = static_cast<int>(scaled(3000, 300));
  constexpr int per_round = 1000;
  std::mutex m;
  std::condition_variable cv;
  std::vector<void*> handoff;
  bool full = false;
  bool done = false;
  std::size_t after_warmup = 0;
  std::atomic<std::size_t> consumer_cache_max{0};

  std::thread consumer([&] {
    alloc::set_thread_node(consumer_node);
    for (;;) {
      std::vector<void*> mine;
      {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return full || done; });
        if (!full && done) break;
        mine.swap(handoff);
        full = false;
      }
      cv.notify_all();
      for (void* p : mine) alloc::deallocate(p, 96);
      consumer_cache_max.store(std::max(consumer_cache_max.load(), alloc::thread_cached_blocks()));
    }
  });
  std::thread producer_thread([&] {
    alloc::set_thread_node(producer_node);
    for (int r = 0; r < rounds; ++r) {
      if (r == 10) after_warmup = alloc::os_bytes();
      std::vector<void*> batch;
      for (int i = 0; i < per_round; ++i) {
        void* p = alloc::allocate(96);
        std::memset(p, r & 0xff, 96);
        batch.push_back(p);
      }
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return !full; });
      handoff.swap(batch);
      full = true;
      cv.notify_all();
    }
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return !full; });
    done = true;
    cv.notify_all();
  });
  producer_thread.join();
  consumer.join();
  const std::size_t growth = alloc::os_bytes() - after_warmup;
  EXPECT_LE(growth, 2 * alloc::chunk_bytes)
      << "memory freed on the consumer thread never came back to the producer (nodes "
      << producer_node << " and " << consumer_node << ")";
  EXPECT_LE(consumer_cache_max.load(), alloc::push_limit);
}

TEST(task_allocator, one_way_cross_thread_frees_do_not_grow_os_memory) {
  expect_one_way_frees_not_to_grow_os_memory(0, 0);
}

TEST(task_allocator, one_way_frees_on_another_numa_node_do_not_grow_os_memory) {
  expect_one_way_frees_not_to_grow_os_memory(0, 1);
}

/// The heaps ask for their chunks' pages on the node (preferred, so a full node lends pages and
/// the process is not OOM-killed as under MPOL_BIND, which numa_tonode_memory uses), and a node
/// that is not there is refused with an errno, not a message per chunk.
TEST(task_allocator, a_chunk_is_placed_on_a_node_by_preference_and_a_missing_node_is_refused) {
  ASSERT_GE(numa_available(), 0) << "the kernel has no NUMA support";
  const std::size_t bytes = alloc::chunk_bytes;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const int here = numa_node_of_cpu(sched_getcpu());
  const unsigned node = here < 0 ? 0u : static_cast<unsigned>(here);
  EXPECT_EQ(alloc::place_on_node(p, bytes, node), 0);
  int mode = -1;
  unsigned long mask = 0;
  ASSERT_EQ(get_mempolicy(&mode, &mask, 64 + 1, p, MPOL_F_ADDR), 0);
  EXPECT_EQ(mode, MPOL_PREFERRED);
  EXPECT_EQ(mask, 1ul << node);
  std::memset(p, 1, bytes);  // the pages come (from that node, while it has memory)
  if (numa_max_node() < 63) {
    EXPECT_EQ(alloc::place_on_node(p, bytes, 63), EINVAL);
  }
  EXPECT_EQ(alloc::place_on_node(p, bytes, 64), EINVAL);  // past the heaps' 64 nodes
  ::munmap(p, bytes);
}

/// A thread_local constructed before the thread's first slow path is destroyed after the cache's
/// exit flush; what its destructor makes and frees goes to the node heap, not to lists nobody
/// flushes again (otherwise each such thread would lose a batch of 64 blocks of every class here,
/// 124 KiB).
struct late_user {
  ~late_user() {
    for (unsigned c = 0; c < alloc::class_count; ++c) {
      void* p = alloc::allocate(alloc::class_bytes(c));
      alloc::deallocate(p, alloc::class_bytes(c));
      void* q = alloc::allocate(alloc::class_bytes(c));
      alloc::deallocate(q, alloc::class_bytes(c));
    }
  }
};

TEST(task_allocator, blocks_made_and_freed_after_the_thread_exit_flush_go_back_to_the_heap) {
  auto thread_body = [] {
    thread_local late_user user;  // constructed first, destroyed after the cache's flush
    (void)user;
    alloc::deallocate(alloc::allocate(64), 64);
  };
  std::thread(thread_body).join();  // warm-up: the heap holds what one thread uses
  const std::size_t before = alloc::os_bytes();
  const int threads = static_cast<int>(scaled(1000, 300));
  for (int i = 0; i < threads; ++i) std::thread(thread_body).join();
  EXPECT_LE(alloc::os_bytes() - before, 2 * alloc::chunk_bytes)
      << threads << " threads lost what their thread_locals made after the exit flush";
}

TEST(task_allocator, many_threads_allocate_and_free_each_others_blocks) {
  constexpr int threads = 4;
  const int rounds = static_cast<int>(scaled(200, 30));
  std::vector<std::vector<void*>> slots(threads);
  std::vector<std::mutex> locks(threads);
  std::vector<std::thread> pool;
  std::atomic<int> corrupt{0};
  // Each block carries its size in its first word and a marker in its last byte.
  auto free_checked = [&](void* v) {
    std::size_t size;
    std::memcpy(&size, v, sizeof size);
    if (size < 16 || size > 2000 || static_cast<unsigned char*>(v)[size - 1] != 0xa5) {
      corrupt.fetch_add(1);
      return;
    }
    alloc::deallocate(v, size);
  };
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int r = 0; r < rounds; ++r) {
        std::vector<void*> mine;
        for (int i = 0; i < 300; ++i) {
          const std::size_t size = 16 + static_cast<std::size_t>((i * 37 + t) % 1500);
          void* p = alloc::allocate(size);
          std::memcpy(p, &size, sizeof size);
          static_cast<unsigned char*>(p)[size - 1] = 0xa5;
          mine.push_back(p);
        }
        // Hand the blocks to the next thread, free what the previous one left.
        std::vector<void*> theirs;
        {
          std::lock_guard lock(locks[(t + 1) % threads]);
          auto& next = slots[(t + 1) % threads];
          next.insert(next.end(), mine.begin(), mine.end());
        }
        {
          std::lock_guard lock(locks[t]);
          theirs.swap(slots[t]);
        }
        for (void* v : theirs) free_checked(v);
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& s : slots) {
    for (void* v : s) free_checked(v);
  }
  EXPECT_EQ(corrupt.load(), 0);
}

/// release_free_chunks gives back chunks whose blocks are all free, keeps a chunk with a block in
/// use (its bytes intact), and the allocator goes on from the blocks and chunks it kept.
TEST(task_allocator, wholly_free_chunks_go_back_to_the_system_and_used_ones_stay) {
  std::thread([] {
    constexpr std::size_t bytes = alloc::max_block;  // 512 blocks a chunk
    constexpr std::size_t per_chunk = alloc::chunk_bytes / bytes;
    std::vector<unsigned char*> blocks;
    for (std::size_t i = 0; i < 4 * per_chunk; ++i) {
      auto* p = static_cast<unsigned char*>(alloc::allocate(bytes));
      std::memset(p, static_cast<int>(i & 0xff), bytes);
      blocks.push_back(p);
    }
    unsigned char* live = blocks.front();
    std::memset(live, 0x5a, bytes);
    for (std::size_t i = 1; i < blocks.size(); ++i) alloc::deallocate(blocks[i], bytes);
    const std::size_t before = alloc::os_bytes();
    const std::size_t released = alloc::release_free_chunks();
    EXPECT_EQ(released % alloc::chunk_bytes, 0u);
    EXPECT_GE(released, 2 * alloc::chunk_bytes) << "4 chunks' worth freed, one block kept";
    EXPECT_EQ(alloc::os_bytes(), before - released);
    EXPECT_EQ(alloc::thread_cached_blocks(), 0u) << "the calling thread's cache is given back";
    EXPECT_TRUE(std::all_of(live, live + bytes, [](unsigned char x) { return x == 0x5a; }))
        << "a block in use lost its bytes";
    // The pool goes on: blocks again, from the kept ones and new chunks, all writable.
    std::vector<void*> again;
    for (std::size_t i = 0; i < 4 * per_chunk; ++i) {
      void* p = alloc::allocate(bytes);
      std::memset(p, 0xa5, bytes);
      again.push_back(p);
    }
    EXPECT_TRUE(std::all_of(live, live + bytes, [](unsigned char x) { return x == 0x5a; }));
    for (void* p : again) alloc::deallocate(p, bytes);
    alloc::deallocate(live, bytes);
    alloc::flush_thread_cache();
  }).join();
}

/// The public pair: release_thread_cache empties the calling thread's cache into the heaps,
/// where release_free_memory finds whole chunks.
TEST(task_allocator, the_public_release_pair_empties_a_threads_cache_and_returns_its_chunks) {
  std::thread([] {
    constexpr std::size_t bytes = alloc::max_block;
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < 2 * alloc::chunk_bytes / bytes; ++i) {
      blocks.push_back(alloc::allocate(bytes));
    }
    for (void* p : blocks) alloc::deallocate(p, bytes);
    EXPECT_GT(alloc::thread_cached_blocks(), 0u);
    tessera::release_thread_cache();
    EXPECT_EQ(alloc::thread_cached_blocks(), 0u);
    const std::size_t before = alloc::os_bytes();
    const std::size_t released = tessera::release_free_memory();
    EXPECT_GE(released, alloc::chunk_bytes) << "two chunks' worth freed";
    EXPECT_EQ(alloc::os_bytes(), before - released);
  }).join();
}

/// Releases while other threads allocate, write and free (TSan and ASan see the hand-overs).
TEST(task_allocator, releasing_while_other_threads_allocate_and_free) {
  std::atomic<bool> stop{false};
  std::atomic<int> corrupt{0};
  std::vector<std::thread> users;
  for (int t = 0; t < 2; ++t) {
    users.emplace_back([&, t] {
      const std::size_t bytes = t == 0 ? 1024 : 4096;
      std::vector<unsigned char*> held;
      for (int round = 0; !stop.load(std::memory_order_relaxed) && round < 2000; ++round) {
        for (int i = 0; i < 600; ++i) {
          auto* p = static_cast<unsigned char*>(alloc::allocate(bytes));
          std::memset(p, t + 1, bytes);
          held.push_back(p);
        }
        for (unsigned char* p : held) {
          if (p[0] != t + 1 || p[bytes - 1] != t + 1) corrupt.fetch_add(1);
          alloc::deallocate(p, bytes);
        }
        held.clear();
        if (round % 16 == 0) alloc::flush_thread_cache();
      }
    });
  }
  std::size_t released = 0;
  for (int i = 0; i < 200; ++i) {
    released += alloc::release_free_chunks();
    std::this_thread::yield();
  }
  stop.store(true);
  for (auto& u : users) u.join();
  EXPECT_EQ(corrupt.load(), 0);
  (void)released;  // how much depends on the interleaving
}

}  // namespace
}  // namespace tessera::test

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>

namespace tessera::test {
namespace {

// Under ASan every block on a thread's list is poisoned, also the fresh ones of a batch just
// carved from a chunk (unpoisoned, an overrun into a block not yet handed out would go
// unnoticed). Built only in the asan preset: the property is ASan's.
TEST(allocator_asan, fresh_blocks_on_a_threads_list_are_poisoned) {
  std::thread([] {
    auto* p = static_cast<char*>(alloc::allocate(64));
    auto* q = static_cast<char*>(alloc::allocate(64));
    const std::ptrdiff_t step = q - p;  // the list hands a fresh batch out in carving order
    ASSERT_EQ(step < 0 ? -step : step, static_cast<std::ptrdiff_t>(alloc::class_bytes(alloc::size_class(64))));
    EXPECT_TRUE(__asan_address_is_poisoned(q + step)) << "the next fresh block is not poisoned";
    EXPECT_FALSE(__asan_address_is_poisoned(q)) << "a block handed out is poisoned";
    alloc::deallocate(q, 64);
    EXPECT_TRUE(__asan_address_is_poisoned(q)) << "a freed block is not poisoned";
    alloc::deallocate(p, 64);
  }).join();
}

// A block handed out for fewer bytes than its class is poisoned past them, as a malloc'd
// object's tail: a task that writes past its own object is reported. Objects smaller than a free
// block's header too.
TEST(allocator_asan, a_block_is_poisoned_past_the_bytes_asked_for) {
  std::thread([] {
    for (const std::size_t bytes : {std::size_t{1}, std::size_t{72}, std::size_t{100}}) {
      auto* p = static_cast<char*>(alloc::allocate(bytes));
      EXPECT_FALSE(__asan_address_is_poisoned(p + bytes - 1)) << bytes << " bytes";
      EXPECT_TRUE(__asan_address_is_poisoned(p + bytes)) << bytes << " bytes";
      EXPECT_TRUE(__asan_address_is_poisoned(p + alloc::class_bytes(alloc::size_class(bytes)) - 1));
      alloc::deallocate(p, bytes);
      EXPECT_TRUE(__asan_address_is_poisoned(p));
      auto* q = static_cast<char*>(alloc::allocate(alloc::class_bytes(alloc::size_class(bytes))));
      EXPECT_EQ(q, p) << "the list hands the block just freed out again";
      EXPECT_FALSE(__asan_address_is_poisoned(q + alloc::class_bytes(alloc::size_class(bytes)) - 1));
      alloc::deallocate(q, alloc::class_bytes(alloc::size_class(bytes)));
    }
  }).join();
}

}  // namespace
}  // namespace tessera::test
#endif
