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
// A field must be one that the CPU reads and writes in one access (lock-free, aligned as such):
// up to 8 bytes on x86-64, aligned to its size. A wider field (a struct of three words, an array)
// is read member by member; a struct whose alignment is less than its size (two int32_t: 8
// bytes, aligned to 4) gets alignas(8) or is read member by member. Both are compile errors
// here, instead of a misaligned atomic access or a call into libatomic's locks.
#pragma once

#include <atomic>
#include <type_traits>

namespace tessera {

namespace detail {
template <class T>
constexpr void check_racy_field() noexcept {
  static_assert(std::atomic_ref<T>::is_always_lock_free,
                "tessera::racy_load/racy_store: this type is too wide for one lock-free access; "
                "read and write its members one by one");
  static_assert(alignof(T) >= std::atomic_ref<T>::required_alignment,
                "tessera::racy_load/racy_store: this type is aligned less than an atomic access of "
                "its size needs; give it alignas(sizeof(T)) or access its members one by one");
}
}  // namespace detail

template <class T>
  requires std::is_trivially_copyable_v<T>
inline T racy_load(const T& field) noexcept {
  detail::check_racy_field<T>();
  return std::atomic_ref<T>(const_cast<T&>(field)).load(std::memory_order_relaxed);
}

/// The value's type is the field's (not deduced from it): racy_store(u64_field, 0) compiles.
template <class T>
  requires std::is_trivially_copyable_v<T>
inline void racy_store(T& field, std::type_identity_t<T> value) noexcept {
  detail::check_racy_field<T>();
  std::atomic_ref<T>(field).store(value, std::memory_order_relaxed);
}

}  // namespace tessera
