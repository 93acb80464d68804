// sync on tessera: the objects are resources, every operation is one task execution under the
// primitive the runtime injects.
//
// Driving: W × --lanes lane tasks, lane i starting on worker i mod W, each owning one contiguous
// slice of the key sequence (the threads split it the same way, into W slices). A lane runs one
// operation per execution — annotated with the operation's object and access mode — then
// re-annotates itself for its next key and returns `this`: the runtime routes it (readers and
// latched writers stay on the worker that ran it, tasks serialized by scheduling go to their
// object's pool) and wraps it in the object's primitive; no allocation per operation. The lanes
// of a worker are what its prefetch window looks ahead at. This is the MxTasking pattern (a
// task re-annotated for the next object, [MxTasks] Fig. 6) and costs one scheduling round per
// operation, which the threads do not pay: the comparison includes it on purpose.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/spawn_and_wait.h"
#include "sync/sync.h"
#include "tessera/tessera.h"

namespace tessera::bench::sync_bench {

namespace {

struct alignas(64) lane_slot {
  tally result;
};

class lane final : public task {
 public:
  lane(const workload& wl, counters* const* objects, std::size_t begin, std::size_t end,
       lane_slot& out) noexcept
      : m_keys(wl.keys.data()), m_objects(objects), m_next(begin), m_end(end), m_out(&out) {
    aim();
  }

  /// Reads, validates, and only then counts and moves on (tessera/task.h): an optimistic read
  /// takes no copy of the lane.
  static constexpr bool validates_first = true;

  task* execute(context& ctx) override {
    // The object and the access this execution was annotated with (aim()): read back from the
    // annotation, as a task on a resource does, rather than looked up again in the key sequence
    // and the object table (two dependent loads, the table's line often out of L1).
    counters& c = *static_cast<counters*>(const_cast<void*>(data()));
    if (mode() == access::write) {
      write_object(c);
      ++m_tally.writes;
    } else {
      const read_result r = read_object(c);
      if (!ctx.validate()) return nullptr;  // a writer overlapped: re-run as it is
      ++m_tally.reads;
      m_tally.checksum += r.sum;
      m_tally.torn += r.torn ? 1 : 0;
    }
    if (++m_next == m_end) {
      m_out->result = m_tally;
      return nullptr;
    }
    aim();
    return this;
  }

 private:
  void aim() noexcept {
    const key k = m_keys[m_next];
    clear_annotations();  // also the worker a lane starts on
    annotate_resource(m_objects[k & ~write_bit],
                      (k & write_bit) != 0 ? access::write : access::read);
    // The table's entry for the lane's next operation, requested a round of the worker's lanes
    // before the next aim() reads it: at a million objects the table is 8 MiB, and waiting for
    // its line took half of a write's time (the threads index an array of the objects and load
    // nothing to find one).
    if (m_next + 1 < m_end) __builtin_prefetch(&m_objects[m_keys[m_next + 1] & ~write_bit]);
  }

  const key* m_keys;
  counters* const* m_objects;
  std::size_t m_next;
  std::size_t m_end;
  lane_slot* m_out;
  tally m_tally;
};

resource_hints hints_for(std::optional<primitive> fixed, const workload& wl, std::size_t object,
                         bool hot) {
  if (fixed.has_value()) return {.primitive = *fixed};
  // auto: only what the application knows — how often the object is read, and which one is hot.
  return {.isolation = isolation::exclusive_writers,
          .read_ratio = (100.0 - wl.spec.write_percent) / 100.0,
          .frequency = hot && object == 0 ? frequency::high : frequency::normal};
}

}  // namespace

measurement run_tessera(std::optional<primitive> fixed, const workload& wl, const config& cfg) {
  runtime rt(cfg.tessera.options(cfg.workers));
  std::vector<counters*> objects;
  objects.reserve(wl.spec.objects);
  for (std::size_t o = 0; o < wl.spec.objects; ++o) {
    objects.push_back(rt.make_resource<counters>(hints_for(fixed, wl, o, cfg.hot)));
  }
  const std::size_t lanes = std::size_t{cfg.workers} * cfg.lanes;
  const measurement m = measure(cfg.label, cfg.repeat, [&] {
    for (counters* c : objects) reset_object(*c);
    std::vector<lane_slot> slots(lanes);
    std::vector<task*> tasks;
    for (std::size_t i = 0; i < lanes; ++i) {
      const std::size_t begin = wl.slice_begin(i, lanes);
      const std::size_t end = wl.slice_begin(i + 1, lanes);
      if (begin == end) continue;
      task* t = rt.make_task<lane>(wl, objects.data(), begin, end, slots[i]);
      t->annotate(worker_id(static_cast<std::uint16_t>(i % cfg.workers)));
      tasks.push_back(t);
    }
    const double seconds = spawn_and_wait(rt, tasks);  // objects and slots are visible now
    tally total;
    for (const lane_slot& s : slots) {
      total.reads += s.result.reads;
      total.writes += s.result.writes;
      total.torn += s.result.torn;
      total.checksum += s.result.checksum;
    }
    check(cfg.implementation.c_str(), wl, total, objects);
    return sample{.ops = wl.keys.size(), .seconds = seconds};
  });
  if (cfg.tessera.statistics) {
    std::fprintf(stderr, "tessera-bench: %s: primitive %s; runtime statistics, all runs\n%s",
                 cfg.label.c_str(),
                 std::string(to_string(runtime::primitive_of(objects[0]))).c_str(),
                 rt.statistics().to_string().c_str());
  }
  for (counters* c : objects) rt.retire_resource(c);
  return m;
}

}  // namespace tessera::bench::sync_bench
