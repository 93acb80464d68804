// alloc on malloc, jemalloc and mimalloc: one std::thread per worker. jemalloc and mimalloc are
// dlopen()ed with RTLD_LOCAL|RTLD_NOW and called through mallocx/dallocx and mi_malloc/mi_free,
// so that they never replace malloc for the runtimes measured in the same process.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "alloc/alloc.h"
#include "alloc/patterns.h"
#include "common/placement.h"

namespace tessera::bench::alloc {

namespace {

void* (*g_mallocx)(std::size_t, int) = nullptr;
void (*g_dallocx)(void*, int) = nullptr;
void* (*g_mi_malloc)(std::size_t) = nullptr;
void (*g_mi_free)(void*) = nullptr;

void* malloc_allocate(std::size_t n) { return std::malloc(n); }
void malloc_release(void* p) { std::free(p); }
void* jemalloc_allocate(std::size_t n) { return g_mallocx(n, 0); }
void jemalloc_release(void* p) { g_dallocx(p, 0); }
void* mimalloc_allocate(std::size_t n) { return g_mi_malloc(n); }
void mimalloc_release(void* p) { g_mi_free(p); }

/// dlopen()s `file` and looks up two symbols; "" or why not. Never closed (objects outlive runs).
std::string open_library(const char* file, const char* alloc_name, const char* free_name,
                         void*& alloc_symbol, void*& free_symbol) {
  void* handle = dlopen(file, RTLD_LOCAL | RTLD_NOW);
  if (handle == nullptr) {
    const char* why = dlerror();
    return std::string("dlopen failed: ") + (why ? why : file);
  }
  alloc_symbol = dlsym(handle, alloc_name);
  free_symbol = dlsym(handle, free_name);
  if (alloc_symbol == nullptr || free_symbol == nullptr)
    return std::string(file) + " lacks " + alloc_name + "/" + free_name;
  return "";
}

struct library_policy {
  const library* lib;
  std::size_t bytes;
  void* make(std::uint64_t token) {
    auto* w = static_cast<std::uint64_t*>(lib->allocate(bytes));
    if (w == nullptr) throw bench_failure("out of memory");
    w[0] = token;
    w[bytes / 8 - 1] = ~token;
    return w;
  }
  bool check(void* p, std::uint64_t token) const {
    const auto* w = static_cast<const std::uint64_t*>(p);
    return w[0] == token && w[bytes / 8 - 1] == ~token;
  }
  void release(void* p) { lib->release(p); }
};

}  // namespace

library load_malloc() { return {malloc_allocate, malloc_release, ""}; }

library load_jemalloc() {
  static const std::string why = [] {
    void *a = nullptr, *f = nullptr;
    std::string r = open_library("libjemalloc.so.2", "mallocx", "dallocx", a, f);
    g_mallocx = reinterpret_cast<void* (*)(std::size_t, int)>(a);
    g_dallocx = reinterpret_cast<void (*)(void*, int)>(f);
    return r;
  }();
  return {jemalloc_allocate, jemalloc_release, why};
}

library load_mimalloc() {
  static const std::string why = [] {
    void *a = nullptr, *f = nullptr;
    std::string r = open_library("libmimalloc.so.2", "mi_malloc", "mi_free", a, f);
    g_mi_malloc = reinterpret_cast<void* (*)(std::size_t)>(a);
    g_mi_free = reinterpret_cast<void (*)(void*)>(f);
    return r;
  }();
  return {mimalloc_allocate, mimalloc_release, why};
}

measurement run_library(const config& cfg, const library& lib) {
  return measure(cfg.label, cfg.repeat, [&] {
    run_state state(cfg);
    std::vector<std::uint64_t> bad(cfg.workers, 0);
    std::vector<std::exception_ptr> errors(cfg.workers);
    std::vector<std::thread> threads;
    for (unsigned w = 0; w < cfg.workers; ++w) {
      threads.emplace_back([&, w] {
        if (cfg.tessera.pin) pin_worker_thread(w);  // tessera's CPU of worker w (best effort)
        try {
          library_policy policy{&lib, cfg.bytes};
          bad[w] = run_member(policy, cfg, w, state);
        } catch (...) {
          state.members.fail();
          errors[w] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    if (state.members.failed()) throw bench_failure("the threads did not run together (timeout)");
    std::uint64_t total_bad = 0;
    for (const auto b : bad) total_bad += b;
    if (total_bad != 0)
      throw bench_failure(std::to_string(total_bad) +
                          " objects did not hold the token written into them");
    return sample{.ops = cfg.ops * cfg.workers, .seconds = state.members.seconds()};
  });
}

void prepare_process(int /*argc*/, char** argv) {
  // jemalloc's TLS (initial-exec, ~2.6 KiB) does not fit glibc's default 512-byte surplus for
  // dlopen()ed libraries; the reserve is a tunable read only at process start.
  constexpr const char* tunable = "glibc.rtld.optional_static_tls";
  if (std::getenv("TESSERA_BENCH_REEXEC") != nullptr) return;
  const char* old = std::getenv("GLIBC_TUNABLES");
  std::string tunables = old ? old : "";
  if (tunables.find(tunable) != std::string::npos) return;
  tunables += (tunables.empty() ? "" : ":") + std::string(tunable) + "=16384";
  setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
  setenv("TESSERA_BENCH_REEXEC", "1", 1);
  execv("/proc/self/exe", argv);
  // exec failed: go on; jemalloc will be reported as unavailable if dlopen fails.
}

}  // namespace tessera::bench::alloc
