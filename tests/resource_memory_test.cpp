// Where resources live (runtime_options::resources, memory/resource_memory.h): by default (but
// under ASan, where the runtimes here name it) in the task allocator's 2 MiB chunks advised for
// transparent huge pages, objects over its largest class
// and runtimes that ask for the heap in operator new's memory; blocks freed on one thread (by
// reclamation, on a worker) and made again on another.
#include <sys/stat.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "memory/resource_memory.h"
#include "memory/task_allocator.h"
#include "test_support.h"

namespace tessera::test {
namespace {

/// A tree node's size: with the runtime's header, exactly one 1 KiB block.
struct node_sized {
  std::array<std::uint64_t, 120> words{};
  static inline std::atomic<long> destroyed{0};
  ~node_sized() { destroyed.fetch_add(1, std::memory_order_relaxed); }
};
static_assert(sizeof(node_sized) + 64 == 1024);

/// Larger than the allocator's largest class with the header: operator new's.
struct page_and_more {
  std::array<std::byte, detail::task_allocator::max_block> bytes{};
};

std::uint8_t block_of(const void* object) {
  return detail::resource_header::of(object)->block;
}

/// The VmFlags line of the mapping of /proc/self/smaps that holds `p` ("" if none does).
std::string vm_flags_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t first = 0;
    std::uintptr_t last = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> first >> dash >> last && dash == '-') {
      inside = first <= address && address < last;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

bool kernel_has_transparent_huge_pages() {
  struct stat st {};
  return ::stat("/sys/kernel/mm/transparent_hugepage/enabled", &st) == 0;
}

TEST(resource_memory, a_resource_of_up_to_4_kib_is_a_block_of_a_huge_page_chunk) {
  runtime rt(runtime_options{.workers = 1, .resources = resource_memory::pool});
  auto* n = rt.make_resource<node_sized>(resource_hints{});
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(n) % 64, 0u);
  EXPECT_EQ(block_of(n), detail::task_allocator::size_class(1024));
  EXPECT_TRUE(detail::is_live_resource(n));
  if (kernel_has_transparent_huge_pages()) {
    // "hg": the mapping was advised MADV_HUGEPAGE (whether the kernel then backs it with huge
    // pages depends on its setting and free memory; the advice is what the runtime controls).
    EXPECT_NE(vm_flags_of(n).find(" hg"), std::string::npos) << vm_flags_of(n);
  }
  rt.destroy_resource(n);
}

TEST(resource_memory, the_default_is_the_pool_but_under_address_sanitizer) {
  EXPECT_EQ(runtime_options{}.resources, under_asan ? resource_memory::heap : resource_memory::pool);
}

TEST(resource_memory, larger_resources_and_a_heap_runtime_take_operator_new) {
  runtime pool(runtime_options{.workers = 1, .resources = resource_memory::pool});
  auto* big = pool.make_resource<page_and_more>(resource_hints{});
  EXPECT_EQ(block_of(big), detail::task_cache::new_block);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big) % 64, 0u);
  pool.destroy_resource(big);

  runtime heap(runtime_options{.workers = 1, .resources = resource_memory::heap});
  auto* n = heap.make_resource<node_sized>(resource_hints{});
  EXPECT_EQ(block_of(n), detail::task_cache::new_block);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(n) % 64, 0u);
  EXPECT_TRUE(detail::is_live_resource(n));
  heap.destroy_resource(n);
}

TEST(resource_memory, retired_blocks_are_freed_on_the_workers_and_made_again_there) {
  node_sized::destroyed.store(0);
  runtime rt(runtime_options{.workers = 2, .resources = resource_memory::pool});
  // Made and retired from this thread (not a worker): the frees happen on the workers, whose
  // caches keep the blocks. A second round made on the workers takes blocks back from there.
  const std::size_t n = scaled(20'000, 4'000);
  std::vector<node_sized*> made;
  made.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    made.push_back(rt.make_resource<node_sized>(resource_hints{}));
    made.back()->words[0] = i;
  }
  for (node_sized* r : made) rt.retire_resource(r);
  rt.wait_idle();
  std::atomic<std::size_t> checked{0};
  const group g = rt.make_group();
  for (std::size_t i = 0; i < n / 100; ++i) {
    rt.spawn(
        [&rt, &checked](context&) {
          for (int k = 0; k < 100; ++k) {
            auto* r = rt.make_resource<node_sized>(resource_hints{});
            r->words[1] = static_cast<std::uint64_t>(k);
            if (r->words[1] == static_cast<std::uint64_t>(k) && detail::is_live_resource(r))
              checked.fetch_add(1, std::memory_order_relaxed);
            rt.retire_resource(r);
          }
        },
        g);
  }
  rt.wait(g);
  rt.stop();
  EXPECT_EQ(checked.load(), n / 100 * 100);
  EXPECT_EQ(node_sized::destroyed.load(), static_cast<long>(n + n / 100 * 100));
}

}  // namespace
}  // namespace tessera::test
