// src/runtime/prefetch.h — turning a task's annotation into prefetch instructions.
//
// The annotated bytes become cache lines, capped at `max_lines` (16 lines = 1 KiB: the rest of a
// larger object is left to the hardware prefetcher, which follows the sequential pattern).
// Every address issued lies inside [data, data + size): the first is `data` itself, then the start
// of each following line the object overlaps. Writers get a prefetch with write intent, readers
// a read prefetch. A resource also gets its header line (version, latch word, pool), first, with
// the task's intent: the worker reads the primitive from it before running the task, and checks a
// version or takes a latch there. It is prefetched for every primitive, because deciding from the
// primitive would mean reading the header now, the very miss the prefetch is there to hide.
//
// One generator, for_each_prefetch_address, defines the addresses; the worker issues them as it
// goes (issue_prefetch) and the tests collect them (plan_prefetch). The worker builds no plan:
// an array of up to 17 addresses written and then read back cost ~158 instructions per task
// entering the window (callgrind, YCSB C at 100,000 records), a quarter of tessera's
// instructions per operation there; issued as they are generated, ~70.
//
//   const unsigned lines = issue_prefetch(*t);   // the instructions issued
//   prefetch_plan plan = plan_prefetch(*t);      // the same addresses, collected
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "tessera/detail/resource_header.h"
#include "tessera/task.h"
#include "util/compiler.h"

namespace tessera::detail {

/// The addresses of one task's prefetch, collected (for tests; the worker issues them directly).
struct prefetch_plan {
  static constexpr unsigned max_lines = 16;
  // Not zero-initialized: only the first `count` entries are meant.
  std::array<const void*, max_lines + 1> address;
  unsigned count = 0;
  bool write = false;  ///< every line with write intent (the task writes) or none
};

/// Calls `f(address)` for every address a prefetch of the annotation [data, data + size) issues,
/// in order: `header` first if given (its address only: not read here), then `data`, then the
/// start of each following line the object overlaps, at most max_lines data addresses in all
/// (none for a size of 0: the header alone).
/// Returns how many. `size` is below 4 GiB (a task keeps it in 32 bits), so nothing overflows.
template <class F>
TESSERA_ALWAYS_INLINE unsigned for_each_prefetch_address(const void* data, std::size_t size,
                                                         const resource_header* header, F&& f) {
  if (data == nullptr) return 0;
  unsigned n = 0;
  if (header != nullptr) {
    f(static_cast<const void*>(header));
    n = 1;
  }
  // A resource annotated with 0 bytes still runs under its primitive, which reads the header: the
  // header is prefetched, no data line.
  if (size == 0) return n;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first_line = begin & ~std::uintptr_t{63};
  // The last line issued: the object's last, or the max_lines-th. One address compared per
  // line, no line index (three instructions a line, where an index cost five).
  const std::uintptr_t last_line =
      std::min<std::uintptr_t>((begin + size - 1) & ~std::uintptr_t{63},
                               first_line + std::uintptr_t{64} * (prefetch_plan::max_lines - 1));
  f(data);
  for (std::uintptr_t line = first_line + 64; line <= last_line; line += 64) {
    f(reinterpret_cast<const void*>(line));
  }
  return n + 1 + static_cast<unsigned>((last_line - first_line) / 64);
}

inline prefetch_plan plan_prefetch(const void* data, std::size_t size, bool writer,
                                   const resource_header* header) noexcept {
  prefetch_plan plan;
  plan.write = writer;
  unsigned i = 0;
  plan.count =
      for_each_prefetch_address(data, size, header, [&](const void* a) { plan.address[i++] = a; });
  return plan;
}

inline const resource_header* prefetched_header(const task& t) noexcept {
  return t.has_resource() ? resource_header::of(t.data()) : nullptr;
}

inline prefetch_plan plan_prefetch(const task& t) noexcept {
  return plan_prefetch(t.data(), t.data_size(), t.mode() == access::write, prefetched_header(t));
}

/// Issues one prefetch; RW = 1 with write intent. A class template, not two lambdas: GCC 12 -O3
/// compiled `mode == write ? for_each(..., [](a) { prefetch(a, 1) }) : for_each(..., [](a) {
/// prefetch(a, 0) })` with every prefetch instruction dropped and only the count kept (YCSB at
/// 10M records then took 672-889 instead of 463-554 ns per operation). Nothing but
/// the machine code shows it: the test prefetch.codegen (tests/prefetch_codegen.cpp) checks it.
template <int RW>
struct prefetch_line {
  TESSERA_ALWAYS_INLINE void operator()(const void* a) const noexcept {
    __builtin_prefetch(a, RW, 3);
  }
};

/// Issues `plan`'s prefetches (tests: every address must be safe to prefetch).
inline void issue_prefetch(const prefetch_plan& plan) noexcept {
  for (unsigned i = 0; i < plan.count; ++i) {
    if (plan.write) {
      prefetch_line<1>{}(plan.address[i]);
    } else {
      prefetch_line<0>{}(plan.address[i]);
    }
  }
}

/// Issues t's prefetches (plan_prefetch(t)'s addresses) as they are computed; returns how many.
TESSERA_ALWAYS_INLINE unsigned issue_prefetch(const task& t) noexcept {
  const resource_header* h = prefetched_header(t);
  if (t.mode() == access::write) {
    return for_each_prefetch_address(t.data(), t.data_size(), h, prefetch_line<1>{});
  }
  return for_each_prefetch_address(t.data(), t.data_size(), h, prefetch_line<0>{});
}

}  // namespace tessera::detail
