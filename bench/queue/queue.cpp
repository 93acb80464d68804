// The `queue` subcommand: registration, flags, the patterns and which design supports which,
// and the exactly-once check (queue.h says what is measured).
#include "queue/queue.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/registry.h"
#include "queue/pattern.h"

namespace tessera::bench::queue_bench {

void check_exactly_once(const std::string& who, std::uint64_t items,
                        const std::vector<std::vector<std::uint32_t>>& got) {
  std::vector<std::uint8_t> seen(items, 0);
  for (const auto& list : got) {
    for (const std::uint32_t id : list) {
      if (id >= items)
        throw bench_failure(who + ": an item id out of range: " + std::to_string(id));
      if (seen[id]++ != 0) throw bench_failure(who + ": item " + std::to_string(id) + " twice");
    }
  }
  const auto missing = std::find(seen.begin(), seen.end(), std::uint8_t{0});
  if (missing != seen.end())
    throw bench_failure(who + ": item " + std::to_string(missing - seen.begin()) + " lost");
}

namespace {

struct design {
  measurement (*run)(const config&);
  capabilities can;
};

const implementation_table<design> implementations{
    {"tessera-local", {run_local_queue, {.many_producers = false, .many_consumers = false,
                                         .two_threads = false}}},
    {"tessera-inbox", {run_mpsc_queue, {.many_consumers = false}}},
    {"mutex-deque", {run_mutex_deque, {}}},
    {"ticket", {run_ticket_queue, {}}},
    {"moodycamel", {run_moodycamel, {}}},
    {"onetbb", {run_onetbb, {}}},
};

struct shape {
  const char* name;
  pattern p;
};
constexpr shape shapes[] = {{"owner", pattern::owner},
                            {"1-1", pattern::one_to_one},
                            {"n-1", pattern::many_to_one},
                            {"1-n", pattern::one_to_many},
                            {"n-n", pattern::many_to_many}};

/// Why `d` cannot run `c`, or "" if it can.
std::string unsupported(const capabilities& d, const config& c) {
  if (c.shape == pattern::owner) return {};
  if (!d.two_threads) return "owner-only: one thread pushes and pops";
  if (c.producers > 1 && !d.many_producers) return "one producer only";
  if (c.consumers > 1 && !d.many_consumers) return "one consumer only (the owner)";
  return {};
}

void run(const run_context& ctx) {
  const auto items = static_cast<std::uint64_t>(ctx.flags.integer("items"));
  const std::vector<std::string>& chosen = ctx.flags.list("pattern");
  for (const shape& s : shapes) {
    if (std::find(chosen.begin(), chosen.end(), s.name) == chosen.end()) continue;
    for (const unsigned w : ctx.workers) {
      config cfg{.shape = s.p, .items = items, .repeat = ctx.repeat};
      switch (s.p) {
        case pattern::owner: cfg.producers = cfg.consumers = 0; break;
        case pattern::one_to_one: break;
        case pattern::many_to_one: cfg.producers = w; break;
        case pattern::one_to_many: cfg.consumers = w; break;
        case pattern::many_to_many: cfg.producers = cfg.consumers = w; break;
      }
      // owner and 1-1 do not depend on N: once; the N patterns from N = 2 (N = 1 is 1-1)
      const bool once = s.p == pattern::owner || s.p == pattern::one_to_one;
      if (once ? w != ctx.workers.front() : w < 2) continue;
      const unsigned threads = std::max(1u, cfg.producers + cfg.consumers);
      const std::string details = std::string("pattern=") + s.name;
      std::vector<std::string> runnable;
      for (const std::string& impl : ctx.implementations) {
        const std::string why = unsupported(implementations.at(impl).can, cfg);
        if (why.empty()) {
          runnable.push_back(impl);
        } else {
          ctx.report.add(row::skipped("queue", impl, threads, why)
                             .with("pattern", s.name)
                             .with("producers", cfg.producers)
                             .with("consumers", cfg.consumers));
        }
      }
      const std::vector<measurement> results =
          measure_in_turns(runnable, [&](const std::string& impl) {
            config mine = cfg;
            mine.label = ctx.label(impl, threads, details);
            return implementations.at(impl).run(mine);
          });
      for (std::size_t i = 0; i < runnable.size(); ++i) {
        ctx.report.add(row("queue", runnable[i], threads, results[i])
                           .with("pattern", s.name)
                           .with("producers", cfg.producers)
                           .with("consumers", cfg.consumers));
      }
    }
  }
}

const registration queue_benchmark({
    .name = "queue",
    .help = "queue designs (tessera's FIFO and inbox, mutex deque, ticket queue, moodycamel, "
            "oneTBB) moving items 1-1, n-1, 1-n, n-n",
    .implementations = implementations.names(),
    .reference = "mutex-deque",
    .flags = {int_flag("items", 1000000,
                       "items per run (each pushed and popped once; ops = items)", 1,
                       std::int64_t{1} << 31),
              choice_list_flag("pattern", "all", {"owner", "1-1", "n-1", "1-n", "n-n"},
                               "patterns: owner (one thread), 1-1, n-1, 1-n, n-n (N from "
                               "--workers; a row's workers is its thread count)")},
    .run = run,
});

}  // namespace

}  // namespace tessera::bench::queue_bench
