// spawn on tessera: every task is a fresh make_task + context::spawn (no recycling), so each
// operation is one allocation, one spawn, one execution and one free.
#include <cstdint>
#include <string>

#include "common/worker_counters.h"
#include "spawn/spawn.h"
#include "tessera/tessera.h"

namespace tessera::bench::spawn {

namespace {

/// chain: spawns its successor unannotated, like the competitors' chains (a spawn from a task
/// stays on its worker unless an idle one steals it). A worker_id annotation with the
/// (self + 0) % W computation of `link` would add ~14 instructions per task of placement that
/// oneTBB's chain does not do: 7.9 instead of 6.9 ns at 1 worker.
class chain_link final : public task {
 public:
  chain_link(std::uint64_t remaining, worker_counters* counts) noexcept
      : m_remaining(remaining), m_counts(counts) {}

  task* execute(context& ctx) override {
    m_counts->add(ctx.worker().value);
    if (m_remaining > 1) ctx.spawn(ctx.make_task<chain_link>(m_remaining - 1, m_counts));
    return nullptr;
  }

 private:
  std::uint64_t m_remaining;
  worker_counters* m_counts;
};

/// followup: returns itself as its own follow-up (tessera's way to walk a structure: no
/// allocation, no spawn), `remaining` times in all.
class self_follow final : public task {
 public:
  self_follow(std::uint64_t remaining, worker_counters* counts) noexcept
      : m_remaining(remaining), m_counts(counts) {}

  task* execute(context& ctx) override {
    m_counts->add(ctx.worker().value);
    return --m_remaining != 0 ? this : nullptr;
  }

 private:
  std::uint64_t m_remaining;
  worker_counters* m_counts;
};

/// roundrobin: spawns its successor on worker (self + 1) % W.
class link final : public task {
 public:
  link(std::uint64_t remaining, worker_counters* counts, unsigned step, unsigned workers) noexcept
      : m_remaining(remaining), m_counts(counts), m_step(step), m_workers(workers) {}

  task* execute(context& ctx) override {
    const unsigned self = ctx.worker().value;
    m_counts->add(self);
    if (m_remaining > 1) {
      auto* next = ctx.make_task<link>(m_remaining - 1, m_counts, m_step, m_workers);
      unsigned to = self + m_step;  // (self + step) % workers, step <= 1: no division
      if (to >= m_workers) to -= m_workers;
      next->annotate(worker_id{static_cast<std::uint16_t>(to)});
      ctx.spawn(next);
    }
    return nullptr;
  }

 private:
  std::uint64_t m_remaining;
  worker_counters* m_counts;
  unsigned m_step;
  unsigned m_workers;
};

/// tree: node i spawns nodes 2i+1 and 2i+2 while they are < tasks (unannotated).
class node final : public task {
 public:
  node(std::uint64_t index, std::uint64_t tasks, worker_counters* counts) noexcept
      : m_index(index), m_tasks(tasks), m_counts(counts) {}

  task* execute(context& ctx) override {
    m_counts->add(ctx.worker().value);
    const std::uint64_t left = 2 * m_index + 1;
    if (left < m_tasks) ctx.spawn(ctx.make_task<node>(left, m_tasks, m_counts));
    if (left + 1 < m_tasks) ctx.spawn(ctx.make_task<node>(left + 1, m_tasks, m_counts));
    return nullptr;
  }

 private:
  std::uint64_t m_index;
  std::uint64_t m_tasks;
  worker_counters* m_counts;
};

}  // namespace

measurement run_tessera(const config& cfg) {
  runtime rt(cfg.tessera.options(cfg.workers));
  worker_counters counts(cfg.workers);
  const measurement m = measure(cfg.label, cfg.repeat, [&] {
    counts.reset();
    const std::uint64_t executed_before = rt.statistics().total().executed;
    const group g = rt.make_group();
    stopwatch clock;
    if (cfg.shape == pattern::tree) {
      rt.spawn(rt.make_task<node>(0u, cfg.tasks, &counts), g);
    } else {
      for (unsigned c = 0; c < cfg.workers; ++c) {
        const std::uint64_t length = chain_length(cfg.tasks, cfg.workers, c);
        if (length == 0) continue;
        task* first = nullptr;
        switch (cfg.shape) {
          case pattern::chain: first = rt.make_task<chain_link>(length, &counts); break;
          case pattern::followup: first = rt.make_task<self_follow>(length, &counts); break;
          default: first = rt.make_task<link>(length, &counts, 1u, cfg.workers); break;
        }
        first->annotate(worker_id{static_cast<std::uint16_t>(c)});  // chain c starts on worker c
        rt.spawn(first, g);
      }
    }
    rt.wait(g);  // the workers' counter writes are visible after the wait
    const double seconds = clock.seconds();
    rt.wait_idle();  // the statistics are exact once the runtime is idle
    const std::uint64_t executed = rt.statistics().total().executed - executed_before;
    if (executed != cfg.tasks)
      throw bench_failure("tessera's statistics count " + std::to_string(executed) +
                          " executed tasks, expected " + std::to_string(cfg.tasks));
    return checked("tessera", cfg, counts.total(), seconds);
  });
  cfg.tessera.print_statistics(cfg.label, rt);
  return m;
}

}  // namespace tessera::bench::spawn
