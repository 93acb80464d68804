// spawn on oneTBB: one tbb::task_group; chain tasks tg.run their successor, tree tasks tg.run
// both children. Counters are indexed by the arena slot of the running thread
// (this_worker, recorded by onetbb_placement when the thread enters the arena).
#include <tbb/task_group.h>

#include <cstdint>

#include "common/onetbb_placement.h"

#include "common/worker_counters.h"
#include "spawn/spawn.h"

namespace tessera::bench::spawn {

namespace {

struct shared {
  tbb::task_group group;
  worker_counters* counts;
  std::uint64_t tasks;
};

void count(shared& s) { s.counts->add(this_worker); }

void link(shared& s, std::uint64_t remaining) {
  count(s);
  if (remaining > 1) s.group.run([&s, remaining] { link(s, remaining - 1); });
}

void node(shared& s, std::uint64_t index) {
  count(s);
  const std::uint64_t left = 2 * index + 1;
  if (left < s.tasks) s.group.run([&s, left] { node(s, left); });
  if (left + 1 < s.tasks) s.group.run([&s, left] { node(s, left + 1); });
}

}  // namespace

measurement run_onetbb(const config& cfg) {
  onetbb_arena arena(cfg.workers, cfg.tessera.pin);  // this_worker = slot; --pin
  worker_counters counts(cfg.workers);
  return measure(cfg.label, cfg.repeat, [&] {
    counts.reset();
    shared s{.group = {}, .counts = &counts, .tasks = cfg.tasks};
    stopwatch clock;
    arena.execute([&] {
      if (cfg.shape == pattern::tree) {
        s.group.run([&s] { node(s, 0); });
      } else {
        for (unsigned c = 0; c < cfg.workers; ++c) {
          const std::uint64_t length = chain_length(cfg.tasks, cfg.workers, c);
          if (length > 0) s.group.run([&s, length] { link(s, length); });
        }
      }
      s.group.wait();
    });
    const double seconds = clock.seconds();
    return checked("onetbb", cfg, counts.total(), seconds);
  });
}

}  // namespace tessera::bench::spawn
