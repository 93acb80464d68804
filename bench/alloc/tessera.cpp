// alloc on tessera: one long task per worker (annotated with that worker) makes and discards
// task objects of the requested size through runtime::make_task / runtime::discard, with the
// pool allocator or task_allocator::system. Objects are constructed tasks: the cost includes
// writing the 48-byte task header, which is what a real spawn pays too.
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "alloc/alloc.h"
#include "alloc/patterns.h"
#include "tessera/tessera.h"

namespace tessera::bench::alloc {

namespace {

template <unsigned Bytes>
class sized_task final : public task {
 public:
  explicit sized_task(std::uint64_t token) noexcept {
    m_words.front() = token;
    m_words.back() = ~token;
  }
  task* execute(context&) override { return nullptr; }  // never spawned
  bool holds(std::uint64_t token) const noexcept {
    return m_words.front() == token && m_words.back() == ~token;
  }

 private:
  static_assert(Bytes >= sizeof(task) + 8 && (Bytes - sizeof(task)) % 8 == 0);
  std::array<std::uint64_t, (Bytes - sizeof(task)) / 8> m_words;
};

template <unsigned Bytes>
struct tessera_policy {
  static_assert(sizeof(sized_task<Bytes>) == Bytes);
  runtime* rt;
  void* make(std::uint64_t token) { return rt->make_task<sized_task<Bytes>>(token); }
  bool check(void* p, std::uint64_t token) const {
    return static_cast<const sized_task<Bytes>*>(p)->holds(token);
  }
  void release(void* p) { rt->discard(static_cast<sized_task<Bytes>*>(p)); }
};

template <unsigned Bytes>
class member_task final : public task {
 public:
  member_task(const config& cfg, run_state& state, unsigned member,
              std::atomic<std::uint64_t>& bad) noexcept
      : m_cfg(&cfg), m_state(&state), m_member(member), m_bad(&bad) {}

  task* execute(context& ctx) override {
    if (ctx.worker().value != m_member) {
      m_state->members.fail();
      throw bench_failure("a task annotated with worker " + std::to_string(m_member) +
                          " ran on worker " + std::to_string(ctx.worker().value));
    }
    tessera_policy<Bytes> policy{&ctx.runtime()};
    const std::uint64_t bad = run_member(policy, *m_cfg, m_member, *m_state);
    m_bad->fetch_add(bad, std::memory_order_relaxed);  // read after runtime::wait
    return nullptr;
  }

 private:
  const config* m_cfg;
  run_state* m_state;
  unsigned m_member;
  std::atomic<std::uint64_t>* m_bad;
};

template <unsigned Bytes>
measurement run_sized(const config& cfg, bool system) {
  runtime_options options = cfg.tessera.options(cfg.workers);
  options.allocator = system ? task_allocator::system : task_allocator::pool;
  runtime rt(options);
  const char* name = system ? "tessera-system" : "tessera";
  const measurement m = measure(cfg.label, cfg.repeat, [&] {
    run_state state(cfg);
    std::atomic<std::uint64_t> bad{0};
    const group g = rt.make_group();
    for (unsigned w = 0; w < cfg.workers; ++w) {
      auto* t = rt.make_task<member_task<Bytes>>(cfg, state, w, bad);
      t->annotate(worker_id{static_cast<std::uint16_t>(w)});
      rt.spawn(t, g);
    }
    rt.wait(g);
    if (state.members.failed())
      throw bench_failure(std::string(name) + ": the workers did not run together (timeout)");
    if (bad.load() != 0)
      throw bench_failure(std::string(name) + ": " + std::to_string(bad.load()) +
                          " objects did not hold the token written into them");
    return sample{.ops = cfg.ops * cfg.workers, .seconds = state.members.seconds()};
  });
  cfg.tessera.print_statistics(cfg.label, rt);
  return m;
}

}  // namespace

measurement run_tessera(const config& cfg, bool system) {
  switch (cfg.bytes) {
    case 64: return run_sized<64>(cfg, system);
    case 128: return run_sized<128>(cfg, system);
    case 256: return run_sized<256>(cfg, system);
    case 512: return run_sized<512>(cfg, system);
    default: throw bench_failure("unsupported object size " + std::to_string(cfg.bytes));
  }
}

}  // namespace tessera::bench::alloc
