// tessera-fresh-pages: what this machine charges for the first touch of fresh memory, on 2 MiB
// (transparent huge) pages and on 4 KiB pages.
//
// Why it exists: a process's first writes to memory are page faults, and on a virtual machine
// whose hypervisor takes back free guest memory (virtio-balloon free page reporting, which
// reports free blocks of 2 MiB and more, two seconds after they were freed) a fresh 2 MiB page is
// also a run of faults in the host. On the 2-core development VM that made 2 MiB pages 30x dearer
// to fault than within two seconds of another process freeing them (0.34-0.38 GB/s against
// 11-19 GB/s), while 4 KiB pages, which the guest takes from its smaller free blocks, cost the
// same either way (1.6-1.9 GB/s). tessera's
// resources (a tree's nodes) live on 2 MiB pages, its competitors' nodes on malloc's 4 KiB pages,
// so the first load of a process pays this and the competitors' does not; later loads reuse the
// pool's chunks. docs/performance-notes.md, "Fresh huge pages on a VM that gives memory back".
//
//   tessera-fresh-pages --mib 256                     # fault rates now, both page sizes
//   tessera-fresh-pages --mib 256 --idle-seconds 15   # ... after letting the host take memory back
//
// Exit status: 0, 1 if memory could not be mapped, 2 for a bad command line.
#include <sys/mman.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

namespace {

constexpr std::size_t huge_page = std::size_t{2} << 20;

enum class page_size : std::uint8_t { huge, small };

struct touch_result {
  double seconds = 0;
  std::size_t huge_bytes = 0;  ///< of the mapping, in 2 MiB pages (AnonHugePages), if readable
  bool huge_known = false;
};

/// The AnonHugePages of the mapping that starts at `begin` (from /proc/self/smaps), if found.
bool anon_huge_bytes(const void* begin, std::size_t& bytes) {
  std::ifstream smaps("/proc/self/smaps");
  char start[32];
  std::snprintf(start, sizeof start, "%lx-", static_cast<unsigned long>(
                                                 reinterpret_cast<std::uintptr_t>(begin)));
  std::string line;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') != std::string::npos && line.find(' ') > line.find('-')) {
      in_mapping = line.rfind(start, 0) == 0;
      continue;
    }
    if (in_mapping && line.rfind("AnonHugePages:", 0) == 0) {
      bytes = std::stoull(line.substr(14)) * 1024;
      return true;
    }
  }
  return false;
}

/// Maps `bytes` (2 MiB-aligned), advises the page size, writes one byte per 4 KiB page and times
/// the writes, then unmaps it. Throws std::runtime_error if the mapping fails.
touch_result touch(std::size_t bytes, page_size pages) {
  const std::size_t span = bytes + huge_page;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    throw std::runtime_error("cannot map " + std::to_string(span >> 20) +
                             " MiB: " + std::strerror(errno));
  }
  auto* p = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(raw) + huge_page - 1) &
                                    ~(huge_page - 1));
  (void)madvise(p, bytes, pages == page_size::huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t offset = 0; offset < bytes; offset += 4096) {
    // volatile: the compiler may not drop or merge the first-touch writes.
    *static_cast<volatile char*>(p + offset) = 1;
  }
  touch_result r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The advice split the mapping: the advised part starts at p.
  r.huge_known = anon_huge_bytes(p, r.huge_bytes);
  munmap(raw, span);
  return r;
}

void report(const char* what, std::size_t bytes, const touch_result& r) {
  const double gbs = static_cast<double>(bytes) / r.seconds / 1e9;
  std::printf("  %-13s %8.1f ms  %6.2f GB/s  %7.3f ms per MiB", what, r.seconds * 1e3, gbs,
              r.seconds * 1e3 / static_cast<double>(bytes >> 20));
  if (r.huge_known) {
    std::printf("  (%zu of %zu MiB on 2 MiB pages)", r.huge_bytes >> 20, bytes >> 20);
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "What the first touch of fresh memory costs here, on 2 MiB (transparent huge) pages and on "
      "4 KiB pages. On a VM whose hypervisor takes back free memory, fresh 2 MiB pages can cost "
      "far more than 4 KiB ones.",
      "tessera-fresh-pages"};
  std::size_t mib = 256;
  unsigned idle_seconds = 0;
  app.add_option("--mib", mib, "MiB to fault, per page size")->check(CLI::Range(2, 1 << 20));
  app.add_option("--idle-seconds", idle_seconds,
                 "sleep this long first (a hypervisor that takes back free memory does so after "
                 "a few seconds)")
      ->check(CLI::Range(0, 3600));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version: their text, status 0; a bad command line: CLI11's message, status 2.
    const int status = app.exit(e);
    return status == 0 ? 0 : 2;
  }
  mib &= ~std::size_t{1};  // whole 2 MiB pages
  const std::size_t bytes = mib << 20;
  try {
    if (idle_seconds != 0) std::this_thread::sleep_for(std::chrono::seconds(idle_seconds));
    // Huge pages first: a measurement of 4 KiB pages first would leave its memory, freed,
    // backed, and the huge pages might be carved from it.
    const touch_result huge = touch(bytes, page_size::huge);
    const touch_result small = touch(bytes, page_size::small);
    std::printf("fresh memory, first touch of %zu MiB%s:\n", mib,
                idle_seconds != 0 ? " after the idle wait" : "");
    report("2 MiB pages", bytes, huge);
    report("4 KiB pages", bytes, small);
    std::printf("  2 MiB pages over 4 KiB pages: %.2fx the time\n", huge.seconds / small.seconds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-fresh-pages: %s\n", e.what());
    return 1;
  }
  return 0;
}
