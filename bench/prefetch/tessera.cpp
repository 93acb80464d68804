// prefetch on tessera: one task per visit, each lane a task that re-annotates itself.
//
// A lane task is annotated with its worker (so it stays on the worker whose object range its
// sequence draws from) and, for each visit, with the whole object it is about to search
// (annotate_data, access::write for writer visits). It searches, records what it found, draws
// its next visit, re-annotates itself and returns `this`: it goes to the back of its worker's
// queue behind the other lanes, whose visits are what the prefetch window looks ahead at.
#include "tessera/tessera.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/spawn_and_wait.h"
#include "prefetch/prefetch.h"

namespace tessera::bench::prefetch {

namespace {

struct alignas(64) lane_slot {
  answer found;
};

class lane final : public task {
 public:
  lane(const object_store& store, visit_sequence sequence, std::uint64_t visits,
       lane_slot& out) noexcept
      : m_store(&store), m_sequence(sequence), m_left(visits), m_out(&out) {
    aim();
  }

  task* execute(context&) override {
    entry* const first = m_store->object(m_visit.object);
    entry* const e =
        std::lower_bound(first, first + m_store->entries(), m_visit.key,
                         [](const entry& x, std::uint64_t key) { return x.key < key; });
    // Keys never exceed the last entry's, so `e` is inside the object.
    if (e->key == m_visit.key) {
      m_found.payload_sum += e->value >> 32;
      ++m_found.hits;
    }
    if (m_visit.write) {
      ++e->value;  // only this worker visits this object: no synchronization needed
      ++m_found.writes;
    }
    if (--m_left == 0) {
      m_out->found = m_found;
      return nullptr;
    }
    aim();
    return this;
  }

 private:
  void aim() noexcept {
    m_visit = m_sequence.next();
    annotate_data(m_store->object(m_visit.object), m_store->object_bytes(),
                  m_visit.write ? access::write : access::read);
  }

  const object_store* m_store;
  visit_sequence m_sequence;
  std::uint64_t m_left;
  lane_slot* m_out;
  visit m_visit{};
  answer m_found;
};

}  // namespace

sample run_tessera(runtime& rt, const object_store& store, const config& cfg, unsigned run) {
  rt.set_prefetch_distance(cfg.distance);
  const std::uint64_t writes_before = store.write_count();
  std::vector<lane_slot> slots(std::size_t{cfg.workers} * cfg.in_flight);
  std::vector<task*> lanes;
  for (unsigned w = 0; w < cfg.workers; ++w) {
    const object_range r = range_of(store, w, cfg.workers);
    for (unsigned l = 0; l < cfg.in_flight; ++l) {
      const std::uint64_t visits = lane_visits(cfg, l);
      if (visits == 0) continue;
      visit_sequence seq(lane_seed(cfg, run, w, l), r.first, r.count, store.entries(),
                         cfg.write_ratio);
      task* t = rt.make_task<lane>(store, seq, visits, slots[w * cfg.in_flight + l]);
      t->annotate(worker_id(static_cast<std::uint16_t>(w)));
      lanes.push_back(t);
    }
  }
  const double seconds = spawn_and_wait(rt, lanes);  // the lanes' slots are visible now
  answer got;
  for (const lane_slot& s : slots) {
    got.payload_sum += s.found.payload_sum;
    got.hits += s.found.hits;
    got.writes += s.found.writes;
  }
  return checked(store, cfg, run, got, writes_before, seconds);
}

}  // namespace tessera::bench::prefetch
