// bench/alloc/alloc.h — the cost of one task-sized allocation + free.
//
// Allocators: tessera's task allocator (task_allocator::pool), tessera with
// task_allocator::system (operator new/delete), and malloc, jemalloc and mimalloc called
// directly. jemalloc and mimalloc are dlopen()ed with RTLD_LOCAL so they do not replace malloc
// for the rest of the process (alloc/libraries.cpp); if that fails the rows say why.
//
// Two patterns, `ops` alloc+free pairs per worker:
//   window       each worker allocates `window` objects, then frees them, and again
//   crossthread  worker i allocates, passes the objects through a ring to worker (i+1) % W,
//                which frees them (needs at least 2 workers)
// Every object gets a token written at its first and last word when allocated and checked when
// freed: overlapping or unwritable objects fail the run. Tessera's objects are tasks made with
// runtime::make_task and freed with runtime::discard on the workers.
//
//   alloc::config cfg{.workers = 2, .ops = 1'000'000, .bytes = 64, .window = 64};
//   measurement m = alloc::run_library(cfg, alloc::load_mimalloc());
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/tessera_settings.h"
#include "common/timing.h"

namespace tessera::bench::alloc {

enum class pattern : std::uint8_t { window, crossthread };

struct config {
  unsigned workers = 1;
  std::uint64_t ops = 1;  ///< alloc+free pairs per worker
  unsigned bytes = 64;    ///< object size: 64, 128, 256 or 512
  unsigned window = 64;   ///< objects allocated before they are freed (window) / per batch
  pattern shape = pattern::window;
  unsigned repeat = 3;
  std::string label;
  tessera_settings tessera;  ///< pin: every implementation (common/placement.h); the rest: tessera
};

/// An allocator reached through function pointers (malloc, or a dlopen()ed library).
struct library {
  void* (*allocate)(std::size_t bytes) = nullptr;
  void (*release)(void* p) = nullptr;
  std::string unavailable;  ///< non-empty: why this library cannot be measured
};

/// The C library's malloc, and the two libraries dlopen()ed on the first call (later calls
/// return the same functions, or the same reason why they cannot be measured).
library load_malloc();
library load_jemalloc();
library load_mimalloc();

/// `system`: tessera's task_allocator::system instead of its pool allocator.
measurement run_tessera(const config& cfg, bool system);
measurement run_library(const config& cfg, const library& lib);

/// Re-executes the process once with glibc's optional static TLS reserve raised, so that
/// dlopen(libjemalloc.so.2), whose TLS is initial-exec, can succeed.
void prepare_process(int argc, char** argv);

}  // namespace tessera::bench::alloc
