// ycsb/generator.h: YCSB core workloads A-F (site.ycsb.workloads.CoreWorkload with the
// workloads/workloada..f property files) as deterministic operation sequences: the load phase and
// per-thread run-phase streams.
//
// Usage:
//   ycsb::workload_generator gen{{.workload = 'a', .record_count = 1000, .operation_count = 5000}};
//   std::vector<ycsb::operation> load = gen.load_operations();  // INSERT key_of(0..999) in order
//   ycsb::operation_stream s = gen.run_stream(thread_index, thread_count);  // one per thread
//   while (s.remaining() > 0) { ycsb::operation op = s.next(); /* execute op */ }
//   std::printf("%s\n", gen.describe().c_str());  // "workload a: zipfian, ... read 0.50 ..."
//
// What comes from YCSB (CoreWorkload.init / doTransaction / nextKeynum):
//  - the operation chooser is DiscreteGenerator over read, update, insert, scan, read-modify-write,
//    in that order, with the workload file's proportions (op_mix::for_workload);
//  - uniform: UniformLongGenerator(0, record_count - 1) (run-phase inserts are never chosen, as in
//    YCSB);
//  - zipfian: ScrambledZipfianGenerator(0, record_count + expectednewkeys) with
//    expectednewkeys = (int)(operation_count * insert proportion * 2.0), and key numbers beyond the
//    last inserted one are redrawn (nextKeynum's loop);
//  - latest: SkewedLatestGenerator over the insert counter
//    (AcknowledgedCounterGenerator(record_count));
//  - scan length: UniformLongGenerator(min_scan_length, max_scan_length);
//  - load: CounterGenerator(0), i.e. key numbers 0 .. record_count - 1 in order; key =
//    key_of(keynum).
// What differs: YCSB's ThreadLocalRandom is replaced by a seeded rng (one per stream), and its
// client threads sharing one insert counter by disjoint deterministic streams:
//  - run_stream(t, T) produces operation_count / T operations (the first operation_count % T
//    streams one more); its random sequence depends only on (seed, t);
//  - the j-th insert (j = 0, 1, ...) of stream t takes key number record_count + t + j * T, so
//    streams never insert the same key and together fill record_count .. record_count + inserts - 1
//    densely;
//  - each stream sees the loaded key numbers plus its own inserts ("visible" items, record_count +
//    j after j inserts), numbered 0 .. visible - 1 in insertion order. The distributions above run
//    over that numbering exactly as YCSB runs over its global one (so `latest` is relative to the
//    stream's inserted count), and the chosen number is then mapped to its key number. Consequence:
//    every read, update, scan start and read-modify-write of a stream targets a key that was loaded
//    or inserted earlier by the same stream; with T = 1 the stream is exactly YCSB's single-client
//    sequence (up to the random source).
// Performance: no locks, no allocation and no indirect calls per operation; one pow() per
// zipfian/latest draw. The generator is immutable after construction and may be shared by threads;
// streams may not.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ycsb/distributions.h"
#include "ycsb/operation.h"

namespace ycsb {

enum class distribution : uint8_t { uniform, zipfian, latest };

// "uniform", "zipfian", "latest".
[[nodiscard]] const char* to_string(distribution d) noexcept;
// Parses the names above (YCSB's requestdistribution values); std::nullopt for anything else.
[[nodiscard]] std::optional<distribution> parse_distribution(std::string_view name) noexcept;

// Operation proportions (YCSB's readproportion, updateproportion, insertproportion, scanproportion,
// readmodifywriteproportion). They need not sum to 1: the chooser normalises, as DiscreteGenerator
// does.
struct op_mix {
  double read = 0;
  double update = 0;
  double insert = 0;
  double scan = 0;
  double read_modify_write = 0;

  // Workloads 'a'..'f' (either case), from YCSB's workloads/workloada..workloadf:
  //   a: read 0.5 update 0.5            b: read 0.95 update 0.05        c: read 1
  //   d: read 0.95 insert 0.05 e: scan 0.95 insert 0.05 f: read 0.5 read_modify_write 0.5
  // Throws std::invalid_argument for another letter.
  [[nodiscard]] static op_mix for_workload(char workload);

  [[nodiscard]] double total() const noexcept {
    return read + update + insert + scan + read_modify_write;
  }
  friend bool operator==(const op_mix&, const op_mix&) = default;
};

// "read 0.50 update 0.50 insert 0.00 scan 0.00 rmw 0.00" (normalised proportions).
[[nodiscard]] std::string to_string(const op_mix& mix);

// The request distribution a workload file names: latest for 'd', zipfian for the others.
[[nodiscard]] distribution default_distribution(char workload);

struct workload_spec {
  char workload = 'a';                                 // 'a'..'f' (or 'A'..'F')
  uint64_t record_count = 1000;                        // >= 1 (>= 2 for latest)
  uint64_t operation_count = 1000;                     // run-phase operations over all streams
  std::optional<distribution> request_distribution{};  // default: default_distribution(workload)
  uint64_t seed = 0x5eed;
  uint32_t max_scan_length = 100;  // workloade: maxscanlength=100
  uint32_t min_scan_length = 1;    // YCSB's minscanlength default
  std::optional<op_mix> mix{};     // default: op_mix::for_workload(workload)
  bool ordered_inserts = false;    // insertorder=ordered: key = keynum
};

class workload_generator;

// A deterministic run-phase operation sequence for one thread (see the file comment). Not
// thread-safe: one stream per thread. Copyable; a copy continues independently from the same point.
class operation_stream {
 public:
  // The next operation. May be called past size(): the sequence simply continues (for time-bounded
  // runs).
  operation next() noexcept;
  // Writes min(out.size(), remaining()) operations to the front of out; returns how many.
  std::size_t fill(std::span<operation> out) noexcept;

  // This stream's share of operation_count.
  [[nodiscard]] uint64_t size() const noexcept { return m_size; }
  [[nodiscard]] uint64_t produced() const noexcept { return m_produced; }
  [[nodiscard]] uint64_t remaining() const noexcept {
    return m_produced < m_size ? m_size - m_produced : 0;
  }
  // Inserts produced so far.
  [[nodiscard]] uint64_t inserted() const noexcept { return m_inserted; }
  // Loaded records plus this stream's inserts so far: the item count `latest` and zipfian are
  // relative to.
  [[nodiscard]] uint64_t visible_count() const noexcept { return m_record_count + m_inserted; }
  [[nodiscard]] uint32_t thread_index() const noexcept { return m_thread_index; }
  [[nodiscard]] uint32_t thread_count() const noexcept { return m_thread_count; }

 private:
  friend class workload_generator;
  operation_stream(const workload_generator& gen, uint32_t thread_index, uint32_t thread_count);

  [[nodiscard]] op_type choose_op() noexcept;
  // CoreWorkload.nextKeynum over the visible numbering.
  [[nodiscard]] uint64_t choose_visible() noexcept;
  [[nodiscard]] uint64_t keynum_of_visible(uint64_t visible) const noexcept;
  [[nodiscard]] uint64_t key_of_keynum(uint64_t keynum) const noexcept {
    return m_ordered_inserts ? keynum : key_of(keynum);
  }

  rng m_rng;
  // Normalised proportions in DiscreteGenerator order, zero ones skipped.
  double m_weight[5]{};
  op_type m_choice[5]{};
  uint32_t m_choice_count = 0;
  distribution m_distribution;
  bool m_ordered_inserts;
  uint32_t m_thread_index;
  uint32_t m_thread_count;
  uint64_t m_record_count;
  uint64_t m_size;
  uint64_t m_produced = 0;
  uint64_t m_inserted = 0;
  uniform_long_generator m_uniform;
  scrambled_zipfian_generator m_scrambled;
  skewed_latest_generator m_latest;
  uniform_long_generator m_scan_length;
};

class workload_generator {
 public:
  // Validates the spec (std::invalid_argument on an unknown workload, record_count 0, record_count
  // < 2 with latest, min_scan_length > max_scan_length, negative or all-zero proportions). For
  // `latest` this computes zeta(record_count - 1, 0.99) once: O(record_count), about 1 s per 50 M
  // records.
  explicit workload_generator(const workload_spec& spec);

  [[nodiscard]] const workload_spec& spec() const noexcept { return m_spec; }
  [[nodiscard]] const op_mix& mix() const noexcept { return m_mix; }
  [[nodiscard]] distribution request_distribution() const noexcept { return m_distribution; }
  [[nodiscard]] uint64_t record_count() const noexcept { return m_spec.record_count; }
  [[nodiscard]] uint64_t operation_count() const noexcept { return m_spec.operation_count; }
  // expectednewkeys of CoreWorkload: the scrambled Zipfian's key space is record_count + this + 1.
  [[nodiscard]] uint64_t expected_new_keys() const noexcept { return m_expected_new_keys; }
  // "workload a: zipfian, 1000 records, 1000 operations, read 0.50 update 0.50 ..."
  [[nodiscard]] std::string describe() const;

  // The key of a key number under this spec's insert order.
  [[nodiscard]] uint64_t key(uint64_t keynum) const noexcept {
    return m_spec.ordered_inserts ? keynum : key_of(keynum);
  }

  // Load phase: operation i (0 <= i < record_count) is {insert, key(i), value_of(key(i))}.
  [[nodiscard]] operation load_operation(uint64_t index) const noexcept {
    const uint64_t k = key(index);
    return operation{.type = op_type::insert, .scan_length = 0, .key = k, .value = value_of(k)};
  }
  // Load operations first_index .. first_index + out.size() - 1 into out (chunked or multi-threaded
  // loading: disjoint ranges may be filled concurrently). std::out_of_range past record_count.
  void fill_load(std::span<operation> out, uint64_t first_index) const;
  [[nodiscard]] std::vector<operation> load_operations() const;

  // Run phase: the stream of thread t of T (std::invalid_argument unless t < T).
  [[nodiscard]] operation_stream run_stream(uint32_t thread_index, uint32_t thread_count) const;
  // All operations of run_stream(t, T) in a vector; run_operations() is the single-stream sequence.
  [[nodiscard]] std::vector<operation> run_operations(uint32_t thread_index = 0,
                                                      uint32_t thread_count = 1) const;
  // How many operations run_stream(t, T) has: operation_count / T, plus one for t < operation_count
  // % T.
  [[nodiscard]] uint64_t stream_size(uint32_t thread_index, uint32_t thread_count) const noexcept;
  // The key number of stream t's j-th run-phase insert: record_count + t + j * T.
  [[nodiscard]] uint64_t insert_keynum(uint32_t thread_index, uint32_t thread_count,
                                       uint64_t j) const noexcept {
    return m_spec.record_count + thread_index + j * thread_count;
  }

 private:
  friend class operation_stream;

  workload_spec m_spec;
  op_mix m_mix;
  distribution m_distribution;
  uint64_t m_expected_new_keys = 0;
  double m_latest_zetan = 0;  // zeta(record_count - 1, 0.99) when distribution == latest
};

}  // namespace ycsb
