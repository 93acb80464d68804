// bench/prefetch/prefetch.h — annotation-based prefetching ([MxTasks] §3, §6.2) on random visits
// to objects in DRAM.
//
// The store is an array of objects (--object-bytes, 256 B .. 1 KiB) at least 4x the last-level
// cache. Each object is a sorted array of 16-byte entries {key, value}; entry j holds the key
// 2j+1, and its value packs an immutable 32-bit payload (high half) over a write counter (low
// half). A visit is one task: a binary search for a random key in a random object (an
// unpredictable walk, as in a tree node), adding the payload when the key is found; a writer
// visit also increments the write counter of the entry the search ended on. Each worker has
// `in_flight` lanes, each a chain of visits (the task re-annotates itself for its next object
// and returns `this`, like a tree traversal), so the prefetch window sees other lanes' visits
// ahead of the running one. Workers visit disjoint object ranges, so writers need no
// synchronization and the answer does not depend on the interleaving: the payload sum, the hit
// count and the write counters are checked against a recomputation of the same random sequences.
//
//   prefetch::object_store store(128 << 20, 1024, false);
//   prefetch::config cfg{.workers = 2, .distance = 2, .write_ratio = 0.2, .in_flight = 32,
//                        .visits = 1'000'000};
//   sample s = prefetch::run_tessera(rt, store, cfg, 0);  // bench_failure on a wrong answer
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/timing.h"

namespace tessera {
class runtime;
}

namespace tessera::bench::prefetch {

struct entry {
  std::uint64_t key;
  std::uint64_t value;  ///< payload << 32 | write counter
};

/// The objects. Entry j of object i: key 2j+1, payload payload_of(i, j), counter 0 at start.
class object_store {
 public:
  /// `total_bytes` rounded down to whole objects; `huge_pages` asks for transparent huge pages.
  object_store(std::size_t total_bytes, unsigned object_bytes, bool huge_pages);
  object_store(const object_store&) = delete;
  object_store& operator=(const object_store&) = delete;
  ~object_store();

  std::size_t objects() const noexcept { return m_objects; }
  unsigned object_bytes() const noexcept { return m_object_bytes; }
  unsigned entries() const noexcept { return m_object_bytes / sizeof(entry); }
  std::size_t bytes() const noexcept { return m_objects * m_object_bytes; }
  entry* object(std::size_t i) const noexcept {
    return reinterpret_cast<entry*>(m_memory + i * m_object_bytes);
  }
  /// Sum of every entry's write counter (a scan of the whole store).
  std::uint64_t write_count() const noexcept;

  static std::uint32_t payload_of(std::size_t object, unsigned index) noexcept;

 private:
  std::byte* m_memory = nullptr;
  std::size_t m_mapped = 0;
  std::size_t m_objects = 0;
  unsigned m_object_bytes = 0;
};

/// One visit: which object, which key, read or write.
struct visit {
  std::size_t object;
  std::uint64_t key;
  bool write;
};

/// The deterministic random visits of one lane: objects in [first, first + count), keys in
/// [0, 2 * entries), a writer with probability write_ratio.
class visit_sequence {
 public:
  visit_sequence(std::uint64_t seed, std::size_t first, std::size_t count, unsigned entries,
                 double write_ratio) noexcept;
  visit next() noexcept;

 private:
  std::uint64_t m_state;
  std::size_t m_first;
  std::size_t m_count;
  std::uint64_t m_keys;
  std::uint64_t m_write_threshold;  ///< a visit writes if its 53-bit draw is below this
};

/// What the lanes of one run found (the answer that is checked).
struct answer {
  std::uint64_t payload_sum = 0;
  std::uint64_t hits = 0;
  std::uint64_t writes = 0;
  friend bool operator==(const answer&, const answer&) = default;
};

struct config {
  unsigned workers = 1;
  unsigned distance = 0;  ///< prefetch distance (0: none); where adapting, the one it starts from
  bool adaptive = false;  ///< run in a runtime whose workers adapt the distance
  double write_ratio = 0;
  unsigned in_flight = 32;           ///< lanes per worker
  std::uint64_t visits = 1'000'000;  ///< per worker per run (ops = workers x visits)
  std::uint64_t seed = 1;
  std::string label;
};

/// The objects worker `w` of `workers` visits: [first, first + count).
struct object_range {
  std::size_t first;
  std::size_t count;
};
object_range range_of(const object_store& store, unsigned w, unsigned workers) noexcept;
/// Visits of lane `lane` of a worker: visits / in_flight, plus one for the first
/// (visits % in_flight) lanes.
std::uint64_t lane_visits(const config& cfg, unsigned lane) noexcept;
std::uint64_t lane_seed(const config& cfg, unsigned run, unsigned w, unsigned lane) noexcept;

/// The answer of run `run`, recomputed on one thread from the same sequences (payloads from
/// payload_of, never from the store).
answer expected(const object_store& store, const config& cfg, unsigned run);

/// Throws bench_failure if `got` differs from expected(store, cfg, run) or the store's write
/// counters do not add up to `writes_before` + the run's writes; returns the sample.
sample checked(const object_store& store, const config& cfg, unsigned run, const answer& got,
               std::uint64_t writes_before, double seconds);

/// Run number `run` (it picks the random sequences) on `rt`, which has cfg.workers workers,
/// after set_prefetch_distance(cfg.distance); bench_failure on a wrong answer.
sample run_tessera(runtime& rt, const object_store& store, const config& cfg, unsigned run);

/// The size of the last-level data cache in bytes (sysfs, then sysconf), 0 if unknown.
std::size_t last_level_cache_bytes();

}  // namespace tessera::bench::prefetch
