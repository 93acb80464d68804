// bench/ycsb/verify.h — what every answer of the ycsb benchmark is checked against.
//
// Values: each key has two legal values (ycsb::is_legal_value), so every READ, RMW and scanned
// record is checked wherever it was written. Presence: prepare_workload() classifies each
// operation by its key — `present` if the key was loaded and no run-phase operation inserts or
// removes it, `absent` if it was neither loaded nor is touched by such an operation, `either`
// when the answer depends on the order in which concurrent batches run (keys inserted or
// removed during the run). Inserts are `absent` when they must succeed.
//
// After each phase, the tree's content (content_error): every key the phase updated holds the
// updated value (a lost update fails here), every key no operation of the phase wrote holds the
// value it was loaded with, keys inserted or removed during the phase either legal value.
//
// Scans are checked for completeness too: the keys that are `present` throughout a phase (its
// "stable" keys, phase_data::stable_keys, sorted) that fall in the range a scan covered must all
// be in it. A scan from s that delivered all scan_length entries covered [s, last key delivered];
// one that delivered fewer reached the end of the tree and covered every key >= s. Keys inserted
// or removed during the phase may or may not appear.
//
//   error_log errors;
//   if (const wrong_answer w = lookup_error(e, op, found, value)) errors.record(i, op, w);
//   if (const wrong_answer w = scan_error(e, op, out, count, stable_keys)) errors.record(i, op, w);
//   ...after the workers joined:
//   if (errors.count() > 0) std::puts(errors.first());
//
// Thread-safety: the check functions are pure; error_log::record may be called concurrently;
// count() and first() are exact once the recording threads joined (or the runtime is idle).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>

#include "kv/node.h"
#include "ycsb/operation.h"

namespace tessera::bench::ycsb_bench {

/// What is wrong with an answer; converts to false when nothing is. A description, plus, for a
/// key named in it (a scan that skipped a key), the key, rendered between `what` and `rest`:
/// "scan skipped key 42, which must be present". Allocates nothing.
struct wrong_answer {
  const char* what = nullptr;
  const char* rest = "";
  std::uint64_t key = 0;
  bool has_key = false;

  constexpr wrong_answer() noexcept = default;
  // NOLINTNEXTLINE(google-explicit-constructor): the checks return descriptions or nullptr.
  constexpr wrong_answer(const char* description) noexcept : what(description) {}
  [[nodiscard]] static constexpr wrong_answer naming(const char* what, std::uint64_t key,
                                                     const char* rest) noexcept {
    wrong_answer w(what);
    w.rest = rest;
    w.key = key;
    w.has_key = true;
    return w;
  }
  constexpr explicit operator bool() const noexcept { return what != nullptr; }

  /// The description as text ("" if nothing is wrong); snprintf's result.
  int describe(char* buffer, std::size_t size) const noexcept {
    if (what == nullptr) return std::snprintf(buffer, size, "%s", "");
    if (!has_key) return std::snprintf(buffer, size, "%s", what);
    return std::snprintf(buffer, size, "%s %llu%s", what, static_cast<unsigned long long>(key),
                         rest);
  }
};

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

/// A filter in front of the checks for a driver that checks answers while it is timed: true only
/// if the answer is right — a READ that found (`ok`) a legal `value` or missed as `e` says, an
/// UPDATE that found its key or missed as `e` says (`value` what it wrote, legal), an INSERT that
/// inserted (`ok`) a key that must have been absent. Decided with no branch on the operation's
/// type: in a random mix of reads and updates (YCSB A, B) a switch mispredicted about every other
/// answer. False says nothing; the caller then runs the full check.
[[nodiscard]] constexpr bool plainly_right(const ::ycsb::operation& op, expect e, bool ok,
                                           std::uint64_t value) noexcept {
  const bool read_or_update =
      (op.type == ::ycsb::op_type::read) | (op.type == ::ycsb::op_type::update);
  const bool insert = op.type == ::ycsb::op_type::insert;
  return (read_or_update & (ok == (e == expect::present)) &
          (!ok | ::ycsb::is_legal_value(op.key, value))) |
         (insert & ok & (e == expect::absent));
}

/// A SCAN that delivered `count` entries: at most scan_length, keys >= the start key and strictly
/// ascending, legal values, and the start key itself first when it must be present (a scan of
/// length 0, which a trace may ask for, delivers nothing). Then completeness: every key of
/// `stable` (sorted ascending; the keys present throughout the phase) in the range the scan
/// covered must be in it — [start key, last key delivered] when it delivered scan_length entries,
/// every key >= the start key when it delivered fewer (it ran to the end of the tree). Keys not in
/// `stable` may be missing. O(count + stable keys in the range + log |stable|), no allocation.
[[nodiscard]] constexpr wrong_answer scan_error(expect e, const ::ycsb::operation& op,
                                                const kv::entry* out, std::size_t count,
                                                std::span<const std::uint64_t> stable) noexcept {
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
  const bool to_the_end = count < op.scan_length;  // the tree ended before scan_length entries
  if (!to_the_end && count == 0) return nullptr;   // a scan of length 0 covers nothing
  const std::uint64_t last = count > 0 ? out[count - 1].key : 0;
  std::size_t j = 0;  // merge walk: out[j] is the first delivered entry not below the stable key
  for (auto k = std::lower_bound(stable.begin(), stable.end(), op.key); k != stable.end(); ++k) {
    if (!to_the_end && *k > last) break;
    while (j < count && out[j].key < *k) ++j;
    if (j == count || out[j].key != *k)
      return wrong_answer::naming("scan skipped key", *k, ", which must be present");
    ++j;
  }
  return nullptr;
}

/// After a phase, on the quiescent tree under `root`: what every key holds. Walks the leaves left
/// to right (the leftmost leaf by first children, then the right links) beside the two sorted
/// lists of phase_data: a key of `updated` must be present with updated_value_of(key) (else the
/// tree lost an update, or the key); a key of `unsettled` may hold either legal value; every
/// other key must hold value_of(key), the value it was loaded with (an updated value there is an
/// update that went to the wrong key); and the keys not in `unsettled` must number
/// `settled_count` (phase_data::settled_count: a lost key, or one that appeared from nowhere,
/// fails). O(keys in the tree + |updated| + |unsettled|), no
/// allocation. The structure itself is kv::check_tree's to check (call it first).
[[nodiscard]] inline wrong_answer content_error(const kv::node* root,
                                                std::span<const std::uint64_t> updated,
                                                std::span<const std::uint64_t> unsettled,
                                                std::uint64_t settled_count) noexcept {
  if (root == nullptr) return "the tree has no root";
  const kv::node* leaf = root;
  while (!leaf->is_leaf()) {
    leaf = leaf->child(0);
    if (leaf == nullptr) return "an inner node has no first child";
  }
  std::size_t u = 0;  // updated[u]: the first updated key not below the key looked at
  std::size_t x = 0;  // unsettled[x]: likewise
  std::uint64_t settled = 0;  // keys seen that are not in unsettled
  for (; leaf != nullptr; leaf = leaf->right()) {
    for (std::size_t i = 0; i < leaf->count(); ++i) {
      const std::uint64_t key = leaf->key(i);
      const std::uint64_t value = leaf->value(i);
      if (u < updated.size() && updated[u] < key)
        return wrong_answer::naming("key", updated[u],
                                    ", which the phase updated, is missing from the tree");
      while (x < unsettled.size() && unsettled[x] < key) ++x;
      if (!::ycsb::is_legal_value(key, value))
        return wrong_answer::naming("key", key, " holds an illegal value after the phase");
      if (u < updated.size() && updated[u] == key) {
        ++u;
        if (value != ::ycsb::updated_value_of(key))
          return wrong_answer::naming("key", key,
                                      " holds its loaded value, but the phase updated it (a lost "
                                      "update)");
        ++settled;
      } else if (x < unsettled.size() && unsettled[x] == key) {
        // inserted or removed by the phase: either legal value
      } else {
        ++settled;
        if (value != ::ycsb::value_of(key))
          return wrong_answer::naming("key", key,
                                      " holds an updated value, but no update of the phase named "
                                      "it");
      }
    }
  }
  if (u < updated.size())
    return wrong_answer::naming("key", updated[u],
                                ", which the phase updated, is missing from the tree");
  if (settled < settled_count)
    return "the tree lost a key that no insert or remove of the phase named";
  if (settled > settled_count)
    return "the tree holds a key that was neither loaded nor inserted";
  return nullptr;
}

/// Counts wrong answers and keeps the first one's description.
class error_log {
 public:
  void record(std::uint64_t index, const ::ycsb::operation& op, const wrong_answer& what) noexcept {
    // relaxed: the count is read after the workers joined; fetch_add elects the one writer of
    // m_first.
    if (m_count.fetch_add(1, std::memory_order_relaxed) != 0) return;
    const int n =
        std::snprintf(m_first, sizeof m_first,
                      "operation %llu, %s key %llu: ", static_cast<unsigned long long>(index),
                      ::ycsb::to_string(op.type), static_cast<unsigned long long>(op.key));
    if (n >= 0 && static_cast<std::size_t>(n) < sizeof m_first)
      what.describe(m_first + n, sizeof m_first - static_cast<std::size_t>(n));
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
