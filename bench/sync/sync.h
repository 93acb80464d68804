// bench/sync/sync.h — `tessera-bench sync`: shared objects read and written under every
// synchronization primitive tessera injects, against plain threads with a lock per object.
//
// R objects of four cache lines of counters (32 int64). An operation is a read (sum the 32
// fields; they must all be equal) or a write (increment every field). A workload is one key
// sequence — pre-generated operations, each an object index and a read/write bit — for a
// read/write mix (100/0, 95/5, 50/50, 0/100) and an access pattern (uniform over the objects,
// or hot: --hot-percent of the operations on object 0, the rest uniform). Every implementation,
// at every worker count, runs the same sequence, cut into the same contiguous slices.
//
// Implementations: tessera with the objects as resources under `auto` (hints: read ratio from
// the mix, frequency::high for the hot object), `spinlock`, `rwlatch`, `optimistic`
// (optimistic_latch), `optimistic_scheduled` and `scheduling`; and W threads each running its
// slice with a std::shared_mutex per object (`threads-shared_mutex`, the reference) or a
// test-and-test-and-set spinlock per object (`threads-spinlock`). Fields are read and written
// with tessera::racy_load/racy_store everywhere (plain moves on x86), so the work per operation
// is the same code in every implementation.
//
// After every run the answer is checked before its time is kept: each object's fields all equal
// the number of writes the key sequence makes to it (objects are reset before each run), the
// number of reads done is exact, and no read saw an object whose fields differ (under optimistic
// primitives: after ctx.validate() returned true).
//
//   workload wl = make_workload({.objects = 1024, .ops = 300000, .write_percent = 5,
//                                .hot_percent = 0, .seed = 1});
//   measurement m = run_threads_shared_mutex(wl, cfg);   // throws bench_failure if wrong
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/tessera_settings.h"
#include "common/timing.h"
#include "tessera/optimistic.h"
#include "tessera/resource.h"

namespace tessera::bench::sync_bench {

inline constexpr unsigned fields_per_object = 32;  ///< four 64-byte lines

/// The data of one shared object.
struct alignas(64) counters {
  std::int64_t field[fields_per_object];
};

struct read_result {
  std::int64_t sum = 0;
  bool torn = false;
};

// The two loops below are unrolled whole: as loops of 32 short iterations their speed hung on
// where the linker put them (a loop across a 64-byte boundary of the instruction cache ran the
// threads baseline's write-only mix at 33 ns an operation in one build and 24 in another,
// docs/performance-notes.md), and every implementation of the benchmark runs them.
inline read_result read_object(const counters& c) noexcept {
  read_result r;
  const std::int64_t first = racy_load(c.field[0]);
#pragma GCC unroll 32
  for (unsigned i = 0; i < fields_per_object; ++i) {
    const std::int64_t v = racy_load(c.field[i]);
    r.sum += v;
    r.torn |= v != first;
  }
  return r;
}

inline void write_object(counters& c) noexcept {
#pragma GCC unroll 32
  for (unsigned i = 0; i < fields_per_object; ++i) {
    racy_store(c.field[i], racy_load(c.field[i]) + 1);
  }
}

inline void reset_object(counters& c) noexcept {
  for (unsigned i = 0; i < fields_per_object; ++i) racy_store(c.field[i], std::int64_t{0});
}

struct workload_spec {
  std::uint32_t objects = 1024;
  std::uint64_t ops = 300000;
  unsigned write_percent = 5;
  unsigned hot_percent = 0;  ///< 0: uniform; else this share of the operations hits object 0
  std::uint64_t seed = 1;
};

/// An operation: bit 31 set for a write, the object index below.
using key = std::uint32_t;
inline constexpr key write_bit = 0x80000000u;

struct workload {
  workload_spec spec;
  std::vector<key> keys;
  std::vector<std::uint64_t> writes_per_object;
  std::uint64_t reads = 0;

  /// [begin, end) of slice `i` out of `n` equal contiguous slices.
  std::size_t slice_begin(std::size_t i, std::size_t n) const noexcept {
    return keys.size() * i / n;
  }
};

workload make_workload(const workload_spec& spec);

/// What the operations of one run observed, summed over every thread or lane.
struct tally {
  std::uint64_t reads = 0;
  std::uint64_t writes = 0;
  std::uint64_t torn = 0;
  std::int64_t checksum = 0;  ///< sum of the read sums (keeps the reads from being optimized out)
};

/// Throws bench_failure unless the counts match `wl` and every object in `objects` holds its
/// number of writes in every field.
void check(const char* implementation, const workload& wl, const tally& t,
           const std::vector<counters*>& objects);

struct config {
  std::string implementation;  ///< what a failed check names ("sync <implementation>: ...")
  unsigned workers = 1;
  unsigned lanes = 32;  ///< tessera: operations in flight per worker
  /// The runtime's flags (--pin, which the threads follow too: worker i on tessera's CPU i,
  /// common/placement.h; --spin-us, --resource-memory, --adapt-distance, --runtime-stats).
  tessera_settings tessera;
  std::string label;  ///< for progress lines
  std::string mix;    ///< "95/5"
  bool hot = false;
  unsigned repeat = 3;
};

/// tessera with every object a resource under `fixed`, or, without one (`auto`), with the hints
/// the application knows (the read ratio of the mix, frequency::high for the hot object).
measurement run_tessera(std::optional<primitive> fixed, const workload& wl, const config& cfg);
/// W threads, a std::shared_mutex per object (readers shared) or a test-and-test-and-set
/// spinlock per object (everyone exclusive).
measurement run_threads_shared_mutex(const workload& wl, const config& cfg);
measurement run_threads_spinlock(const workload& wl, const config& cfg);

}  // namespace tessera::bench::sync_bench
