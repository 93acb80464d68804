// loop on tessera, two ways. `tessera`: tessera::parallel_for from the calling thread, which runs
// pieces itself beside one helper task on each other worker (as oneTBB's caller takes one slot
// of its arena: W threads in all) and returns when every piece ran. `tessera-task`: the
// loops run inside the runtime, each started by a task (parallel_for(ctx, g, ...)) that hands
// the next loop to when_done(g, ...), so nothing sleeps between loops; the caller waits once.
// Both with the default split (or --grain); the same two ways for the sums, with
// parallel_reduce.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/placement.h"
#include "loop/loop.h"
#include "tessera/tessera.h"

namespace tessera::bench::loop {

namespace {

/// Starts loop k in a group of its own and continues with loop k + 1 when it is done.
struct loop_step {
  const config* cfg;
  const std::uint32_t* in;
  std::uint32_t* out;
  unsigned k;

  void operator()(context& ctx) const {
    if (k == cfg->loops) return;
    const group g = ctx.runtime().make_group();
    parallel_for(
        ctx, g, 0, cfg->elements,
        [in = in, o = out, k = k](std::size_t first, std::size_t last) {
          update_piece(in, o, first, last, k);
        },
        {.grain = cfg->grain});
    ctx.when_done(g, loop_step{cfg, in, out, k + 1});  // joins the running task's group
  }
};

/// Sums pass k and continues with pass k + 1 from `done`, adding into *total.
struct sum_step {
  const config* cfg;
  const std::uint32_t* in;
  std::uint64_t* total;
  unsigned k;

  void operator()(context& ctx) const {
    if (k == cfg->loops) return;
    parallel_reduce(
        ctx, 0, cfg->elements, std::uint64_t{0},
        [in = in, k = k](std::size_t first, std::size_t last) { return sum_piece(in, first, last, k); },
        std::plus<>{},
        [next = *this](context& c, std::uint64_t sum) {
          *next.total += sum;  // the steps run one after another
          sum_step{next.cfg, next.in, next.total, next.k + 1}(c);
        },
        {.grain = cfg->grain});
  }
};

}  // namespace

measurement run_tessera_task(const config& cfg) {
  runtime rt(cfg.tessera.options(cfg.workers));
  const std::uint32_t* in = cfg.input->in.data();
  const measurement m = measure(cfg.label, cfg.repeat, [&] {
    const group all = rt.make_group();
    if (cfg.op == operation::sum) {
      std::uint64_t total = 0;
      stopwatch clock;
      rt.spawn(sum_step{&cfg, in, &total, 0}, all);
      rt.wait(all);  // every pass and its `done` joined `all`
      const double seconds = clock.seconds();
      return checked_sum("tessera-task", cfg, total, seconds);
    }
    std::vector<std::uint32_t> out = fresh_output(cfg);
    stopwatch clock;
    rt.spawn(loop_step{&cfg, in, out.data(), 0}, all);
    rt.wait(all);  // every loop and continuation joined `all`
    const double seconds = clock.seconds();
    return checked("tessera-task", cfg, out, seconds);
  });
  cfg.tessera.print_statistics(cfg.label, rt);
  return m;
}

measurement run_tessera(const config& cfg) {
  runtime rt(cfg.tessera.options(cfg.workers));
  const std::uint32_t* in = cfg.input->in.data();
  // The caller runs pieces beside helpers on workers 0 .. W-2: with --pin it goes to the CPU of
  // worker W-1, which gets no helper, as OpenMP's thread 0 and oneTBB's slot 0 go to worker 0's
  // CPU (the competitors' other threads take the CPUs after it), during the runs only.
  const saved_cpu_mask caller;
  if (cfg.tessera.pin) pin_worker_thread(cfg.workers - 1);
  const measurement m = measure(cfg.label, cfg.repeat, [&] {
    if (cfg.op == operation::sum) {
      std::uint64_t total = 0;
      stopwatch clock;
      for (unsigned k = 0; k < cfg.loops; ++k) {
        total += parallel_reduce(
            rt, 0, cfg.elements, std::uint64_t{0},
            [in, k](std::size_t first, std::size_t last) { return sum_piece(in, first, last, k); },
            std::plus<>{}, {.grain = cfg.grain});
      }
      const double seconds = clock.seconds();
      return checked_sum("tessera", cfg, total, seconds);
    }
    std::vector<std::uint32_t> out = fresh_output(cfg);
    std::uint32_t* o = out.data();
    stopwatch clock;
    for (unsigned k = 0; k < cfg.loops; ++k) {
      parallel_for(
          rt, 0, cfg.elements,
          [in, o, k](std::size_t first, std::size_t last) { update_piece(in, o, first, last, k); },
          {.grain = cfg.grain});
    }
    const double seconds = clock.seconds();
    return checked("tessera", cfg, out, seconds);
  });
  cfg.tessera.print_statistics(cfg.label, rt);
  return m;
}

}  // namespace tessera::bench::loop
