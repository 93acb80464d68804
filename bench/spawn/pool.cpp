// spawn on the GeckoDB-style thread pool ([GeckoDB-pool]): chain tasks submit their successor,
// tree tasks submit both children. Captures are 16 bytes (std::function stores them inline).
#include <cstdint>

#include "common/thread_pool.h"
#include "common/worker_counters.h"
#include "spawn/spawn.h"

namespace tessera::bench::spawn {

namespace {

struct shared {
  thread_pool* pool;
  worker_counters* counts;
  std::uint64_t tasks;
};

void link(shared* s, std::uint64_t remaining) {
  s->counts->add(s->pool->current_index());
  if (remaining > 1) s->pool->submit([s, remaining] { link(s, remaining - 1); });
}

void node(shared* s, std::uint64_t index) {
  s->counts->add(s->pool->current_index());
  const std::uint64_t left = 2 * index + 1;
  if (left < s->tasks) s->pool->submit([s, left] { node(s, left); });
  if (left + 1 < s->tasks) s->pool->submit([s, left] { node(s, left + 1); });
}

}  // namespace

measurement run_pool(const config& cfg) {
  thread_pool pool(cfg.workers, cfg.tessera.pin);
  worker_counters counts(cfg.workers);
  return measure(cfg.label, cfg.repeat, [&] {
    counts.reset();
    shared s{.pool = &pool, .counts = &counts, .tasks = cfg.tasks};
    shared* sp = &s;
    stopwatch clock;
    if (cfg.shape == pattern::tree) {
      pool.submit([sp] { node(sp, 0); });
    } else {
      for (unsigned c = 0; c < cfg.workers; ++c) {
        const std::uint64_t length = chain_length(cfg.tasks, cfg.workers, c);
        if (length > 0) pool.submit([sp, length] { link(sp, length); });
      }
    }
    pool.wait_idle();
    const double seconds = clock.seconds();
    return checked("pool", cfg, counts.total(), seconds);
  });
}

}  // namespace tessera::bench::spawn
