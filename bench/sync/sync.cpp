// The `sync` subcommand: workloads, the answer check, registration, flags, and the loop over
// configurations (ratios against threads-shared_mutex).
#include "sync/sync.h"

#include <string>
#include <string_view>
#include <vector>

#include "common/random.h"
#include "common/registry.h"
#include "common/tessera_settings.h"

namespace tessera::bench::sync_bench {

workload make_workload(const workload_spec& spec) {
  workload wl;
  wl.spec = spec;
  wl.keys.resize(spec.ops);
  wl.writes_per_object.assign(spec.objects, 0);
  for (std::uint64_t i = 0; i < spec.ops; ++i) {
    const std::uint64_t a = mix64(spec.seed * 0x100000001B3ull + 2 * i);
    const std::uint64_t b = mix64(spec.seed * 0x100000001B3ull + 2 * i + 1);
    const bool hot = spec.hot_percent > 0 && below(a, 100) < spec.hot_percent;
    const auto object = static_cast<std::uint32_t>(hot ? 0 : below(b, spec.objects));
    const bool write = below(a >> 7 | a << 57, 100) < spec.write_percent;
    wl.keys[i] = object | (write ? write_bit : 0);
    if (write) {
      ++wl.writes_per_object[object];
    } else {
      ++wl.reads;
    }
  }
  return wl;
}

void check(const char* implementation, const workload& wl, const tally& t,
           const std::vector<counters*>& objects) {
  const std::string who = std::string("sync ") + implementation + ": ";
  if (t.torn != 0) {
    throw bench_failure(who + std::to_string(t.torn) + " reads saw an object whose fields differ");
  }
  if (t.reads != wl.reads || t.writes != wl.keys.size() - wl.reads) {
    throw bench_failure(who + "did " + std::to_string(t.reads) + " reads and " +
                        std::to_string(t.writes) + " writes, expected " + std::to_string(wl.reads) +
                        " and " + std::to_string(wl.keys.size() - wl.reads));
  }
  for (std::size_t o = 0; o < objects.size(); ++o) {
    const auto expected = static_cast<std::int64_t>(wl.writes_per_object[o]);
    for (unsigned f = 0; f < fields_per_object; ++f) {
      const std::int64_t got = racy_load(objects[o]->field[f]);
      if (got != expected) {
        throw bench_failure(who + "object " + std::to_string(o) + " field " + std::to_string(f) +
                            " is " + std::to_string(got) + ", expected " +
                            std::to_string(expected) + " (its number of writes)");
      }
    }
  }
}

namespace {

const std::vector<std::string> mixes{"100/0", "95/5", "50/50", "0/100"};

unsigned write_percent_of(std::string_view mix) {
  // "R/W": the part after the slash.
  return static_cast<unsigned>(std::stoul(std::string(mix.substr(mix.find('/') + 1))));
}

/// tessera with every object under primitive P.
template <primitive P>
measurement run_tessera_with(const workload& wl, const config& cfg) {
  return run_tessera(P, wl, cfg);
}

/// The competitors, in the order they run and are listed: tessera with each primitive (auto:
/// the runtime picks one from the hints), then the threads.
const implementation_table<measurement (*)(const workload&, const config&)> implementations{
    {"auto", [](const workload& wl, const config& cfg) { return run_tessera({}, wl, cfg); }},
    {"spinlock", run_tessera_with<primitive::spinlock>},
    {"rwlatch", run_tessera_with<primitive::rwlatch>},
    {"optimistic", run_tessera_with<primitive::optimistic_latch>},
    {"optimistic_scheduled", run_tessera_with<primitive::optimistic_scheduled>},
    {"scheduling", run_tessera_with<primitive::scheduling>},
    {"threads-shared_mutex", run_threads_shared_mutex},
    {"threads-spinlock", run_threads_spinlock},
};

void run(const run_context& ctx) {
  const auto objects = static_cast<std::uint32_t>(ctx.flags.integer("objects"));
  const auto ops = static_cast<std::uint64_t>(ctx.flags.integer("ops"));
  const auto hot_percent = static_cast<unsigned>(ctx.flags.integer("hot-percent"));
  const auto lanes = static_cast<unsigned>(ctx.flags.integer("lanes"));
  const tessera_settings settings = tessera_settings::from(ctx.flags);
  for (const auto& mix : ctx.flags.list("mix")) {
    for (const auto& access : ctx.flags.list("access")) {
      const bool hot = access == "hot";
      const workload wl = make_workload({.objects = objects,
                                         .ops = ops,
                                         .write_percent = write_percent_of(mix),
                                         .hot_percent = hot ? hot_percent : 0,
                                         .seed = 1});
      for (const unsigned w : ctx.workers) {
        // The implementations take turns run by run (measure_in_turns): a slow phase of a
        // shared machine falls on all of them, not on whichever ran then.
        const std::vector<measurement> results =
            measure_in_turns(ctx.implementations, [&](const std::string& impl) {
              const config cfg{.implementation = impl,
                               .workers = w,
                               .lanes = lanes,
                               .tessera = settings,
                               .label = ctx.label(impl, w, "mix=" + mix + " access=" + access),
                               .mix = mix,
                               .hot = hot,
                               .repeat = ctx.repeat};
              return implementations.at(impl)(wl, cfg);
            });
        for (std::size_t i = 0; i < ctx.implementations.size(); ++i) {
          ctx.report.add(row("sync", ctx.implementations[i], w, results[i])
                             .with("mix", mix)
                             .with("access", access)
                             .with("objects", static_cast<std::int64_t>(objects)));
        }
      }
    }
  }
}

const registration sync_benchmark({
    .name = "sync",
    .help = "shared objects under tessera's synchronization primitives vs threads with a lock "
            "per object",
    .implementations = implementations.names(),
    .reference = "threads-shared_mutex",
    .flags = tessera_settings::add_flags({
        int_flag("objects", 1024, "shared objects (each 4 cache lines of counters)", 1, 1 << 24),
        int_flag("ops", 300000, "operations per run (one key sequence for all implementations)", 1,
                 std::int64_t{1} << 31),
        choice_list_flag("mix", "all", mixes, "read/write mixes, in percent"),
        choice_list_flag("access", "all", {"uniform", "hot"},
                         "uniform over the objects, or hot: --hot-percent of them on object 0"),
        int_flag("hot-percent", 50, "share of the operations on the hot object (access hot)", 1,
                 100),
        int_flag("lanes", 32, "tessera: operations in flight per worker (tasks re-run per op)", 1,
                 4096),
    }),
    .run = run,
});

}  // namespace

}  // namespace tessera::bench::sync_bench
