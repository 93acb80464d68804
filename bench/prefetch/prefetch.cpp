// The `prefetch` subcommand: the object store, the visit sequences and their recomputation,
// registration, flags, and the loop over configurations (ratios against distance 0).
#include "prefetch/prefetch.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "common/random.h"
#include "common/registry.h"
#include "common/tessera_settings.h"
#include "tessera/runtime.h"

namespace tessera::bench::prefetch {

// ---- the store -----------------------------------------------------------------------------

object_store::object_store(std::size_t total_bytes, unsigned object_bytes, bool huge_pages)
    : m_objects(total_bytes / object_bytes), m_object_bytes(object_bytes) {
  constexpr std::size_t huge = std::size_t{2} << 20;
  m_mapped = (m_objects * object_bytes + huge - 1) / huge * huge;
  void* p = mmap(nullptr, m_mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw bench_failure("prefetch: cannot map " + std::to_string(m_mapped) +
                        " bytes (--memory-mb): " + std::strerror(errno));
  // Explicit either way, so that the system's THP default does not decide the page size.
  madvise(p, m_mapped, huge_pages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  m_memory = static_cast<std::byte*>(p);
  const unsigned n = entries();
  for (std::size_t i = 0; i < m_objects; ++i) {
    entry* e = object(i);
    for (unsigned j = 0; j < n; ++j) {
      e[j].key = 2 * std::uint64_t{j} + 1;
      e[j].value = std::uint64_t{payload_of(i, j)} << 32;
    }
  }
}

object_store::~object_store() { munmap(m_memory, m_mapped); }

std::uint64_t object_store::write_count() const noexcept {
  std::uint64_t n = 0;
  const std::size_t total = m_objects * entries();
  const entry* e = object(0);
  for (std::size_t i = 0; i < total; ++i) n += e[i].value & 0xFFFFFFFFu;
  return n;
}

std::uint32_t object_store::payload_of(std::size_t object, unsigned index) noexcept {
  return static_cast<std::uint32_t>(mix64((std::uint64_t{object} << 12) ^ index) >> 32);
}

// ---- visits ----------------------------------------------------------------------------------

visit_sequence::visit_sequence(std::uint64_t seed, std::size_t first, std::size_t count,
                               unsigned entries, double write_ratio) noexcept
    : m_state(seed),
      m_first(first),
      m_count(count),
      m_keys(2 * std::uint64_t{entries}),
      m_write_threshold(static_cast<std::uint64_t>(std::ldexp(write_ratio, 53))) {}

visit visit_sequence::next() noexcept {
  m_state += 0x9E3779B97F4A7C15ull;
  const std::uint64_t a = mix64(m_state);
  const std::uint64_t b = mix64(a);
  return {m_first + below(a, m_count), below(b, m_keys), (b >> 11) < m_write_threshold};
}

object_range range_of(const object_store& store, unsigned w, unsigned workers) noexcept {
  const std::size_t n = store.objects();
  const std::size_t first = n * w / workers;
  return {first, n * (w + 1) / workers - first};
}

std::uint64_t lane_visits(const config& cfg, unsigned lane) noexcept {
  return cfg.visits / cfg.in_flight + (lane < cfg.visits % cfg.in_flight ? 1 : 0);
}

std::uint64_t lane_seed(const config& cfg, unsigned run, unsigned w, unsigned lane) noexcept {
  return mix64(mix64(mix64(cfg.seed) ^ run) ^ (std::uint64_t{w} << 32 | lane));
}

answer expected(const object_store& store, const config& cfg, unsigned run) {
  answer a;
  const unsigned entries = store.entries();
  for (unsigned w = 0; w < cfg.workers; ++w) {
    const object_range r = range_of(store, w, cfg.workers);
    for (unsigned lane = 0; lane < cfg.in_flight; ++lane) {
      visit_sequence seq(lane_seed(cfg, run, w, lane), r.first, r.count, entries, cfg.write_ratio);
      for (std::uint64_t v = lane_visits(cfg, lane); v > 0; --v) {
        const visit x = seq.next();
        // Keys are 2j+1: an odd key is entry (key-1)/2, an even one is not there.
        if ((x.key & 1) != 0) {
          a.payload_sum += object_store::payload_of(x.object, static_cast<unsigned>(x.key / 2));
          ++a.hits;
        }
        if (x.write) ++a.writes;
      }
    }
  }
  return a;
}

sample checked(const object_store& store, const config& cfg, unsigned run, const answer& got,
               std::uint64_t writes_before, double seconds) {
  const answer want = expected(store, cfg, run);
  auto text = [](const answer& a) {
    return "payload sum " + std::to_string(a.payload_sum) + ", hits " + std::to_string(a.hits) +
           ", writes " + std::to_string(a.writes);
  };
  if (got != want) {
    throw bench_failure("prefetch: " + cfg.label + ": found " + text(got) + ", expected " +
                        text(want));
  }
  const std::uint64_t counted = store.write_count() - writes_before;
  if (counted != want.writes) {
    throw bench_failure("prefetch: " + cfg.label + ": write counters grew by " +
                        std::to_string(counted) + ", expected " + std::to_string(want.writes));
  }
  return sample{.ops = cfg.workers * cfg.visits, .seconds = seconds};
}

// ---- the machine -----------------------------------------------------------------------------

std::size_t last_level_cache_bytes() {
  // sysfs first: in a VM sysconf may report the host's total L3 instead of this CPU's share.
  std::size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size)) continue;
    if (type == "Instruction" || level < best_level) continue;
    std::size_t value = 0;
    const auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), value);
    if (ec != std::errc{}) continue;
    const std::string_view unit(end, size.data() + size.size() - end);
    if (unit == "K") value <<= 10;
    if (unit == "M") value <<= 20;
    if (unit == "G") value <<= 30;
    best = value;
    best_level = level;
  }
  if (best != 0) return best;
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) return static_cast<std::size_t>(l3);
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? static_cast<std::size_t>(l2) : 0;
}

namespace {

[[noreturn]] void usage_error(const std::string& flag, const std::string& what) {
  throw usage_failure("tessera-bench: --" + flag + ": " + what);
}

std::vector<double> parse_ratios(const std::string& text) {
  std::vector<double> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    double v = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc{} || end != item.data() + item.size() || !(v >= 0) ||
        v > 1) {
      usage_error("write-ratio", "'" + item + "' is not a fraction between 0 and 1");
    }
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

void run(const run_context& ctx) {
  const auto object_bytes = static_cast<unsigned>(ctx.flags.integer("object-bytes"));
  if (object_bytes % sizeof(entry) != 0) {
    usage_error("object-bytes", std::to_string(object_bytes) + " is not a multiple of 16");
  }
  const std::vector<double> ratios = parse_ratios(ctx.flags.text("write-ratio"));
  std::vector<unsigned> distances;
  for (const std::uint64_t d : ctx.flags.uint_list("prefetch-distance")) {
    distances.push_back(static_cast<unsigned>(d));
  }
  const std::size_t llc = last_level_cache_bytes();
  std::size_t memory = static_cast<std::size_t>(ctx.flags.integer("memory-mb")) << 20;
  if (memory == 0) memory = std::max<std::size_t>(4 * llc, std::size_t{128} << 20);
  if (memory < 4 * llc) {
    std::fprintf(stderr,
                 "tessera-bench: prefetch: warning: %zu MiB is less than 4x the %zu MiB "
                 "last-level cache\n",
                 memory >> 20, llc >> 20);
  }
  const bool huge_pages = ctx.flags.text("huge-pages") == "yes";
  std::fprintf(stderr,
               "tessera-bench: prefetch: last-level cache %zu KiB, store %zu MiB of "
               "%u-byte objects, %s pages\n",
               llc >> 10, memory >> 20, object_bytes, huge_pages ? "huge" : "4 KiB");
  const object_store store(memory, object_bytes, huge_pages);
  const tessera_settings settings = tessera_settings::from(ctx.flags);

  for (const unsigned w : ctx.workers) {
    if (store.objects() < w) {
      throw bench_failure("prefetch: " + std::to_string(store.objects()) + " objects for " +
                          std::to_string(w) + " workers; give more --memory-mb");
    }
    // The distances as set (no adapting), and with --adapt-distance a row more: the workers
    // adapting from the runtime's default distance, in a runtime of their own.
    runtime_options options = settings.options(w);
    options.prefetch_distance = 0;
    options.adapt_prefetch_distance = false;
    runtime rt(options);
    std::unique_ptr<runtime> adapting;
    if (settings.adapt_distance) {
      runtime_options a = settings.options(w);
      a.adapt_prefetch_distance = true;
      adapting = std::make_unique<runtime>(a);
    }
    for (const double ratio : ratios) {
      std::vector<config> configs;
      auto add = [&](unsigned d, bool adaptive) {
        char details[96];
        std::snprintf(details, sizeof details, "distance=%s%u write-ratio=%g",
                      adaptive ? "adapting from " : "", d, ratio);
        configs.push_back({.workers = w,
                           .distance = d,
                           .adaptive = adaptive,
                           .write_ratio = ratio,
                           .in_flight = static_cast<unsigned>(ctx.flags.integer("in-flight")),
                           .visits = static_cast<std::uint64_t>(ctx.flags.integer("visits")),
                           .seed = static_cast<std::uint64_t>(ctx.flags.integer("seed")),
                           .label = ctx.label("tessera", w, details)});
      };
      for (const unsigned d : distances) add(d, false);
      if (adapting != nullptr) add(runtime_options{}.prefetch_distance, true);
      // Repeats are interleaved over the distances, so that a change in the machine's load
      // (it may be shared) falls on all of them alike and their ratios stay comparable.
      std::vector<std::vector<sample>> samples(configs.size());
      for (unsigned run = 0; run < ctx.repeat; ++run) {
        for (std::size_t i = 0; i < configs.size(); ++i) {
          runtime& r = configs[i].adaptive ? *adapting : rt;
          samples[i].push_back(run_tessera(r, store, configs[i], run));
          std::fprintf(stderr, "tessera-bench: %s: run %u/%u %.4f s\n", configs[i].label.c_str(),
                       run + 1, ctx.repeat, samples[i].back().seconds);
        }
      }
      std::vector<measurement> results;
      for (auto& s : samples) results.push_back(summarize(std::move(s)));
      auto ops_per_second = [](const measurement& m) {
        return m.seconds > 0 ? static_cast<double>(m.ops) / m.seconds : 0.0;
      };
      double baseline = 0;  // ops/s at distance 0, same workers and write ratio
      for (std::size_t i = 0; i < configs.size() && baseline == 0; ++i) {
        if (configs[i].distance == 0 && !configs[i].adaptive) {
          baseline = ops_per_second(results[i]);
        }
      }
      for (std::size_t i = 0; i < configs.size(); ++i) {
        row r("prefetch", "tessera", w, results[i]);
        r.with("write_ratio", ratio);
        if (configs[i].adaptive) {
          r.with("prefetch_distance", "adapting from " + std::to_string(configs[i].distance));
        } else {
          r.with("prefetch_distance", configs[i].distance);
        }
        r.with("object_bytes", object_bytes)
            .with("memory_mb", static_cast<std::int64_t>(store.bytes() >> 20))
            .with("in_flight", configs[i].in_flight);
        if (baseline > 0) {
          r.with("vs_distance_0", std::round(ops_per_second(results[i]) / baseline * 1000) / 1000);
        } else {
          r.with("vs_distance_0", "-");
        }
        ctx.report.add(std::move(r));
      }
    }
    settings.print_statistics(ctx.label("tessera", w), rt);
    if (adapting != nullptr) {
      settings.print_statistics(ctx.label("tessera", w, "adapting"), *adapting);
    }
  }
}

const registration prefetch_benchmark({
    .name = "prefetch",
    .help = "random binary searches in objects in DRAM, one task each: annotation-based "
            "prefetching by distance",
    .implementations = {"tessera"},
    .reference = "",
    .flags = tessera_settings::add_flags({
        int_flag("object-bytes", 1024,
                 "bytes per object (sorted 16-byte entries, a multiple of 16)", 256, 1024),
        int_flag("memory-mb", 0, "MiB of objects; 0: 4x the last-level cache, at least 128", 0,
                 1 << 20),
        string_flag("write-ratio", "0,0.2", "comma-separated fractions of visits that write",
                    "LIST"),
        uint_list_flag("prefetch-distance", "0,1,2,3,4,6,8",
                       "prefetch distances to measure (0: none)", 0, 16),
        int_flag("in-flight", 32, "lanes (chains of visits) per worker", 1, 4096),
        int_flag("visits", 1'000'000, "visits per worker per run (ops = workers x visits)", 1),
        int_flag("seed", 1, "seed of the random visit sequences", 0),
        choice_flag("huge-pages", "no", {"no", "yes"},
                    "back the store with transparent huge pages (madvise)"),
    }),
    .run = run,
});

}  // namespace

}  // namespace tessera::bench::prefetch
