// The tessera implementation: kv::task_tree driven by one driver task per batch.
//
// Each worker owns `batches_per_worker` batch slots (default 2, so that while one batch drains
// the other keeps the worker's queue — and with it the prefetch window — full). A slot's driver
// task runs on its worker: it takes the next batch of operation indices from the shared cursor
// and submits one pre-allocated kv::request per operation from inside the task. A request's
// on_done only counts it down (those the tree completes inside its submit run none: the driver
// counts them down together, kv::inline_completion::counted); the batch's last completion checks
// every answer of the batch in one pass and spawns the slot's next driver task. A
// read-modify-write is a lookup whose on_done checks the read and submits the update with the
// same request. When the cursor passes the end, the drivers stop respawning and the runtime
// drains; the phase ends when it is idle. Per operation the benchmark allocates nothing (one
// driver task per batch).
#include "tessera/tessera.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/timing.h"
#include "ycsb/ycsb.h"

namespace tessera::bench::ycsb_bench {

namespace {

using ::ycsb::op_type;

struct phase_state;

/// The requests of one batch in flight, with their scan buffers. Owned by one worker's driver.
/// On cache lines of its own: `remaining` is written by every completion, and slots of two workers
/// were allocated back to back (a line shared; no change measurable on 2 cores, see README).
struct alignas(64) batch_slot {
  phase_state* phase = nullptr;
  worker_id owner;
  /// Requests of the current batch not completed yet; the last completion respawns the driver.
  std::atomic<std::uint32_t> remaining{0};
  std::uint64_t first = 0;  ///< operation index of requests[0]
  std::uint32_t count = 0;  ///< requests in the current batch
  std::uint32_t scan_stride = 0;
  std::vector<kv::request> requests;
  std::vector<kv::entry> scan_space;  ///< requests.size() * scan_stride entries
};

/// What the driver tasks and completions of one phase share.
struct phase_state {
  runtime* rt = nullptr;
  kv::task_tree* tree = nullptr;
  const ::ycsb::operation* ops = nullptr;
  const expect* expected = nullptr;
  std::span<const std::uint64_t> stable_keys;  ///< what scans must not skip (scan_error)
  std::uint64_t op_count = 0;
  std::uint32_t batch = 0;
  error_log* errors = nullptr;
  progress* meter = nullptr;
  /// Next operation index to hand out; own line, every driver task updates it.
  alignas(64) std::atomic<std::uint64_t> cursor{0};
  /// Operations completed (counted per batch), checked against op_count at the end.
  alignas(64) std::atomic<std::uint64_t> completed{0};
};

/// The tree request of each YCSB operation type (a read-modify-write starts as its read).
constexpr kv::request_type request_type_of[] = {
    kv::request_type::insert,  // op_type::insert
    kv::request_type::lookup,  // op_type::read
    kv::request_type::update,  // op_type::update
    kv::request_type::scan,    // op_type::scan
    kv::request_type::lookup,  // op_type::read_modify_write
    kv::request_type::remove,  // op_type::remove
};
static_assert(static_cast<int>(op_type::insert) == 0 && static_cast<int>(op_type::read) == 1 &&
              static_cast<int>(op_type::update) == 2 && static_cast<int>(op_type::scan) == 3 &&
              static_cast<int>(op_type::read_modify_write) == 4 &&
              static_cast<int>(op_type::remove) == 5);

void finish_batch(batch_slot& slot);
void on_request_done(kv::request& r);
void on_rmw_read_done(kv::request& r);

class batch_driver final : public task {
 public:
  explicit batch_driver(batch_slot* slot) noexcept : m_slot(slot) {}

  task* execute(context& ctx) override {
    batch_slot& slot = *m_slot;
    phase_state& p = *slot.phase;
    // relaxed: the cursor only hands out indices; the operations were published by the spawn.
    const std::uint64_t first = p.cursor.fetch_add(p.batch, std::memory_order_relaxed);
    if (first >= p.op_count) return nullptr;  // this slot is done for the phase
    const auto count =
        static_cast<std::uint32_t>(std::min<std::uint64_t>(p.batch, p.op_count - first));
    slot.first = first;
    slot.count = count;
    // relaxed: each submit below publishes it (with the request) to the completing worker.
    slot.remaining.store(count, std::memory_order_relaxed);
    bool read_modify_writes = false;
    for (std::uint32_t i = 0; i < count; ++i) {
      kv::request& r = slot.requests[i];
      const ::ycsb::operation& op = p.ops[first + i];
      // Only what the request's type reads is written: the tree sets the status of every request
      // (and a scan's scanned), and the checks read a lookup's value only when it found the key.
      // The type comes from a table, not a switch: a mix of reads and updates in random order (A,
      // B) made the switch's indirect jump a misprediction on about every other operation.
      r.type = request_type_of[static_cast<std::size_t>(op.type)];
      r.key = op.key;
      r.value = op.value;  // 0 for a read, a scan and a remove; what an insert or update writes
      r.on_done = on_request_done;
      r.user = &slot;
      if (op.type == op_type::read_modify_write) [[unlikely]] {
        r.on_done = on_rmw_read_done;
        read_modify_writes = true;
      } else if (op.type == op_type::scan) [[unlikely]] {
        r.scan_count = op.scan_length;
        r.scan_out = slot.scan_space.data() + std::size_t{i} * slot.scan_stride;
      }
    }
    // Requests completed inside submit are counted down here, together (their on_done would only
    // count them), unless a read-modify-write's read needs its on_done to submit its update.
    // Until then the batch cannot complete: the slot stays this driver's.
    const std::span<kv::request> requests(slot.requests.data(), count);
    if (read_modify_writes) {
      // After this the slot may already be reused (its batch completed): touch nothing of it.
      p.tree->submit(requests, ctx);
      return nullptr;
    }
    const auto done = static_cast<std::uint32_t>(
        p.tree->submit(requests, ctx, kv::inline_completion::counted));
    // acq_rel, as on_request_done's: these answers happen-before the last completion's check.
    if (done != 0 && slot.remaining.fetch_sub(done, std::memory_order_acq_rel) == done)
      finish_batch(slot);
    return nullptr;
  }

 private:
  batch_slot* m_slot;
};

/// What is wrong with the answer of a finished request (false if it is right).
wrong_answer answer_error(const kv::request& r, const ::ycsb::operation& op, expect e,
                          std::span<const std::uint64_t> stable_keys) {
  const bool ok = r.status == kv::request_status::ok;
  switch (op.type) {
    case op_type::insert:
      if (r.status == kv::request_status::not_found) return "insert answered not_found";
      return presence_error(e, !ok);
    case op_type::read:
    case op_type::read_modify_write:  // its read; the update is checked like an update
      return r.type == kv::request_type::lookup ? lookup_error(e, op, ok, r.value)
                                                : presence_error(e, ok);
    case op_type::update:
    case op_type::remove: return presence_error(e, ok);
    case op_type::scan: return scan_error(e, op, r.scan_out, r.scanned, stable_keys);
  }
  return "unknown operation type";
}

/// Checks every answer of the slot's finished batch (a read-modify-write's update; its read was
/// checked when it completed), in one pass on the worker of the last completion.
void check_batch(const batch_slot& slot) {
  const phase_state& p = *slot.phase;
  const kv::request* const requests = slot.requests.data();
  for (std::uint32_t i = 0; i < slot.count; ++i) {
    const std::uint64_t index = slot.first + i;
    const ::ycsb::operation& op = p.ops[index];
    const expect e = p.expected[index];
    const kv::request& r = requests[i];
    if (plainly_right(op, e, r.status == kv::request_status::ok, r.value)) [[likely]] continue;
    if (const wrong_answer what = answer_error(r, op, e, p.stable_keys)) [[unlikely]] {
      p.errors->record(index, op, what);
    }
  }
}

/// The batch's last completion: check the batch, count it, respawn the slot's driver. Out of
/// line, so that a completion that is not the batch's last stays a short leaf function.
[[gnu::noinline]] void finish_batch(batch_slot& slot) {
  phase_state& p = *slot.phase;
  check_batch(slot);
  const std::uint32_t count = slot.count;
  p.meter->add(slot.owner.value, count);
  p.completed.fetch_add(count, std::memory_order_relaxed);  // read after the runtime is idle
  auto* next = p.rt->make_task<batch_driver>(&slot);
  next->annotate(slot.owner);
  p.rt->spawn(next);
}

/// A request's completion: only counted; the batch's last one checks every answer of the batch
/// and respawns the slot's driver.
void on_request_done(kv::request& r) {
  batch_slot& slot = *static_cast<batch_slot*>(r.user);
  // acq_rel: every completion's answer (written before its on_done) happens-before the last
  // completion, which reads them all and hands the slot to the next driver task.
  if (slot.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) finish_batch(slot);
}

/// A read-modify-write's read is done: check it (the update reuses the request), then submit the
/// update with the same request; its completion is counted and checked like any other.
void on_rmw_read_done(kv::request& r) {
  batch_slot& slot = *static_cast<batch_slot*>(r.user);
  const phase_state& p = *slot.phase;
  const std::uint64_t index = slot.first + static_cast<std::uint64_t>(&r - slot.requests.data());
  const ::ycsb::operation& op = p.ops[index];
  if (const wrong_answer what = answer_error(r, op, p.expected[index], p.stable_keys))
      [[unlikely]] {
    p.errors->record(index, op, what);
  }
  r = kv::request{.type = kv::request_type::update,
                  .key = op.key,
                  .value = op.value,
                  .on_done = on_request_done,
                  .user = &slot};
  p.tree->submit(r, nullptr);  // on_done has no context: routed like an outside submit
}

class tessera_store final : public store {
 public:
  explicit tessera_store(const tessera_config& s) : m_config(s), m_rt(options_for(s)) {
    for (unsigned w = 0; w < s.workers; ++w) {
      for (unsigned b = 0; b < s.batches_per_worker; ++b) {
        auto slot = std::make_unique<batch_slot>();
        slot->owner = worker_id{static_cast<std::uint16_t>(w)};
        slot->requests.resize(s.batch);
        m_slots.push_back(std::move(slot));
      }
    }
  }

  ~tessera_store() override {
    m_rt.wait_idle();
    m_tree.reset();
  }

  void create_tree() override {
    m_tree = std::make_unique<kv::task_tree>(m_rt, kv::tree_options{.sync = m_config.sync,
                                                                   .visit_bytes = m_config.visit_bytes,
                                                                   .coupled_bytes = m_config.coupled_bytes,
                                                                   .coupled_leaf_bytes = m_config.coupled_leaf_bytes});
  }
  void destroy_tree() override {
    m_rt.wait_idle();
    m_tree.reset();
  }
  [[nodiscard]] const kv::node* root() const override { return m_tree->root(); }
  [[nodiscard]] std::size_t size() const override { return m_tree->size(); }
  void report_statistics(const std::string& label) const override {
    m_config.runtime.print_statistics(label, m_rt);
  }

  double execute(const phase_data& phase, progress& meter, error_log& errors) override {
    phase_state p;
    p.rt = &m_rt;
    p.tree = m_tree.get();
    p.ops = phase.ops.data();
    p.expected = phase.expected.data();
    p.stable_keys = phase.stable_keys;
    p.op_count = phase.ops.size();
    p.batch = m_config.batch;
    p.errors = &errors;
    p.meter = &meter;
    for (auto& slot : m_slots) {
      slot->phase = &p;
      slot->scan_stride = phase.max_scan_length;
      slot->scan_space.resize(std::size_t{m_config.batch} * phase.max_scan_length);
    }
    stopwatch clock;
    for (auto& slot : m_slots) {
      auto* driver = m_rt.make_task<batch_driver>(slot.get());
      driver->annotate(slot->owner);
      m_rt.spawn(driver);
    }
    m_rt.wait_idle();
    const double seconds = clock.seconds();
    const std::uint64_t completed = p.completed.load(std::memory_order_relaxed);
    const std::vector<std::exception_ptr> thrown = m_rt.take_unhandled_exceptions();
    if (!thrown.empty())
      throw bench_failure(std::to_string(thrown.size()) + " task(s) threw during the phase");
    if (completed != p.op_count)
      throw bench_failure(std::to_string(completed) + " of " + std::to_string(p.op_count) +
                          " requests completed before the runtime went idle");
    return seconds;
  }

 private:
  static runtime_options options_for(const tessera_config& s) {
    runtime_options o = s.runtime.options(s.workers);
    o.prefetch_distance = s.prefetch_distance;
    return o;
  }

  tessera_config m_config;
  runtime m_rt;
  std::vector<std::unique_ptr<batch_slot>> m_slots;
  std::unique_ptr<kv::task_tree> m_tree;
};

}  // namespace

std::unique_ptr<store> make_tessera_store(const tessera_config& config) {
  return std::make_unique<tessera_store>(config);
}

}  // namespace tessera::bench::ycsb_bench
