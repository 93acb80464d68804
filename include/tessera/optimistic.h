// tessera/optimistic.h — reading and writing fields of a resource that optimistic readers share.
//
// Under `optimistic_latch` and `optimistic_scheduled`, readers run while a writer may be changing
// the object; the runtime discards what they computed when the version check fails. In C++ such
// a concurrent plain read is still a data race (undefined behaviour, and ThreadSanitizer says
// so), so fields that readers and writers share are accessed through these two functions:
// relaxed atomic accesses, which compile to plain loads and stores on x86 and ARM.
//
//   struct account { std::int64_t balance; };
//   // in a reader task:  auto b = tessera::racy_load(acct->balance);
//   // in a writer task:  tessera::racy_store(acct->balance, b + 10);
//
// Ordering is provided by the runtime's version protocol (see src/sync/latch.h), not by these.
#pragma once

#include <atomic>
#include <type_traits>

namespace tessera {

template <class T>
  requires std::is_trivially_copyable_v<T>
inline T racy_load(const T& field) noexcept {
  return std::atomic_ref<T>(const_cast<T&>(field)).load(std::memory_order_relaxed);
}

template <class T>
  requires std::is_trivially_copyable_v<T>
inline void racy_store(T& field, T value) noexcept {
  std::atomic_ref<T>(field).store(value, std::memory_order_relaxed);
}

}  // namespace tessera
