// bench/ycsb/verify.h — what every answer of the ycsb benchmark is checked against.
//
// Values: each key has two legal values (ycsb::is_legal_value), so every READ, RMW and scanned
// record is checked wherever it was written. Presence: prepare_workload() classifies each
// operation by its key — `present` if the key was loaded and no run-phase operation inserts or
// removes it, `absent` if it was neither loaded nor is touched by such an operation, `either`
// when the answer depends on the order in which concurrent batches run (keys inserted or
// removed during the run). Inserts are `absent` when they must succeed.
//
//   error_log errors;
//   if (const char* what = lookup_error(e, op, found, value)) errors.record(i, op, what);
//   ...after the workers joined:
//   if (errors.count() > 0) std::puts(errors.first());
//
// Thread-safety: the check functions are pure; error_log::record may be called concurrently;
// count() and first() are exact once the recording threads joined (or the runtime is idle).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "kv/node.h"
#include "ycsb/operation.h"

namespace tessera::bench::ycsb_bench {

/// Whether an operation must find its key.
enum class expect : std::uint8_t { absent, present, either };

[[nodiscard]] constexpr const char* to_string(expect e) noexcept {
  return e == expect::absent ? "absent" : e == expect::present ? "present" : "either";
}

/// nullptr if finding (or not finding) the key agrees with `e`, else what went wrong.
[[nodiscard]] constexpr const char* presence_error(expect e, bool found) noexcept {
  if (e == expect::present && !found) return "key not found, but it must be present";
  if (e == expect::absent && found) return "key found, but it must be absent";
  return nullptr;
}

/// A READ (or the read of a read-modify-write).
[[nodiscard]] constexpr const char* lookup_error(expect e, const ::ycsb::operation& op, bool found,
                                                 std::uint64_t value) noexcept {
  if (const char* what = presence_error(e, found)) return what;
  if (found && !::ycsb::is_legal_value(op.key, value)) return "illegal value";
  return nullptr;
}

/// A SCAN that delivered `count` entries: at most scan_length, keys >= the start key and strictly
/// ascending, legal values, and the start key itself first when it must be present (a scan of
/// length 0, which a trace may ask for, delivers nothing).
[[nodiscard]] constexpr const char* scan_error(expect e, const ::ycsb::operation& op,
                                               const kv::entry* out, std::size_t count) noexcept {
  if (count > op.scan_length) return "scan returned more entries than asked for";
  if (e == expect::present && op.scan_length > 0 && (count == 0 || out[0].key != op.key))
    return "scan does not start with its start key, which must be present";
  if (e == expect::absent && count > 0 && out[0].key == op.key)
    return "scan starts with its start key, which must be absent";
  for (std::size_t i = 0; i < count; ++i) {
    if (out[i].key < op.key) return "scan returned a key below its start key";
    if (i > 0 && out[i].key <= out[i - 1].key) return "scan keys not strictly ascending";
    if (!::ycsb::is_legal_value(out[i].key, out[i].value)) return "scan returned an illegal value";
  }
  return nullptr;
}

/// Counts wrong answers and keeps the first one's description.
class error_log {
 public:
  void record(std::uint64_t index, const ::ycsb::operation& op, const char* what) noexcept {
    // relaxed: the count is read after the workers joined; fetch_add elects the one writer of
    // m_first.
    if (m_count.fetch_add(1, std::memory_order_relaxed) != 0) return;
    std::snprintf(m_first, sizeof m_first, "operation %llu, %s key %llu: %s",
                  static_cast<unsigned long long>(index), ::ycsb::to_string(op.type),
                  static_cast<unsigned long long>(op.key), what);
  }

  [[nodiscard]] std::uint64_t count() const noexcept {
    return m_count.load(std::memory_order_relaxed);
  }
  /// The first recorded error ("" if none). Only after the recording threads joined.
  [[nodiscard]] const char* first() const noexcept { return m_first; }

 private:
  std::atomic<std::uint64_t> m_count{0};
  char m_first[256] = {};
};

}  // namespace tessera::bench::ycsb_bench
