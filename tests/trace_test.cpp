// Trace (tessera/trace.h): the file is Chrome trace-event JSON of the documented shape; per
// worker the task spans are ordered and apart; one span per executed task; a program whose task
// throws, or whose group is cancelled, still writes a valid file; a tiny ring drops and counts
// (also when TESSERA_TRACE_EVENTS sets it); the 16-byte event keeps what the file shows, the
// table of task types gives each type one id, and a ring puts a task's retries and forwarding
// on that task's own event.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <variant>
#include <vector>

#include "test_support.h"
#include "trace/trace_buffer.h"

namespace tessera::test {
namespace {

// ---- a small JSON reader (enough to check the file's shape) ---------------------------------

struct json;
using json_object = std::map<std::string, json>;
using json_array = std::vector<json>;
struct json {
  std::variant<std::nullptr_t, bool, double, std::string, json_array, json_object> v;
  const json_object& object() const { return std::get<json_object>(v); }
  const json_array& array() const { return std::get<json_array>(v); }
  double number() const { return std::get<double>(v); }
  const std::string& text() const { return std::get<std::string>(v); }
  bool has(const std::string& k) const { return object().count(k) != 0; }
  const json& operator[](const std::string& k) const { return object().at(k); }
};

class json_reader {
 public:
  explicit json_reader(std::string s) : m_s(std::move(s)) {}
  json document() {
    json j = value();
    space();
    if (m_i != m_s.size()) fail("text after the document");
    return j;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("JSON: " + why + " at byte " + std::to_string(m_i));
  }
  void space() {
    while (m_i < m_s.size() && (m_s[m_i] == ' ' || m_s[m_i] == '\n' || m_s[m_i] == '\t' ||
                                m_s[m_i] == '\r'))
      ++m_i;
  }
  bool eat(char c) {
    space();
    if (m_i < m_s.size() && m_s[m_i] == c) {
      ++m_i;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  std::string string() {
    expect('"');
    std::string out;
    while (m_i < m_s.size() && m_s[m_i] != '"') {
      char c = m_s[m_i++];
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c == '\\') {
        if (m_i >= m_s.size()) fail("cut escape");
        const char e = m_s[m_i++];
        if (e == 'u') {
          if (m_i + 4 > m_s.size()) fail("cut \\u");
          c = static_cast<char>(std::stoi(m_s.substr(m_i, 4), nullptr, 16));
          m_i += 4;
        } else if (e == '"' || e == '\\' || e == '/') {
          c = e;
        } else if (e == 'n') {
          c = '\n';
        } else if (e == 't') {
          c = '\t';
        } else {
          fail("unknown escape");
        }
      }
      out += c;
    }
    expect('"');
    return out;
  }
  json value() {
    space();
    if (m_i >= m_s.size()) fail("unexpected end");
    const char c = m_s[m_i];
    if (c == '{') {
      ++m_i;
      json_object o;
      if (!eat('}')) {
        do {
          space();
          std::string k = string();
          expect(':');
          o.emplace(std::move(k), value());
        } while (eat(','));
        expect('}');
      }
      return {std::move(o)};
    }
    if (c == '[') {
      ++m_i;
      json_array a;
      if (!eat(']')) {
        do a.push_back(value());
        while (eat(','));
        expect(']');
      }
      return {std::move(a)};
    }
    if (c == '"') return {string()};
    for (const auto& [word, j] : {std::pair<const char*, json>{"null", {nullptr}},
                                  {"true", {true}}, {"false", {false}}}) {
      if (m_s.compare(m_i, std::strlen(word), word) == 0) {
        m_i += std::strlen(word);
        return j;
      }
    }
    std::size_t used = 0;
    const double d = std::stod(m_s.substr(m_i, 40), &used);
    if (used == 0) fail("not a value");
    m_i += used;
    return {d};
  }
  std::string m_s;
  std::size_t m_i = 0;
};

json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("no file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return json_reader(ss.str()).document();
}

/// A file name of its own for each test (ctest runs tests in parallel).
std::string trace_path(const char* what) {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string("tessera_trace_") + info->name() + "_" + what + "_" +
                     std::to_string(::getpid()) + ".json";
  for (char& c : name)
    if (c == '/') c = '_';
  return testing::TempDir() + name;
}

struct trace_summary {
  std::size_t spans = 0;
  std::size_t untimed = 0;  // spans placed between clock reads ("timed": false)
  std::uint64_t dropped = 0;
  std::size_t runtimes = 0;
};

/// Checks the documented shape and the per-worker order of the spans; counts them.
trace_summary check_trace(const std::string& path) {
  const json doc = read_json_file(path);
  trace_summary s;
  EXPECT_EQ(doc["displayTimeUnit"].text(), "ns");
  const json& other = doc["otherData"];
  s.dropped = static_cast<std::uint64_t>(other["dropped_events"].number());
  s.runtimes = static_cast<std::size_t>(other["runtimes"].number());
  std::map<std::pair<int, int>, double> last_end;  // (pid, tid): end of the last span, µs
  std::map<std::pair<int, int>, bool> named;
  for (const json& e : doc["traceEvents"].array()) {
    const std::string& ph = e["ph"].text();
    const int pid = static_cast<int>(e["pid"].number());
    EXPECT_GE(pid, 1);
    EXPECT_FALSE(e["name"].text().empty());
    if (ph == "M") {
      if (e["name"].text() == "thread_name") {
        named[{pid, static_cast<int>(e["tid"].number())}] = true;
        EXPECT_TRUE(e["args"].has("dropped"));
      }
      continue;
    }
    const std::pair<int, int> track{pid, static_cast<int>(e["tid"].number())};
    EXPECT_TRUE(named[track]) << "an event on a track without a thread_name before it";
    const double ts = e["ts"].number();
    EXPECT_GE(ts, 0.0);
    if (ph == "X") {
      ++s.spans;
      EXPECT_EQ(e["cat"].text(), "task");
      const double dur = e["dur"].number();
      EXPECT_GE(dur, 0.0);
      EXPECT_TRUE(e["args"].has("resource"));
      EXPECT_TRUE(e["args"].has("primitive"));
      EXPECT_TRUE(e["args"].has("retries"));
      EXPECT_TRUE(e["args"].has("timed"));
      if (e["args"].has("timed") && !std::get<bool>(e["args"]["timed"].v)) ++s.untimed;
      // ts and dur are exact to the nanosecond: compare in whole nanoseconds
      const auto ns = [](double us) { return std::llround(us * 1000.0); };
      auto it = last_end.find(track);
      if (it != last_end.end()) {
        EXPECT_LE(ns(it->second), ns(ts)) << "spans overlap or are out of order on worker "
                                          << track.second;
      }
      last_end[track] = ts + dur;
    } else if (ph == "i") {
      EXPECT_EQ(e["s"].text(), "t");
    } else if (ph == "C") {
      EXPECT_TRUE(e["args"].has("queued"));
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;
    }
  }
  return s;
}

class trace_test : public runtime_fixture {};

struct counter {
  std::uint64_t value = 0;
};

TEST_P(trace_test, one_ordered_span_per_executed_task_in_chrome_json) {
  const std::string path = trace_path("main");
  auto& r = start({.trace = {.file = path}});
  auto* c = r.make_resource<counter>(resource_hints{});
  const group g = r.make_group();
  const std::uint64_t n = scaled(600, 150);
  for (std::uint64_t i = 0; i < n; ++i) {
    r.spawn(
        [c, i](context& ctx) {
          if (i % 3 == 0) {  // a child on the resource: spans with a primitive
            auto* t = ctx.runtime().make_task_from([c](context&) { ++c->value; });
            t->annotate_resource(c, access::write);
            ctx.spawn(t);
          }
        },
        g);
  }
  r.wait(g);
  r.stop();
  const std::uint64_t executed = r.statistics().total().executed;
  EXPECT_EQ(c->value, (n + 2) / 3);
  const trace_summary s = check_trace(path);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(s.runtimes, 1u);
  EXPECT_EQ(s.spans, executed);
  r.destroy_resource(c);
  std::remove(path.c_str());
}

TEST_P(trace_test, a_throwing_task_and_a_cancelled_group_still_leave_a_valid_file) {
  const std::string path = trace_path("errors");
  auto& r = start({.trace = {.file = path}});
  const group thrown = r.make_group();
  r.spawn([](context&) { throw std::runtime_error("boom"); }, thrown);
  EXPECT_THROW(r.wait(thrown), std::runtime_error);
  const group cancelled = r.make_group();
  r.spawn([](context& ctx) {  // keeps spawning until the cancel drops its children
    for (int i = 0; i < 8; ++i) ctx.spawn([](context&) {});
  }, cancelled);
  r.cancel(cancelled);
  r.wait(cancelled);
  r.stop();
  const trace_summary s = check_trace(path);
  EXPECT_EQ(s.spans, r.statistics().total().executed);
  std::remove(path.c_str());
}

// Tasks on resources whose primitive serializes them in a pool (scheduling, and the writers of
// optimistic_scheduled) are forwarded there when they are taken elsewhere, and optimistic reads
// beside writers retry: a forwarded task is an instant, not a span, and runs (one span) where it
// went; retries land in the spans' args.
TEST_P(trace_test, forwarded_and_retried_tasks_keep_one_span_per_executed_task) {
  const std::string path = trace_path("forwarded");
  auto& r = start({.trace = {.file = path}});
  std::vector<counter*> objects;
  for (const primitive p : {primitive::scheduling, primitive::optimistic_scheduled,
                            primitive::optimistic_latch, primitive::scheduling}) {
    objects.push_back(r.make_resource<counter>({.primitive = p}));
  }
  const group g = r.make_group();
  const std::uint64_t n = scaled(400, 100);
  const auto op = [&](runtime& rt, std::uint64_t i) {
    counter* c = objects[i % objects.size()];
    const bool write = i % 3 != 0;
    auto* t = rt.make_task_from([c, write](context& ctx) {
      if (write) {
        ++c->value;
      } else if (!ctx.validate()) {  // a read beside a writer: retried
        return;
      }
    });
    t->annotate_resource(c, write ? access::write : access::read);
    return t;
  };
  for (std::uint64_t i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      r.spawn(op(r, i), g);  // from outside
    } else {
      r.spawn([&op, i](context& ctx) { ctx.spawn(op(ctx.runtime(), i)); }, g);  // from a task
    }
  }
  r.wait(g);
  r.stop();
  std::uint64_t writes = 0;
  for (counter* c : objects) writes += c->value;
  EXPECT_EQ(writes, n - (n + 2) / 3);
  const trace_summary s = check_trace(path);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(s.spans, r.statistics().total().executed);
  for (counter* c : objects) r.destroy_resource(c);
  std::remove(path.c_str());
}

// One worker: every task lands in its ring.
TEST(trace, a_tiny_ring_keeps_the_newest_events_and_counts_the_rest) {
  const std::string path = trace_path("tiny");
  runtime r({.workers = 1, .trace = {.file = path, .events_per_worker = 16}});
  const group g = r.make_group();
  for (int i = 0; i < 200; ++i) r.spawn([](context&) {}, g);
  r.wait(g);
  r.stop();
  const trace_summary s = check_trace(path);
  EXPECT_LE(s.spans, 16u);
  EXPECT_GE(s.dropped, 200u - 16u);
  std::remove(path.c_str());
}

TEST(trace, the_environment_turns_it_on_and_runtimes_share_the_file) {
  const std::string path = trace_path("env");
  ASSERT_EQ(::setenv("TESSERA_TRACE", path.c_str(), 1), 0);
  for (int k = 0; k < 2; ++k) {
    runtime r({.workers = 2});
    r.spawn([](context&) {});
    r.wait_idle();
  }
  ASSERT_EQ(::unsetenv("TESSERA_TRACE"), 0);
  const trace_summary s = check_trace(path);
  EXPECT_EQ(s.runtimes, 2u);
  EXPECT_EQ(s.spans, 2u);
  std::remove(path.c_str());
}

TEST(trace, the_environment_sets_the_ring_size) {
  const std::string path = trace_path("events");
  ASSERT_EQ(::setenv("TESSERA_TRACE_EVENTS", "16", 1), 0);
  {
    runtime r({.workers = 1, .trace = {.file = path}});
    const group g = r.make_group();
    for (int i = 0; i < 200; ++i) r.spawn([](context&) {}, g);
    r.wait(g);
  }
  ASSERT_EQ(::unsetenv("TESSERA_TRACE_EVENTS"), 0);
  const trace_summary s = check_trace(path);
  EXPECT_LE(s.spans, 16u);
  EXPECT_GE(s.dropped, 200u - 16u);
  std::remove(path.c_str());
}

TEST(trace, time_every_task_reads_the_clock_for_every_span) {
  const std::string path = trace_path("exact");
  {
    runtime r({.workers = 1, .trace = {.file = path, .time_every_task = true}});
    const group g = r.make_group();
    for (int i = 0; i < 2000; ++i) r.spawn([](context&) {}, g);
    r.wait(g);
  }
  const trace_summary s = check_trace(path);
  EXPECT_EQ(s.spans, 2000u);
  EXPECT_EQ(s.untimed, 0u);
  std::remove(path.c_str());
}

TEST(trace, the_clock_sampler_reads_less_often_while_reads_are_close_and_again_when_not) {
  detail::trace_clock_sampler c(false);
  std::uint64_t now = 1;
  const auto run = [&](int tasks, std::uint64_t ticks_each) {
    int reads = 0;
    for (int i = 0; i < tasks; ++i) {
      now += ticks_each;
      if (c.due()) {
        c.read(now);
        ++reads;
      }
    }
    return reads;
  };
  EXPECT_EQ(run(1000, 10), 1000 / 64 + 6);  // short tasks: down to every 64th
  EXPECT_EQ(c.every(), detail::trace_clock_sampler::max_every);
  run(1000, 100000);  // long tasks: back to every task
  EXPECT_EQ(c.every(), 1u);
  EXPECT_EQ(run(10, 100000), 10);
  c.restart();
  EXPECT_TRUE(c.due());  // the first task after a restart reads
  detail::trace_clock_sampler exact(true);
  now = 1;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(exact.due());
    exact.read(now += 10);
  }
}

TEST(trace, an_event_keeps_ticks_type_resource_primitive_and_retries) {
  using detail::trace_event;
  using detail::trace_kind;
  int object = 0;
  const std::uint64_t ticks = (std::uint64_t{0xABCD} << 48) | 0x123456789ABCull;
  trace_event e = trace_event::task(ticks, 777, &object, 5);
  EXPECT_EQ(e.ticks_low(), 0x123456789ABCull);
  EXPECT_EQ(e.type_id(), 777u);
  EXPECT_EQ(e.kind(), trace_kind::task);
  EXPECT_EQ(e.resource(), reinterpret_cast<std::uintptr_t>(&object) & trace_event::low_mask);
  EXPECT_EQ(e.primitive(), 5u);
  EXPECT_EQ(e.retries(), 0u);
  EXPECT_TRUE(e.timed());
  const trace_event u = trace_event::untimed_task(777, &object, 5);
  EXPECT_FALSE(u.timed());
  EXPECT_EQ(u.type_id(), 777u);
  EXPECT_EQ(u.resource(), e.resource());
  e.set_retries(3);
  EXPECT_EQ(e.retries(), 3u);
  e.set_retries(100000);  // saturates
  EXPECT_EQ(e.retries(), 255u);
  e.set_kind(trace_kind::forwarded);
  EXPECT_EQ(e.kind(), trace_kind::forwarded);
  EXPECT_EQ(e.primitive(), 5u);
  EXPECT_EQ(e.type_id(), 777u);

  const trace_event i = trace_event::instant(ticks, trace_kind::queue_length, 0xFFFFFFFFu, 0xBEEF);
  EXPECT_EQ(i.kind(), trace_kind::queue_length);
  EXPECT_EQ(i.value(), 0xFFFFFFFFu);
  EXPECT_EQ(i.peer(), 0xBEEFu);
  EXPECT_EQ(i.ticks_low(), 0x123456789ABCull);
}

TEST(trace, the_type_table_gives_each_type_one_id_and_zero_when_full) {
  auto types = std::make_unique<detail::trace_types>();
  std::vector<std::uint64_t> fake(detail::trace_types::slots);  // distinct addresses
  std::map<std::uint16_t, const void*> seen;
  std::size_t named = 0;
  for (const std::uint64_t& f : fake) {
    const std::uint16_t id = types->id_of(&f);
    if (id == 0) continue;  // the table is full
    ++named;
    EXPECT_TRUE(seen.emplace(id, &f).second) << "id " << id << " given twice";
    EXPECT_EQ(types->id_of(&f), id);  // the same id again
    EXPECT_EQ(types->type(id), &f);
  }
  EXPECT_EQ(named, detail::trace_types::slots * 3 / 4);
  EXPECT_EQ(types->type(0), nullptr);
  for (const auto& [id, type] : seen) EXPECT_EQ(types->id_of(type), id);  // still found
}

// The worker's calls, without a runtime: task_begins for each task (the type's id from the
// one-entry cache or the table), an instant in a task's run, retries settled into the task that
// retried, a forwarded task marked and its span closed, close_span's span_end only after an open
// span, and the cursor going round a tiny ring.
TEST(trace, a_ring_marks_retries_and_forwarding_on_the_task_they_belong_to) {
  using detail::trace_event;
  using detail::trace_kind;
  auto b = std::make_unique<detail::trace_buffer>(16);
  int type_a = 0;  // stand-ins for two std::type_info objects
  int type_b = 0;
  int object = 0;
  const std::uint64_t on_object = trace_event::task_payload(&object, 3);
  std::uint64_t retries = 0;  // the worker's running count
  b->task_begins(&type_a, 0, retries);
  b->task_begins(&type_b, on_object, retries);
  b->record(trace_event::instant(detail::trace_clock::now(), trace_kind::group_completed, 7));
  retries += 2;  // the task on the object retried twice; the next task's start settles it
  b->task_begins(&type_a, on_object, retries);
  b->task_forwarded();  // ... and that one was passed on
  b->close_span(retries);  // no span open: no span_end
  b->task_begins(&type_b, 0, retries);
  retries += 1;
  b->close_span(retries);  // ends the span and settles its retry
  b->close_span(retries);  // nothing open any more

  ASSERT_EQ(b->kept_count(), 6u);
  EXPECT_EQ(b->recorded(), 6u);
  EXPECT_EQ(b->dropped(), 0u);
  const trace_event& first = b->kept(0);
  const trace_event& second = b->kept(1);
  const trace_event& forwarded = b->kept(3);
  const trace_event& last = b->kept(4);
  EXPECT_EQ(first.kind(), trace_kind::task);
  EXPECT_TRUE(first.timed());  // the first task after a (re)start reads the clock
  EXPECT_NE(first.type_id(), 0u);
  EXPECT_NE(second.type_id(), first.type_id());
  EXPECT_EQ(b->types().type(first.type_id()), &type_a);
  EXPECT_EQ(b->types().type(second.type_id()), &type_b);
  EXPECT_EQ(second.resource(), reinterpret_cast<std::uintptr_t>(&object) & trace_event::low_mask);
  EXPECT_EQ(second.primitive(), 3u);
  EXPECT_EQ(second.retries(), 2u);
  EXPECT_EQ(first.retries(), 0u);
  EXPECT_EQ(b->kept(2).kind(), trace_kind::group_completed);
  EXPECT_EQ(forwarded.kind(), trace_kind::forwarded);
  EXPECT_EQ(forwarded.type_id(), first.type_id());
  EXPECT_EQ(forwarded.retries(), 0u);
  EXPECT_EQ(last.kind(), trace_kind::task);
  EXPECT_EQ(last.type_id(), second.type_id());
  EXPECT_EQ(last.retries(), 1u);
  EXPECT_EQ(b->kept(5).kind(), trace_kind::span_end);

  // Round a ring of 16 a few times: the newest 16 kept, in order, the rest counted.
  for (std::uint64_t i = 0; i < 50; ++i)
    b->record(trace_event::instant(detail::trace_clock::now(), trace_kind::queue_length,
                                   static_cast<std::uint32_t>(i)));
  EXPECT_EQ(b->recorded(), 56u);
  EXPECT_EQ(b->dropped(), 40u);
  ASSERT_EQ(b->kept_count(), 16u);
  for (std::uint64_t i = 0; i < 16; ++i) EXPECT_EQ(b->kept(i).value(), 34 + i);
  std::uint32_t expected = 34;
  b->for_each([&](const trace_event& e) { EXPECT_EQ(e.value(), expected++); });
  EXPECT_EQ(expected, 50u);

  // A task whose run records more than the ring holds: its event is gone, and so is its span
  // (no mark lands on the instant that overwrote it, no span_end).
  b->task_begins(&type_a, on_object, retries);
  for (std::uint32_t i = 0; i < 16; ++i)
    b->record(trace_event::instant(detail::trace_clock::now(), trace_kind::group_completed, i));
  b->task_forwarded();
  b->close_span(retries + 1);
  ASSERT_EQ(b->kept_count(), 16u);
  b->for_each([](const trace_event& e) {
    EXPECT_EQ(e.kind(), trace_kind::group_completed);
    EXPECT_EQ(e.retries(), 0u);
  });
}

TESSERA_INSTANTIATE_WORKER_COUNTS(trace_test);

}  // namespace
}  // namespace tessera::test
