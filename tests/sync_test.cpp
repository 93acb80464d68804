// Annotation-based synchronization ([MxTasks] §4.1-4.3): every primitive the worker injects keeps a
// multi-field object consistent, the selection table, and where resources are placed.
//
// The core check: objects of four counters, one per cache line, that every writer task
// increments together (with pauses in between, so that an unprotected reader would see them
// differ). Readers compare the four; under optimistic primitives they count a torn read as a
// violation only after ctx.validate() returned true (the documented rule). Afterwards every
// counter equals the number of writes made to its object, and the number of completed reads is
// exact: a retried read that was not restored would skip or repeat a step and change it.
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

#include "runtime/scheduler.h"
#include "tessera/coupled_read.h"
#include "tessera/coupled_write.h"
#include "sync/latch.h"
#include "test_support.h"

namespace tessera::test {
namespace {

/// Four counters on four cache lines that writers keep equal, plus occupancy checkers.
struct alignas(64) record {
  struct alignas(64) line {
    std::int64_t value = 0;
  };
  std::array<line, 4> fields{};
  /// Written only by writers, read only by non-optimistic readers: plain (non-atomic), so
  /// ThreadSanitizer checks that the primitive orders these accesses.
  std::int64_t plain_writes = 0;
  alignas(64) std::atomic<int> writers{0};  ///< writers inside (at most 1)
  std::atomic<int> readers{0};              ///< latched/serialized readers inside
};

struct torn_read : std::runtime_error {
  torn_read() : std::runtime_error("torn read") {}
};

/// Everything one consistency run shares; op_task reads it through a pointer.
struct harness {
  std::vector<record*> objects;
  std::vector<primitive> prims;
  unsigned hops = 6;
  unsigned write_percent = 30;
  std::atomic<std::uint64_t> violations{0};
  std::atomic<std::uint64_t> reads_done{0};
  std::unique_ptr<std::atomic<std::uint64_t>[]> writes_done;

  struct op {
    unsigned object;
    bool write;
  };
  op op_of(std::uint32_t id, unsigned step) const noexcept {
    const std::uint64_t h = mix((static_cast<std::uint64_t>(id) << 8) | step);
    return {static_cast<unsigned>(h % objects.size()),
            static_cast<unsigned>((h >> 32) % 100) < write_percent};
  }

  static bool optimistic_reader(primitive p) noexcept {
    return p == primitive::optimistic_latch || p == primitive::optimistic_scheduled;
  }
  static bool exclusive_reader(primitive p) noexcept {
    return p == primitive::spinlock || p == primitive::scheduling;
  }

  void write(unsigned object) {
    record& r = *objects[object];
    const primitive p = prims[object];
    if (r.writers.exchange(1) != 0) violations.fetch_add(1);
    if (!optimistic_reader(p) && r.readers.load() != 0) violations.fetch_add(1);
    for (auto& f : r.fields) {
      racy_store(f.value, racy_load(f.value) + 1);
      pause_a_little(8);
    }
    ++r.plain_writes;
    writes_done[object].fetch_add(1, std::memory_order_relaxed);
    r.writers.store(0);
  }

  /// False: the optimistic read was invalid, the task must return at once.
  bool read(unsigned object, context& ctx, bool throw_on_torn) {
    record& r = *objects[object];
    const primitive p = prims[object];
    const bool checked = !optimistic_reader(p);
    if (checked) {
      if (r.readers.fetch_add(1) != 0 && exclusive_reader(p)) violations.fetch_add(1);
      if (r.writers.load() != 0) violations.fetch_add(1);
    }
    std::array<std::int64_t, 4> seen{};
    for (std::size_t i = 0; i < seen.size(); ++i) {
      seen[i] = racy_load(r.fields[i].value);
      pause_a_little(4);
    }
    const bool torn = seen[0] != seen[1] || seen[1] != seen[2] || seen[2] != seen[3];
    if (checked) {
      if (r.plain_writes != seen[0]) violations.fetch_add(1);
      r.readers.fetch_sub(1);
    }
    // A throw from an invalid read must be discarded and the read retried (task.h).
    if (torn && throw_on_torn) throw torn_read();
    if (!ctx.validate()) return false;
    if (torn) violations.fetch_add(1);  // only now: the read was valid and still torn
    reads_done.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
};

/// Runs `hops` operations of the deterministic sequence op_of(id, 0..hops-1), re-annotating itself
/// for the next one and returning `this`. Two forms: one that changes itself before it validates
/// (the runtime must restore it from its copy before a retry), and one that declares
/// validates_first (tessera/task.h) and changes itself only after a successful validate(): the
/// runtime takes no copy and reruns it as it is.
template <bool ValidatesFirst>
class op_task final : public counted_task {
 public:
  static constexpr bool validates_first = ValidatesFirst;

  op_task(harness& h, std::uint32_t id) noexcept : m_h(&h), m_id(id) { aim(); }

  task* execute(context& ctx) override {
    const harness::op o = m_h->op_of(m_id, m_step);
    if constexpr (!ValidatesFirst) {
      ++m_step;  // changed before validation: a retried read must find it restored
    }
    if (o.write) {
      if (!ctx.writing()) m_h->violations.fetch_add(1);
      m_h->write(o.object);
    } else if (!m_h->read(o.object, ctx, (m_id & 1) != 0)) {
      return nullptr;  // any value: the runtime restores (or, validating first, reruns) us
    }
    if constexpr (ValidatesFirst) ++m_step;  // validated (or a writer): may change now
    if (m_step == m_h->hops) return nullptr;
    aim();
    return this;
  }

 private:
  void aim() noexcept {
    const harness::op o = m_h->op_of(m_id, m_step);
    annotate_resource(m_h->objects[o.object], o.write ? access::write : access::read);
  }

  harness* m_h;
  std::uint32_t m_id;
  unsigned m_step = 0;
};
static_assert(!validates_first_v<op_task<false>> && validates_first_v<op_task<true>>);

class sync_test : public runtime_fixture {
 protected:
  /// Creates one object per hint set, runs the mixed workload and checks every count.
  template <bool ValidatesFirst = false>
  void run_consistency(const std::vector<resource_hints>& hints) {
    auto& r = start();
    harness h;
    for (const auto& hint : hints) {
      auto* obj = r.make_resource<record>(hint);
      EXPECT_EQ(runtime::primitive_of(obj), select_primitive(hint));
      h.objects.push_back(obj);
      h.prims.push_back(runtime::primitive_of(obj));
    }
    h.writes_done = std::make_unique<std::atomic<std::uint64_t>[]>(hints.size());

    const std::uint32_t generators = 8;
    const std::uint32_t per_generator = static_cast<std::uint32_t>(scaled(120, 20));
    const std::uint32_t direct = static_cast<std::uint32_t>(scaled(200, 40));
    const std::uint32_t total = generators * per_generator + direct;
    std::vector<std::uint64_t> expected_writes(hints.size(), 0);
    std::uint64_t expected_reads = 0;
    for (std::uint32_t id = 0; id < total; ++id) {
      for (unsigned s = 0; s < h.hops; ++s) {
        const auto o = h.op_of(id, s);
        if (o.write) {
          ++expected_writes[o.object];
        } else {
          ++expected_reads;
        }
      }
    }

    const group g = r.make_group();
    // Most operations are spawned by tasks on the workers (local pushes, stays in home pools),
    // the rest from this thread (inboxes, round-robin).
    for (std::uint32_t k = 0; k < generators; ++k) {
      r.spawn(
          [&h, k, tok = live_token{}](context& ctx) {
            for (std::uint32_t i = 0; i < per_generator; ++i) {
              ctx.spawn(ctx.make_task<op_task<ValidatesFirst>>(h, k * per_generator + i));
            }
          },
          g);
    }
    for (std::uint32_t i = 0; i < direct; ++i) {
      r.spawn(r.make_task<op_task<ValidatesFirst>>(h, generators * per_generator + i), g);
    }
    EXPECT_NO_THROW(r.wait(g)) << "a reader threw on a torn object that validated";

    EXPECT_EQ(h.violations.load(), 0u);
    EXPECT_EQ(h.reads_done.load(), expected_reads);
    for (std::size_t i = 0; i < hints.size(); ++i) {
      EXPECT_EQ(h.writes_done[i].load(), expected_writes[i]) << "object " << i;
      EXPECT_EQ(h.objects[i]->plain_writes, static_cast<std::int64_t>(expected_writes[i]));
      for (const auto& f : h.objects[i]->fields) {
        EXPECT_EQ(f.value, static_cast<std::int64_t>(expected_writes[i]))
            << "object " << i << " (" << to_string(h.prims[i]) << ")";
      }
    }
    for (auto* obj : h.objects) r.retire_resource(obj);
  }

  template <bool ValidatesFirst = false>
  void run_consistency(primitive p) {
    std::vector<resource_hints> hints(4, resource_hints{.primitive = p});
    run_consistency<ValidatesFirst>(hints);
  }
};

TEST_P(sync_test, spinlock_keeps_fields_equal) { run_consistency(primitive::spinlock); }
TEST_P(sync_test, rwlatch_keeps_fields_equal) { run_consistency(primitive::rwlatch); }
TEST_P(sync_test, optimistic_latch_keeps_fields_equal) {
  run_consistency(primitive::optimistic_latch);
}
TEST_P(sync_test, optimistic_scheduled_keeps_fields_equal) {
  run_consistency(primitive::optimistic_scheduled);
}
TEST_P(sync_test, scheduling_keeps_fields_equal) { run_consistency(primitive::scheduling); }
TEST_P(sync_test, optimistic_latch_keeps_fields_equal_for_tasks_that_validate_first) {
  run_consistency<true>(primitive::optimistic_latch);
}
TEST_P(sync_test, optimistic_scheduled_keeps_fields_equal_for_tasks_that_validate_first) {
  run_consistency<true>(primitive::optimistic_scheduled);
}

TEST_P(sync_test, automatic_primitives_from_hints_keep_fields_equal) {
  const std::vector<resource_hints> hints{
      {.isolation = isolation::exclusive, .frequency = frequency::high},    // scheduling
      {.isolation = isolation::exclusive, .frequency = frequency::normal},  // spinlock
      {.read_ratio = 0.995, .frequency = frequency::high},                  // opt. latch
      {.read_ratio = 0.7},                                                  // opt. latch
      {.read_ratio = 0.95, .frequency = frequency::low},                    // opt. latch
      {.read_ratio = 0.2, .frequency = frequency::high},                    // opt. latch
      {.read_ratio = 0.0, .frequency = frequency::high},                    // spinlock
  };
  std::set<primitive> chosen;
  for (const auto& h : hints) chosen.insert(select_primitive(h));
  EXPECT_EQ(chosen.size(), 3u);  // optimistic_scheduled only when named
  run_consistency(hints);
}

// ---- latches share what they should --------------------------------------------------------

/// Two readers on different workers that each wait until both are inside: passes only if the
/// primitive lets readers of one object run at the same time (a hang fails by timeout).
void readers_meet(runtime& r, primitive p) {
  auto* obj = r.make_resource<record>({.primitive = p});
  std::atomic<int> inside{0};
  const group g = r.make_group();
  for (unsigned w = 0; w < 2; ++w) {
    auto* t = make_fn(r, [&inside, obj, tok = live_token{}](context& ctx) {
      if (!ctx.validate()) return;
      inside.fetch_add(1);
      while (inside.load() < 2) std::this_thread::yield();
      (void)racy_load(obj->fields[0].value);
    });
    t->annotate(wid(w)).annotate_resource(obj, access::read);
    r.spawn(t, g);
  }
  r.wait(g);
  EXPECT_EQ(inside.load(), 2);
  r.retire_resource(obj);
}

/// Two readers have to be inside at the same time: two workers or more.
class sync_test_two_workers : public sync_test {};

TEST_P(sync_test_two_workers, rwlatch_readers_run_together) {
  readers_meet(start(), primitive::rwlatch);
}

TEST_P(sync_test_two_workers, optimistic_readers_run_together) {
  auto& r = start();
  readers_meet(r, primitive::optimistic_latch);
  readers_meet(r, primitive::optimistic_scheduled);
}

/// Makes an optimistic reader's first run overlap a writer: the reader's first run calls
/// first_run_waits() and waits inside until the writer (spawned by read_overlapped on the other
/// worker once the reader is inside: a writer's odd version would keep the reader from starting)
/// has written the object, so that run's validation fails and the runtime runs it again.
struct overlapped_read {
  std::atomic<int> runs{0};
  std::atomic<bool> inside{false};
  std::atomic<bool> written{false};

  /// Called at the start of every run of the reader.
  void first_run_waits() {
    if (runs.fetch_add(1) == 0) {
      inside.store(true);
      while (!written.load()) std::this_thread::yield();
    }
  }

  /// Spawns `reader` (reading `obj`) on worker 0, then the writer on worker 1, and waits.
  void read_overlapped(runtime& r, record* obj, task* reader) {
    const group g = r.make_group();
    reader->annotate(wid(0));
    r.spawn(reader, g);
    while (!inside.load()) std::this_thread::yield();
    auto* writer = make_fn(r, [this, obj, tok = live_token{}](context& ctx) {
      EXPECT_TRUE(ctx.writing());
      racy_store(obj->fields[0].value, racy_load(obj->fields[0].value) + 1);
      written.store(true);
    });
    writer->annotate(wid(1)).annotate_resource(obj, access::write);
    r.spawn(writer, g);
    r.wait(g);
  }
};

/// An optimistic reader that validates first (no copy taken): its validation fails on the
/// first run; the runtime reruns it as it is, and the second run validates. Its fields must be
/// as they were.
class waiting_reader final : public counted_task {
 public:
  static constexpr bool validates_first = true;
  waiting_reader(record* obj, overlapped_read& overlap, std::atomic<int>& seen_step)
      : m_obj(obj), m_overlap(&overlap), m_seen(&seen_step) {
    annotate_resource(obj, access::read);
  }

  task* execute(context& ctx) override {
    m_overlap->first_run_waits();
    (void)racy_load(m_obj->fields[0].value);
    if (!ctx.validate()) return nullptr;  // nothing changed: rerun as is
    m_seen->store(static_cast<int>(m_step));
    ++m_step;
    return nullptr;
  }

 private:
  record* m_obj;
  overlapped_read* m_overlap;
  std::atomic<int>* m_seen;
  unsigned m_step = 7;
};

TEST_P(sync_test_two_workers, a_failed_read_of_a_task_that_validates_first_reruns_it_as_it_is) {
  auto& r = start();
  auto* obj = r.make_resource<record>({.primitive = primitive::optimistic_latch});
  overlapped_read overlap;
  std::atomic<int> seen{-1};
  const std::uint64_t retries_before = r.statistics().total().optimistic_retries;
  overlap.read_overlapped(r, obj, r.make_task<waiting_reader>(obj, overlap, seen));
  EXPECT_EQ(overlap.runs.load(), 2) << "the overlapped read validated, or was not run again";
  EXPECT_EQ(seen.load(), 7) << "the rerun did not see the task as it was";
  r.wait_idle();
  EXPECT_GE(r.statistics().total().optimistic_retries - retries_before, 1u);
  r.retire_resource(obj);
}

/// A reader that validates, then reads again while a writer overlaps it: its second validate()
/// says false, and the run stays final (it may have acted after the first): no rerun comes.
class validated_then_torn final : public counted_task {
 public:
  validated_then_torn(record* obj, overlapped_read& overlap, std::atomic<int>& answers)
      : m_obj(obj), m_overlap(&overlap), m_answers(&answers) {
    annotate_resource(obj, access::read);
  }

  task* execute(context& ctx) override {
    (void)racy_load(m_obj->fields[0].value);
    const bool first = ctx.validate();
    m_overlap->first_run_waits();  // the writer runs now
    (void)racy_load(m_obj->fields[0].value);
    const bool second = ctx.validate();
    m_answers->store((first ? 2 : 0) + (second ? 1 : 0));
    return nullptr;
  }

 private:
  record* m_obj;
  overlapped_read* m_overlap;
  std::atomic<int>* m_answers;
};

TEST_P(sync_test_two_workers, a_run_that_validated_is_final_and_a_later_validate_reports_a_tear) {
  auto& r = start();
  auto* obj = r.make_resource<record>({.primitive = primitive::optimistic_latch});
  overlapped_read overlap;
  std::atomic<int> answers{-1};
  overlap.read_overlapped(r, obj, r.make_task<validated_then_torn>(obj, overlap, answers));
  EXPECT_EQ(overlap.runs.load(), 1) << "a run that had validated was run again";
  EXPECT_EQ(answers.load(), 2) << "expected validate() true, then false after the overlap";
  r.retire_resource(obj);
}

/// A reader that never validates: each run bumps the resource's version as a writer finishing
/// beside it would. It records, per run, the worker, whether the run was optimistic
/// (ctx.validate() then compares the version and says false), the latch word and the owner of
/// the resource's pool.
class starved_reader final : public counted_task {
 public:
  struct run_record {
    unsigned worker;
    bool optimistic;
    std::uint32_t latch;
    unsigned pool_owner;
  };
  starved_reader(runtime& r, record* obj, std::vector<run_record>& runs)
      : m_rt(&r), m_obj(obj), m_runs(&runs) {
    annotate_resource(obj, access::read);
  }

  task* execute(context& ctx) override {
    auto* h = header_of(m_obj);
    (void)racy_load(m_obj->fields[0].value);
    h->version.fetch_add(2);  // "a writer came and went" (even: none inside)
    // Recorded whether or not the run validates (a real task would act only after it did).
    const bool optimistic = !ctx.validate();
    const unsigned owner =
        m_rt->internals().pool_at(h->pool.load()).owner.load(std::memory_order_relaxed);
    m_runs->push_back({ctx.worker().value, optimistic, h->latch.load(), owner});
    return nullptr;
  }

 private:
  runtime* m_rt;
  record* m_obj;
  std::vector<run_record>* m_runs;
};

/// Under optimistic_latch, a read that never validates runs optimistically
/// guarded_executor::optimistic_runs times, then once holding the latch as a writer would, which keeps
/// writers out (instead of being retried for as long as writers overlap it).
TEST_P(sync_test, a_read_that_writers_keep_tearing_runs_under_the_latch_at_last) {
  auto& r = start();
  auto* obj = r.make_resource<record>({.primitive = primitive::optimistic_latch});
  std::vector<starved_reader::run_record> runs;
  const auto before = r.statistics().total();
  const group g = r.make_group();
  r.spawn(r.make_task<starved_reader>(r, obj, runs), g);
  r.wait(g);
  r.wait_idle();
  const auto after = r.statistics().total();
  constexpr unsigned n = detail::guarded_executor::optimistic_runs;
  ASSERT_EQ(runs.size(), n + 1);
  for (unsigned i = 0; i < n; ++i) {
    EXPECT_TRUE(runs[i].optimistic) << "run " << i;
    EXPECT_EQ(runs[i].latch, 0u) << "run " << i;
  }
  EXPECT_FALSE(runs[n].optimistic) << "the last run was validated against the version";
  EXPECT_EQ(runs[n].latch, detail::rw_writer) << "the last run did not hold the latch";
  EXPECT_EQ(header_of(obj)->latch.load(), 0u) << "the latch was not released";
  EXPECT_EQ(after.optimistic_retries - before.optimistic_retries, n);
  EXPECT_EQ(after.optimistic_fallbacks - before.optimistic_fallbacks, 1u);
  r.retire_resource(obj);
}

/// Under optimistic_scheduled, writers run only in the resource's pool: a read that never
/// validates on another worker is forwarded there after guarded_executor::optimistic_runs runs.
/// On that pool's owner it reads optimistically again (where no writer can overlap it; this
/// reader tears its every run itself), and after as many torn runs runs there without a version
/// check.
TEST_P(sync_test_two_workers, a_read_that_writers_keep_tearing_runs_in_the_writers_pool_at_last) {
  auto& r = start();
  auto* obj = r.make_resource<record>({.primitive = primitive::optimistic_scheduled});
  r.move_resource(obj, wid(0));
  std::vector<starved_reader::run_record> runs;
  const auto before = r.statistics().total();
  const group g = r.make_group();
  auto* reader = r.make_task<starved_reader>(r, obj, runs);
  reader->annotate(wid(1));  // not the pool's owner (a reader is routed by its target)
  r.spawn(reader, g);
  r.wait(g);
  r.wait_idle();
  const auto after = r.statistics().total();
  constexpr unsigned n = detail::guarded_executor::optimistic_runs;
  const std::size_t last = 2 * std::size_t{n};  // n runs off the owner, n on it, then plain
  ASSERT_GE(runs.size(), last + 1);
  // Nothing steals the resource's pool here (worker 0 has no work), so the runs are exact.
  ASSERT_EQ(runs.size(), last + 1);
  for (std::size_t i = 0; i < last; ++i) {
    EXPECT_TRUE(runs[i].optimistic) << "run " << i;
    if (i < n) {
      EXPECT_NE(runs[i].worker, runs[i].pool_owner) << "run " << i;
    } else {
      EXPECT_EQ(runs[i].worker, runs[i].pool_owner) << "run " << i << ": not forwarded";
    }
  }
  EXPECT_FALSE(runs[last].optimistic) << "the last run was validated against the version";
  EXPECT_EQ(runs[last].worker, runs[last].pool_owner) << "the last run was not on the pool's owner";
  EXPECT_EQ(after.optimistic_retries - before.optimistic_retries, 2 * n);
  EXPECT_EQ(after.optimistic_fallbacks - before.optimistic_fallbacks, 2u);
  EXPECT_EQ(after.executed - before.executed, 1u) << "the forwarded read is one task";
  r.retire_resource(obj);
}

/// With one pool per worker a resource lives in its owner's home pool. Readers of an
/// optimistic_scheduled resource queued there stay there when an idle worker asks for work: a
/// read forwarded there by the fallback must run beside no writer, and could otherwise bounce
/// between thieves and the pool (up to 22 torn runs of one read were measured so).
TEST_P(sync_test_two_workers, readers_in_their_scheduled_resources_pool_are_not_stolen) {
  auto& r = start({.pools_per_worker = 1});
  auto* obj = r.make_resource<record>({.primitive = primitive::optimistic_scheduled});
  r.move_resource(obj, wid(0));
  constexpr int readers = 64;
  std::array<std::atomic<unsigned>, readers> ran_on{};
  const group g = r.make_group();
  auto* spawner = make_fn(r, [&, obj, tok = live_token{}](context& ctx) {
    for (int i = 0; i < readers; ++i) {
      auto* reader = make_fn(ctx.runtime(), [&, i, obj, tok2 = live_token{}](context& c) {
        (void)racy_load(obj->fields[0].value);
        ran_on[static_cast<std::size_t>(i)].store(c.worker().value + 1);
        std::this_thread::sleep_for(std::chrono::microseconds(300));  // idle peers ask meanwhile
      });
      reader->annotate_resource(obj, access::read);
      ctx.spawn(reader);
    }
  });
  spawner->annotate(wid(0));
  r.spawn(spawner, g);
  r.wait(g);
  for (int i = 0; i < readers; ++i) EXPECT_EQ(ran_on[static_cast<std::size_t>(i)].load(), 1u) << i;
  r.retire_resource(obj);
}

/// racy_store's value takes the field's type: a literal 0 into a std::uint64_t or a std::uint8_t
/// field compiles (it did not: T was deduced from both arguments).
TEST(racy_access, a_literal_stores_into_a_field_of_any_width) {
  struct fields {
    std::uint64_t wide = 7;
    std::uint8_t narrow = 7;
  } f;
  racy_store(f.wide, 0);
  racy_store(f.narrow, racy_load(f.narrow) + 1);
  EXPECT_EQ(racy_load(f.wide), 0u);
  EXPECT_EQ(racy_load(f.narrow), 8u);
}

TEST_P(sync_test, writing_is_true_only_for_writers_that_the_runtime_protects) {
  auto& r = start();
  struct probe {
    primitive prim;
    access mode;
    bool expected;
  };
  for (const probe p : {probe{primitive::none, access::write, false},
                        probe{primitive::spinlock, access::write, true},
                        probe{primitive::rwlatch, access::write, true},
                        probe{primitive::rwlatch, access::read, false},
                        probe{primitive::optimistic_latch, access::write, true},
                        probe{primitive::optimistic_latch, access::read, false},
                        probe{primitive::optimistic_scheduled, access::write, true},
                        probe{primitive::optimistic_scheduled, access::read, false},
                        probe{primitive::scheduling, access::write, true}}) {
    auto* obj = r.make_resource<record>({.primitive = p.prim});
    std::atomic<int> seen{-1};
    const group g = r.make_group();
    auto* t = make_fn(r, [&seen, tok = live_token{}](context& ctx) { seen.store(ctx.writing()); });
    t->annotate_resource(obj, p.mode);
    r.spawn(t, g);
    r.wait(g);
    EXPECT_EQ(seen.load(), p.expected ? 1 : 0)
        << to_string(p.prim) << (p.mode == access::write ? " write" : " read");
    r.retire_resource(obj);
  }
}

/// A reader that returns a new follow-up without calling validate (the runtime validates after
/// the run); its first run overlaps a writer. The torn run's follow-up is freed, never run; the
/// rerun's runs. TearDown checks that no task object is left.
class reader_with_follow_up final : public counted_task {
 public:
  reader_with_follow_up(record* obj, overlapped_read& overlap, std::atomic<int>& follow_ups)
      : m_obj(obj), m_overlap(&overlap), m_follow_ups(&follow_ups) {
    annotate_resource(obj, access::read);
  }

  task* execute(context& ctx) override {
    m_overlap->first_run_waits();
    (void)racy_load(m_obj->fields[0].value);
    return make_fn(ctx, [n = m_follow_ups, tok = live_token{}](context&) { n->fetch_add(1); });
  }

 private:
  record* m_obj;
  overlapped_read* m_overlap;
  std::atomic<int>* m_follow_ups;
};

TEST_P(sync_test_two_workers, the_follow_up_of_a_failed_read_is_freed_and_only_the_reruns_runs) {
  auto& r = start();
  auto* obj = r.make_resource<record>({.primitive = primitive::optimistic_latch});
  overlapped_read overlap;
  std::atomic<int> follow_ups{0};
  overlap.read_overlapped(r, obj, r.make_task<reader_with_follow_up>(obj, overlap, follow_ups));
  EXPECT_EQ(overlap.runs.load(), 2) << "the overlapped read validated, or was not run again";
  EXPECT_EQ(follow_ups.load(), 1) << "the torn run's follow-up ran";
  r.retire_resource(obj);
}

// ---- scheduling: the resource's pool decides where tasks run -------------------------------

TEST_P(sync_test, serialization_by_scheduling_wins_over_a_worker_target) {
  auto& r = start();
  const unsigned target = r.workers() - 1;
  for (primitive p : {primitive::scheduling, primitive::optimistic_scheduled}) {
    auto* obj = r.make_resource<record>({.primitive = p});
    r.move_resource(obj, wid(target));
    std::atomic<unsigned> elsewhere{0};
    std::atomic<unsigned> ran{0};
    const group g = r.make_group();
    const unsigned n = static_cast<unsigned>(scaled(200, 50));
    for (unsigned i = 0; i < n; ++i) {
      auto* t = make_fn(r, [&, target, tok = live_token{}](context& ctx) {
        if (ctx.worker().value != target) elsewhere.fetch_add(1);
        ran.fetch_add(1);
      });
      t->annotate(wid(i % r.workers())).annotate_resource(obj, access::write);
      r.spawn(t, g);
    }
    r.wait(g);
    EXPECT_EQ(ran.load(), n);
    EXPECT_EQ(elsewhere.load(), 0u) << to_string(p) << " writers ran off the resource's pool";
    r.retire_resource(obj);
  }
}

/// Reads one object, aims itself at the next one, then validates (see the test below).
class reannotating_reader final : public counted_task {
 public:
  reannotating_reader(record* first, record* second, std::atomic<int>& validated,
                      std::atomic<int>& refused) noexcept
      : m_first(first), m_second(second), m_validated(&validated), m_refused(&refused) {}
  task* execute(context& ctx) override {
    (void)racy_load(m_first->fields[0].value);
    annotate_resource(m_second, access::read);  // aim at the next step first
    if (!ctx.validate()) {
      m_refused->fetch_add(1);
      return nullptr;
    }
    m_validated->fetch_add(1);
    return nullptr;
  }

 private:
  record* m_first;
  record* m_second;
  std::atomic<int>* m_validated;
  std::atomic<int>* m_refused;
};

// Pins a bug in context::validate(): it checks the version of the resource the task names *now*,
// not the one its read started on. A reader that re-annotates itself for its next step before
// validating is within the contract (task.h forbids only acting outside the task before
// validate()), but then validate() compares the first object's version with the second's: here
// it returns false although nothing was written, and the worker (which re-checks the right
// object) keeps the result of a run that gave up. With clear_annotations() instead, validate()
// reads the header in front of a null pointer. Disabled until validate() keeps the header its
// read started on (a change in src/runtime/runtime.cpp and include/tessera/context.h).
TEST_P(sync_test, validate_after_reannotation_checks_the_object_read) {
  auto& r = start();
  auto* watched = r.make_resource<record>({.primitive = primitive::optimistic_latch});
  auto* next = r.make_resource<record>({.primitive = primitive::optimistic_latch});
  const group g1 = r.make_group();
  auto* w = make_fn(r, [watched, tok = live_token{}](context&) {
    racy_store(watched->fields[0].value, std::int64_t{1});
  });
  w->annotate_resource(watched, access::write);  // watched's version is 2 from now on
  r.spawn(w, g1);
  r.wait(g1);

  std::atomic<int> validated{0}, refused{0};
  const group g2 = r.make_group();
  auto* reader = r.make_task<reannotating_reader>(watched, next, validated, refused);
  reader->annotate_resource(watched, access::read);
  r.spawn(reader, g2);
  r.wait(g2);
  EXPECT_EQ(refused.load(), 0) << "validate() failed although nothing was written";
  EXPECT_EQ(validated.load(), 1);
  r.retire_resource(watched);
  r.retire_resource(next);
}

// ---- the selection table (resource.h) ------------------------------------------------------

TEST(sync_selection, every_row_of_the_table) {
  using I = isolation;
  using F = frequency;
  using P = primitive;
  struct row {
    I iso;
    double ratio;
    F freq;
    P expected;
  };
  const std::vector<row> rows{
      // isolation none: no synchronization whatever the rest says
      {I::none, 0.0, F::low, P::none},
      {I::none, 1.0, F::high, P::none},
      {I::none, 0.5, F::normal, P::none},
      // exclusive: scheduling when hot, spinlock otherwise
      {I::exclusive, 0.0, F::high, P::scheduling},
      {I::exclusive, 1.0, F::high, P::scheduling},
      {I::exclusive, 0.5, F::normal, P::spinlock},
      {I::exclusive, 1.0, F::low, P::spinlock},
      // exclusive_writers, almost never written and hot: optimistic latch too (the scheduled
      // variant is chosen only when named)
      {I::exclusive_writers, 0.99, F::high, P::optimistic_latch},
      {I::exclusive_writers, 1.0, F::high, P::optimistic_latch},
      // exclusive_writers almost never read (read ratio < 0.1): spinlock, whatever the frequency
      {I::exclusive_writers, 0.0, F::high, P::spinlock},
      {I::exclusive_writers, 0.0, F::low, P::spinlock},
      {I::exclusive_writers, 0.09, F::normal, P::spinlock},
      // every other exclusive_writers case: optimistic latch (measured best, bench/sync)
      {I::exclusive_writers, 0.1, F::normal, P::optimistic_latch},
      {I::exclusive_writers, 1.0, F::normal, P::optimistic_latch},
      {I::exclusive_writers, 0.95, F::high, P::optimistic_latch},
      {I::exclusive_writers, 0.95, F::low, P::optimistic_latch},
      {I::exclusive_writers, 0.5, F::high, P::optimistic_latch},
      {I::exclusive_writers, 0.89, F::normal, P::optimistic_latch},
      {I::exclusive_writers, 0.7, F::low, P::optimistic_latch},
      {I::exclusive_writers, 0.49, F::high, P::optimistic_latch},
      {I::exclusive_writers, 0.2, F::normal, P::optimistic_latch},
  };
  for (const auto& r : rows) {
    const resource_hints h{.isolation = r.iso, .read_ratio = r.ratio, .frequency = r.freq};
    EXPECT_EQ(select_primitive(h), r.expected)
        << "isolation " << static_cast<int>(r.iso) << " ratio " << r.ratio << " frequency "
        << static_cast<int>(r.freq) << ": got " << to_string(select_primitive(h));
  }
  // The defaults: exclusive_writers, 0.5, normal.
  EXPECT_EQ(select_primitive(resource_hints{}), P::optimistic_latch);
}

// Every primitive a resource can name (all but primitive::automatic).
constexpr std::array<primitive, 6> explicit_ones{primitive::none,
                                                 primitive::spinlock,
                                                 primitive::rwlatch,
                                                 primitive::optimistic_latch,
                                                 primitive::optimistic_scheduled,
                                                 primitive::scheduling};

TEST(sync_selection, an_explicit_primitive_wins_over_every_hint) {
  for (primitive p : explicit_ones) {
    for (isolation i : {isolation::exclusive, isolation::exclusive_writers, isolation::none}) {
      for (frequency f : {frequency::low, frequency::normal, frequency::high}) {
        for (double ratio : {0.0, 0.5, 0.95}) {
          const resource_hints h{
              .isolation = i, .read_ratio = ratio, .frequency = f, .primitive = p};
          EXPECT_EQ(select_primitive(h), p);
        }
      }
    }
  }
}

// The primitive applied by worker count: an automatic choice needs none where one worker runs
// every task (never two at once); an explicit one is applied as named; from two workers on the
// hints' choice is applied.
TEST(sync_selection, one_worker_applies_no_primitive_to_an_automatic_choice) {
  for (isolation i : {isolation::exclusive, isolation::exclusive_writers, isolation::none}) {
    for (frequency f : {frequency::low, frequency::normal, frequency::high}) {
      for (double ratio : {0.0, 0.5, 0.95, 0.99, 1.0}) {
        const resource_hints h{.isolation = i, .read_ratio = ratio, .frequency = f};
        EXPECT_EQ(select_primitive(h, 1), primitive::none)
            << "isolation " << static_cast<int>(i) << " ratio " << ratio;
        for (unsigned workers : {2u, 3u, 16u, 1024u}) {
          EXPECT_EQ(select_primitive(h, workers), select_primitive(h)) << workers << " workers";
        }
        for (primitive p : explicit_ones) {
          resource_hints named = h;
          named.primitive = p;
          for (unsigned workers : {1u, 2u, 16u}) EXPECT_EQ(select_primitive(named, workers), p);
        }
      }
    }
  }
}

TEST(sync_selection, a_resource_gets_the_primitive_for_its_runtimes_worker_count) {
  const std::vector<resource_hints> hints{
      {},                                                                   // opt. latch
      {.read_ratio = 1.0, .frequency = frequency::high},                    // opt. scheduled
      {.isolation = isolation::exclusive, .frequency = frequency::high},    // scheduling
      {.isolation = isolation::exclusive},                                  // spinlock
      {.isolation = isolation::none},                                       // none
      {.primitive = primitive::spinlock},                                   // named
      {.read_ratio = 1.0, .primitive = primitive::optimistic_latch},        // named
  };
  for (unsigned workers : {1u, 2u}) {
    SCOPED_TRACE(std::to_string(workers) + " workers");
    runtime r({.workers = workers, .pin = false});
    for (const auto& h : hints) {
      auto* obj = r.make_resource<record>(h);
      EXPECT_EQ(runtime::primitive_of(obj), select_primitive(h));
      EXPECT_EQ(header_of(obj)->applied, select_primitive(h, workers));
      EXPECT_EQ(header_of(obj)->applied,
                workers == 1 && h.primitive == primitive::automatic ? primitive::none
                                                                    : select_primitive(h));
      r.retire_resource(obj);
    }
  }
}

// A writer on an automatically chosen resource of a one-worker runtime is still told it writes
// (context::writing() answers for the selected primitive), and its readers validate at once.
TEST(sync_selection, one_worker_runs_an_automatic_resource_as_its_choice_promises) {
  runtime r({.workers = 1, .pin = false});
  auto* obj = r.make_resource<record>(resource_hints{});
  std::atomic<int> writing{0};
  std::atomic<int> validated{0};
  const group g = r.make_group();
  for (int i = 0; i < 8; ++i) {
    auto* writer = make_fn(r, [obj, &writing, tok = live_token{}](context& ctx) {
      racy_store(obj->fields[0].value, racy_load(obj->fields[0].value) + 1);
      if (ctx.writing()) writing.fetch_add(1, std::memory_order_relaxed);
    });
    writer->annotate_resource(obj, access::write);
    r.spawn(writer, g);
    auto* reader = make_fn(r, [&validated, tok = live_token{}](context& ctx) {
      if (ctx.validate()) validated.fetch_add(1, std::memory_order_relaxed);
    });
    reader->annotate_resource(obj, access::read);
    r.spawn(reader, g);
  }
  r.wait(g);
  EXPECT_EQ(writing.load(), 8);
  EXPECT_EQ(validated.load(), 8);
  EXPECT_EQ(racy_load(obj->fields[0].value), 8);
  EXPECT_EQ(r.statistics().total().optimistic_retries, 0u);
  r.retire_resource(obj);
}

// ---- placement --------------------------------------------------------------------------------

std::vector<unsigned> resources_per_pool(detail::scheduler& s, const std::vector<record*>& objs) {
  std::vector<unsigned> count(s.pool_count(), 0);
  for (auto* o : objs) ++count[header_of(o)->pool.load()];
  return count;
}

TEST_P(sync_test, placement_spreads_weight_over_the_resource_pools) {
  auto& r = start();
  auto& s = r.internals();
  const unsigned ppw = s.options().pools_per_worker;
  std::vector<record*> objs;
  // 32 resources per pool that takes them: two random choices keep every pool within a few of
  // the mean (the gap grows with log log pools), so at this mean a factor of two holds at any
  // pool count; at a mean of 3 (300 resources over the 99 pools of 33 workers) it never did.
  const unsigned takers = ppw > 1 ? r.workers() * (ppw - 1) : s.pool_count();
  const unsigned n = 32 * takers;
  for (unsigned i = 0; i < n; ++i) objs.push_back(r.make_resource<record>(resource_hints{}));
  for (auto* o : objs) EXPECT_EQ(runtime::primitive_of(o), primitive::optimistic_latch);
  const auto count = resources_per_pool(s, objs);
  unsigned lo = std::numeric_limits<unsigned>::max(), hi = 0;
  for (unsigned p = 0; p < s.pool_count(); ++p) {
    if (ppw > 1 && s.pool_at(p).is_home) {
      EXPECT_EQ(count[p], 0u) << "home pool " << p << " got a resource";
      EXPECT_EQ(s.pool_at(p).weight.load(), 0u);
      continue;
    }
    EXPECT_EQ(s.pool_at(p).weight.load(), 4u * count[p]) << "normal frequency weighs 4";
    lo = std::min(lo, count[p]);
    hi = std::max(hi, count[p]);
  }
  EXPECT_GT(lo, 0u);
  EXPECT_LE(hi, 2 * lo) << "two random choices keep the pools within a factor of two";
  for (auto* o : objs) r.retire_resource(o);
  for (unsigned p = 0; p < s.pool_count(); ++p) {
    EXPECT_EQ(s.pool_at(p).weight.load(), 0u) << "retiring gives the weight back";
  }
}

TEST_P(sync_test, a_high_frequency_resource_gets_fewer_neighbours) {
  auto& r = start();
  auto& s = r.internals();
  const unsigned ppw = s.options().pools_per_worker;
  const unsigned resource_pools = ppw > 1 ? r.workers() * (ppw - 1) : s.pool_count();
  std::vector<record*> hot;
  for (unsigned i = 0; i < std::max(1u, resource_pools / 3); ++i) {
    hot.push_back(r.make_resource<record>({.frequency = frequency::high}));
  }
  std::vector<record*> cold;
  const unsigned n = static_cast<unsigned>(scaled(200, 60)) * resource_pools;
  for (unsigned i = 0; i < n; ++i) {
    cold.push_back(r.make_resource<record>({.frequency = frequency::low}));
  }
  const auto hot_count = resources_per_pool(s, hot);
  const auto cold_count = resources_per_pool(s, cold);
  double with_hot = 0, without_hot = 0;
  unsigned pools_with_hot = 0, pools_without_hot = 0;
  for (unsigned p = 0; p < s.pool_count(); ++p) {
    if (ppw > 1 && s.pool_at(p).is_home) continue;
    if (hot_count[p] > 0) {
      with_hot += cold_count[p];
      ++pools_with_hot;
    } else {
      without_hot += cold_count[p];
      ++pools_without_hot;
    }
    EXPECT_EQ(s.pool_at(p).weight.load(), 16u * hot_count[p] + cold_count[p]);
  }
  ASSERT_GT(pools_with_hot, 0u);
  ASSERT_GT(pools_without_hot, 0u);
  EXPECT_LT(with_hot / pools_with_hot, without_hot / pools_without_hot)
      << "pools holding a frequency::high resource must get fewer other resources";
  for (auto* o : hot) r.retire_resource(o);
  for (auto* o : cold) r.retire_resource(o);
}

TEST_P(sync_test, move_resource_places_it_in_a_resource_pool_of_the_worker) {
  auto& r = start();
  auto& s = r.internals();
  const unsigned ppw = s.options().pools_per_worker;
  std::vector<record*> objs;
  for (unsigned i = 0; i < 6 * r.workers(); ++i) {
    auto* o = r.make_resource<record>({.primitive = primitive::scheduling});
    const unsigned w = i % r.workers();
    r.move_resource(o, wid(w));
    const unsigned p = header_of(o)->pool.load();
    EXPECT_EQ(p / ppw, w);
    if (ppw > 1) {
      EXPECT_FALSE(s.pool_at(p).is_home);
    }
    objs.push_back(o);
  }
  // Moves spread over the worker's resource pools (the lightest is chosen).
  const auto count = resources_per_pool(s, objs);
  for (unsigned w = 0; w < r.workers(); ++w) {
    unsigned lo = std::numeric_limits<unsigned>::max(), hi = 0, sum = 0;
    for (unsigned j = (ppw > 1 ? 1 : 0); j < ppw; ++j) {
      lo = std::min(lo, count[w * ppw + j]);
      hi = std::max(hi, count[w * ppw + j]);
      sum += count[w * ppw + j];
    }
    EXPECT_EQ(sum, 6u);
    EXPECT_LE(hi - lo, 2u) << "worker " << w;
  }
  EXPECT_THROW(r.move_resource(objs.front(), wid(r.workers())), std::out_of_range);
  for (auto* o : objs) r.retire_resource(o);
}

// A move takes effect at once, so a task on the resource cannot move it: a task spawned on it
// afterwards would run in the new pool beside the mover (two writers of a serialized object).
// The error reaches the group's waiter, the resource stays where it was; from a task on
// another resource the move is allowed.
TEST_P(sync_test, move_resource_from_a_task_on_that_resource_is_an_error) {
  auto& r = start();
  auto* obj = r.make_resource<record>({.primitive = primitive::scheduling});
  auto* other = r.make_resource<record>({.primitive = primitive::scheduling});
  const unsigned before = header_of(obj)->pool.load();
  const unsigned to = r.workers() - 1;
  group g = r.make_group();
  auto* mover = make_fn(r, [obj, to, tok = live_token{}](context& ctx) {
    ctx.runtime().move_resource(obj, wid(to));
  });
  mover->annotate_resource(obj, access::write);
  r.spawn(mover, g);
  try {
    r.wait(g);
    ADD_FAILURE() << "move_resource from a task on the resource did not throw";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("move_resource"), std::string::npos) << e.what();
  }
  EXPECT_EQ(header_of(obj)->pool.load(), before);
  g = r.make_group();
  auto* elsewhere = make_fn(r, [obj, to, tok = live_token{}](context& ctx) {
    ctx.runtime().move_resource(obj, wid(to));
  });
  elsewhere->annotate_resource(other, access::write);
  r.spawn(elsewhere, g);
  r.wait(g);
  EXPECT_EQ(header_of(obj)->pool.load() / r.internals().options().pools_per_worker, to);
  r.retire_resource(obj);
  r.retire_resource(other);
}

TESSERA_INSTANTIATE_WORKER_COUNTS(sync_test);
TESSERA_INSTANTIATE_MULTI_WORKER_COUNTS(sync_test_two_workers);


// ---- tessera/coupled_read.h: where a coupled read is possible, and that a write ends it -------

/// A writer of `obj` that answers whether a coupled read of `obj` could begin while it writes.
class coupled_probe final : public task {
 public:
  coupled_probe(record* obj, std::atomic<int>& answer) : m_obj(obj), m_answer(&answer) {
    annotate_resource(obj, access::write);
  }
  task* execute(context&) override {
    m_answer->store(coupled_begin(m_obj).has_value() ? 1 : 0);
    racy_store(m_obj->fields[0].value, racy_load(m_obj->fields[0].value) + 1);
    return nullptr;
  }

 private:
  record* m_obj;
  std::atomic<int>* m_answer;
};

TEST(coupled_read, is_refused_where_the_primitive_keeps_no_version) {
  runtime r({.workers = 2});
  for (const primitive p : {primitive::spinlock, primitive::rwlatch, primitive::scheduling}) {
    auto* obj = r.make_resource<record>({.primitive = p});
    EXPECT_FALSE(coupled_begin(obj).has_value()) << to_string(p);
    r.retire_resource(obj);
  }
}

TEST(coupled_read, under_an_optimistic_primitive_a_write_ends_it_and_a_writer_inside_refuses) {
  runtime r({.workers = 2});
  for (const primitive p : {primitive::optimistic_latch, primitive::optimistic_scheduled}) {
    auto* obj = r.make_resource<record>({.primitive = p});
    const auto v = coupled_begin(obj);
    ASSERT_TRUE(v.has_value()) << to_string(p);
    EXPECT_TRUE(coupled_valid(obj, *v)) << to_string(p);
    std::atomic<int> answer{-1};
    r.spawn(r.make_task<coupled_probe>(obj, answer));
    r.wait_idle();
    EXPECT_EQ(answer.load(), 0) << to_string(p) << ": began while a writer was inside";
    EXPECT_FALSE(coupled_valid(obj, *v)) << to_string(p) << ": a write did not end the read";
    const auto w = coupled_begin(obj);
    ASSERT_TRUE(w.has_value()) << to_string(p);
    EXPECT_NE(*w, *v) << to_string(p);
    EXPECT_TRUE(coupled_valid(obj, *w)) << to_string(p);
    r.retire_resource(obj);
  }
}

TEST(coupled_read, with_one_worker_an_automatic_choice_needs_no_version) {
  runtime r({.workers = 1});
  auto* obj = r.make_resource<record>({});
  const auto v = coupled_begin(obj);
  ASSERT_TRUE(v.has_value());
  std::atomic<int> answer{-1};
  r.spawn(r.make_task<coupled_probe>(obj, answer));
  r.wait_idle();
  EXPECT_EQ(answer.load(), 1) << "one worker: nothing overlaps the running task";
  r.retire_resource(obj);
}


// ---- tessera/coupled_write.h: where a coupled write is possible, and that it excludes writers --

/// A writer of `obj` that answers whether a coupled write of `obj` could begin while it writes.
class coupled_write_probe final : public task {
 public:
  coupled_write_probe(record* obj, std::atomic<int>& answer) : m_obj(obj), m_answer(&answer) {
    annotate_resource(obj, access::write);
  }
  task* execute(context&) override {
    const bool began = coupled_write_begin(m_obj);
    if (began) coupled_write_end(m_obj);
    m_answer->store(began ? 1 : 0);
    return nullptr;
  }

 private:
  record* m_obj;
  std::atomic<int>* m_answer;
};

/// Adds one to `obj`'s plain_writes as a writer task of `obj`.
class add_one final : public task {
 public:
  explicit add_one(record* obj) : m_obj(obj) { annotate_resource(obj, access::write); }
  task* execute(context&) override {
    ++m_obj->plain_writes;  // plain: ThreadSanitizer checks that the writers are ordered
    return nullptr;
  }

 private:
  record* m_obj;
};

TEST(coupled_write, is_refused_where_the_pool_serializes_the_writers) {
  runtime r({.workers = 2});
  for (const primitive p : {primitive::scheduling, primitive::optimistic_scheduled}) {
    auto* obj = r.make_resource<record>({.primitive = p});
    EXPECT_FALSE(coupled_write_begin(obj)) << to_string(p);
    r.retire_resource(obj);
  }
}

TEST(coupled_write, under_a_latch_excludes_other_writers_and_ends_optimistic_reads) {
  runtime r({.workers = 2});
  for (const primitive p : {primitive::spinlock, primitive::rwlatch, primitive::optimistic_latch}) {
    auto* obj = r.make_resource<record>({.primitive = p});
    const auto read = coupled_begin(obj);  // optimistic_latch only
    ASSERT_TRUE(coupled_write_begin(obj)) << to_string(p);
    EXPECT_FALSE(coupled_write_begin(obj)) << to_string(p) << ": began twice";
    EXPECT_FALSE(coupled_begin(obj).has_value()) << to_string(p) << ": a read began inside";
    racy_store(obj->fields[0].value, std::int64_t{7});
    coupled_write_end(obj);
    if (read) {
      EXPECT_FALSE(coupled_valid(obj, *read)) << to_string(p) << ": the write did not end the read";
      const auto after = coupled_begin(obj);
      ASSERT_TRUE(after.has_value()) << to_string(p);
      EXPECT_EQ(*after, *read + 2) << to_string(p);
    }
    // A task writing it keeps a coupled write out; after it, one begins again.
    std::atomic<int> answer{-1};
    r.spawn(r.make_task<coupled_write_probe>(obj, answer));
    r.wait_idle();
    EXPECT_EQ(answer.load(), 0) << to_string(p) << ": began while a writer task was inside";
    ASSERT_TRUE(coupled_write_begin(obj)) << to_string(p);
    coupled_write_end(obj);
    EXPECT_EQ(racy_load(obj->fields[0].value), 7) << to_string(p);
    r.retire_resource(obj);
  }
}

TEST(coupled_write, with_one_worker_an_automatic_choice_needs_nothing) {
  runtime r({.workers = 1});
  auto* obj = r.make_resource<record>({});
  ASSERT_TRUE(coupled_write_begin(obj));
  coupled_write_end(obj);
  std::atomic<int> answer{-1};
  r.spawn(r.make_task<coupled_write_probe>(obj, answer));
  r.wait_idle();
  EXPECT_EQ(answer.load(), 1) << "one worker: nothing overlaps the running task";
  r.retire_resource(obj);
}

// Increments from tasks of no resource (coupled writes, a writer task where one is refused) and
// from writer tasks of the object, on every worker at once: none is lost.
TEST(coupled_write, increments_beside_writer_tasks_are_not_lost) {
  runtime r({.workers = 4});
  for (const primitive p : {primitive::spinlock, primitive::rwlatch, primitive::optimistic_latch}) {
    auto* obj = r.make_resource<record>({.primitive = p});
    constexpr int n = 4000;
    std::atomic<int> coupled{0};
    const group g = r.make_group();
    for (int i = 0; i < n; ++i) {
      if (i % 2 == 0) {
        r.spawn(r.make_task<add_one>(obj), g);
        continue;
      }
      r.spawn(r.make_task_from([obj, &coupled](context& ctx) {
                if (coupled_write_begin(obj)) {
                  ++obj->plain_writes;
                  coupled_write_end(obj);
                  coupled.fetch_add(1, std::memory_order_relaxed);
                } else {
                  ctx.spawn(ctx.make_task<add_one>(obj));
                }
              }),
              g);
    }
    r.wait(g);
    r.wait_idle();
    EXPECT_EQ(obj->plain_writes, n) << to_string(p);
    EXPECT_GT(coupled.load(), 0) << to_string(p);
    r.retire_resource(obj);
  }
}

}  // namespace
}  // namespace tessera::test
