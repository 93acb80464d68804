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
//   prefetch_plan plan = plan_prefetch(*t);
//   issue_prefetch(plan);        // plan.count instructions
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "tessera/detail/resource_header.h"
#include "tessera/task.h"

namespace tessera::detail {

struct prefetch_plan {
  static constexpr unsigned max_lines = 16;
  // Not zero-initialized: only the first `count` entries are meant (a plan is built per task
  // entering the window, and clearing 136 bytes each time showed up in profiles).
  std::array<const void*, max_lines + 1> address;
  unsigned count = 0;
  bool write = false;  ///< every line with write intent (the task writes) or none
};

inline prefetch_plan plan_prefetch(const void* data, std::size_t size, bool writer,
                                   const resource_header* header) noexcept {
  prefetch_plan plan;
  plan.write = writer;
  if (data == nullptr || size == 0) return plan;
  if (header != nullptr) plan.address[plan.count++] = header;  // its address only: not read here
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t end = begin + size;
  const std::uintptr_t first_line = begin & ~std::uintptr_t{63};
  unsigned lines = 0;
  for (std::uintptr_t line = first_line; line < end && lines < prefetch_plan::max_lines;
       line += 64, ++lines) {
    plan.address[plan.count++] = reinterpret_cast<const void*>(line < begin ? begin : line);
  }
  return plan;
}

inline prefetch_plan plan_prefetch(const task& t) noexcept {
  const bool writer = t.mode() == access::write;
  const resource_header* h = t.has_resource() ? resource_header::of(t.data()) : nullptr;
  return plan_prefetch(t.data(), t.data_size(), writer, h);
}

inline void issue_prefetch(const prefetch_plan& plan) noexcept {
  if (plan.write) {
    for (unsigned i = 0; i < plan.count; ++i) __builtin_prefetch(plan.address[i], 1, 3);
  } else {
    for (unsigned i = 0; i < plan.count; ++i) __builtin_prefetch(plan.address[i], 0, 3);
  }
}

}  // namespace tessera::detail
