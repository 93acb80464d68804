// ycsb/operation.h: the operation record shared by the workload generator and the trace reader,
// YCSB's key naming (key_of = fnvhash64 of the key number, as CoreWorkload.buildKeyName with
// insertorder=hashed) and the deterministic values that let a benchmark check every READ it
// performs.
//
// Usage:
//   ycsb::operation op{.type = ycsb::op_type::insert, .key = ycsb::key_of(7)};
//   op.value = ycsb::value_of(op.key);            // the value a load/insert writes
//   uint64_t got = op.value;                      // ... later, what a READ of op.key returned
//   bool ok = ycsb::is_legal_value(op.key, got);  // value_of(key) or updated_value_of(key)
//   std::puts(ycsb::to_string(op.type));          // "INSERT"
//
// Value legality. Each key has exactly two legal values:
//   value_of(key)         = (key * 0x9E3779B97F4A7C15) ^ 0x5bd1e995   written by INSERT
//   updated_value_of(key) = ~value_of(key)            written by UPDATE and READ_MODIFY_WRITE
// They always differ, so a READ (or each record of a SCAN) is correct iff is_legal_value(key, v); a
// READ of a key that was loaded (or inserted earlier by the same stream) must find the key. Only
// remove operations (trace DELETE lines; the YCSB workloads never delete) make a key legitimately
// absent.
#pragma once

#include <cstdint>

#include "ycsb/distributions.h"

namespace ycsb {

enum class op_type : uint8_t { insert, read, update, scan, read_modify_write, remove };

// One operation. `key` is the 64-bit key (already hashed: key_of(keynum)). `value` is the value to
// write for insert (value_of(key)), update and read_modify_write (updated_value_of(key)), and 0 for
// read, scan and remove. `scan_length` is the number of records for scan, 0 otherwise. Layout note:
// scan_length sits next to type so that the record is 24 bytes, not 32 (50 M ops = 1.2 GB); prefer
// designated initializers.
struct operation {
  op_type type = op_type::read;
  uint32_t scan_length = 0;
  uint64_t key = 0;
  uint64_t value = 0;

  friend constexpr bool operator==(const operation&, const operation&) = default;
};
static_assert(sizeof(operation) == 24);

// The key of key number `keynum` with YCSB's default insertorder=hashed: fnvhash64(keynum). YCSB's
// string key is "user" + decimal(key_of(keynum)) (zeropadding 1), e.g. key_of(0) =
// 6284781860667377211.
[[nodiscard]] constexpr uint64_t key_of(uint64_t keynum) noexcept { return fnvhash64(keynum); }

[[nodiscard]] constexpr uint64_t value_of(uint64_t key) noexcept {
  return (key * 0x9E3779B97F4A7C15ULL) ^ 0x5bd1e995ULL;
}
[[nodiscard]] constexpr uint64_t updated_value_of(uint64_t key) noexcept { return ~value_of(key); }
[[nodiscard]] constexpr bool is_legal_value(uint64_t key, uint64_t value) noexcept {
  return value == value_of(key) || value == updated_value_of(key);
}

// "INSERT", "READ", "UPDATE", "SCAN", "RMW", "DELETE": the verbs of the trace format.
[[nodiscard]] const char* to_string(op_type type) noexcept;

}  // namespace ycsb
