#include "trace/trace_session.h"

#include <cxxabi.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <algorithm>
#include <map>
#include <mutex>
#include <string_view>
#include <typeinfo>

#include "tessera/resource.h"

namespace tessera::detail {
namespace {

/// The events of every runtime of this process that traced into a file, formatted, in the order
/// the runtimes stopped. The file is rewritten whole from here at each stop, so that it is valid
/// JSON after every one of them.
struct trace_file_contents {
  std::vector<std::string> runtimes;  // each: comma-separated events, no brackets
  std::uint64_t recorded = 0;
  std::uint64_t dropped = 0;
};

struct trace_files {
  std::mutex mutex;
  std::map<std::string, trace_file_contents> files;
  /// The steady clock's reading when the first session of the process began: ts 0 in every file.
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
};

trace_files& files() {
  // Never destroyed: a runtime held in a static object may stop after exit began.
  static trace_files* const f = new trace_files;
  return *f;
}

void append_escaped(std::string& out, std::string_view s) {
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char u[8];
      std::snprintf(u, sizeof u, "\\u%04x", static_cast<unsigned>(c));
      out += u;
    } else {
      out += c;
    }
  }
}

std::string demangled(const void* type) {
  if (type == nullptr) return "task";
  const char* mangled = static_cast<const std::type_info*>(type)->name();
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = (status == 0 && d != nullptr) ? d : mangled;
  std::free(d);  // NOLINT(cppcoreguidelines-no-malloc): __cxa_demangle's buffer
  return out;
}

/// "12.345" from 12345 ns: microseconds with nanosecond digits, exact.
void append_us(std::string& out, std::uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
  out += text;
}

std::string_view primitive_name(std::uint8_t p) noexcept {
  return to_string(static_cast<primitive>(p));
}

}  // namespace

std::unique_ptr<trace_session> trace_session::from_options(const trace_options& options,
                                                           unsigned workers) {
  std::string file = options.file;
  if (file.empty()) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read once per runtime, nobody here sets it
    if (const char* env = std::getenv("TESSERA_TRACE"); env != nullptr) file = env;
  }
  if (file.empty()) return nullptr;
  std::size_t events = options.events_per_worker;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read once per runtime, nobody here sets it
  if (const char* env = std::getenv("TESSERA_TRACE_EVENTS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(env, &end, 10);
    if (*end == '\0' && n > 0 && n <= (std::size_t{1} << 32)) {
      events = static_cast<std::size_t>(n);
    } else {
      std::fprintf(stderr, "tessera: trace: TESSERA_TRACE_EVENTS='%s' ignored (events per "
                   "worker, 1 to 2^32)\n", env);
    }
  }
  bool every_task = options.time_every_task;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read once per runtime, nobody here sets it
  if (const char* env = std::getenv("TESSERA_TRACE_TIME_EVERY_TASK"); env != nullptr)
    every_task = every_task || std::strcmp(env, "1") == 0;
  return std::make_unique<trace_session>(std::move(file), events, workers, every_task);
}

trace_session::trace_session(std::string file, std::size_t events_per_worker, unsigned workers,
                             bool time_every_task)
    : m_file(std::move(file)) {
  (void)files();  // fixes the origin no later than the first session
  for (unsigned i = 0; i < workers; ++i)
    m_buffers.push_back(std::make_unique<trace_buffer>(events_per_worker, time_every_task));
  m_steady0 = std::chrono::steady_clock::now();
  m_ticks0 = trace_clock::now();
}

void trace_session::finish(const std::vector<unsigned>& cpus) noexcept {
  if (m_finished) return;
  m_finished = true;
  try {
    const std::uint64_t ticks1 = trace_clock::now();
    const auto steady1 = std::chrono::steady_clock::now();
    trace_files& all = files();
    const std::scoped_lock hold(all.mutex);
    trace_file_contents& contents = all.files[m_file];
    const unsigned pid = static_cast<unsigned>(contents.runtimes.size()) + 1;
    const auto ns_between = [](auto a, auto b) {
      return static_cast<double>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
    };
    const double offset_ns = ns_between(all.origin, m_steady0);
    const double rate = ticks1 > m_ticks0 ? ns_between(m_steady0, steady1) /
                                                static_cast<double>(ticks1 - m_ticks0)
                                          : 1.0;
    // Monotone in the ticks: spans stay ordered and apart after the conversion.
    const auto to_ns = [&](std::uint64_t ticks) -> std::uint64_t {
      const double since = ticks >= m_ticks0
                               ? static_cast<double>(ticks - m_ticks0)
                               : -static_cast<double>(m_ticks0 - ticks);
      const double ns = offset_ns + since * rate;
      return ns <= 0 ? 0 : static_cast<std::uint64_t>(ns);
    };
    // Events keep 48 bits of ticks: walking from the newest back, each is the latest time at
    // or before the one after it (at or before now, for the newest) with those bits. The
    // slack covers a TSC a little ahead on another CPU; min() keeps a worker's times ordered.
    // Untimed tasks (trace_clock_sampler) are then spaced evenly between the timed events
    // around them.
    constexpr std::uint64_t slack = std::uint64_t{1} << 32;
    constexpr std::uint64_t none = ~std::uint64_t{0};
    std::vector<std::uint64_t> ticks;  // per kept event of one worker
    std::vector<std::uint64_t> ends;   // task events: where their span ends
    const auto restore = [&](const trace_buffer& b) {
      const std::uint64_t n = b.kept_count();
      ticks.assign(n, none);
      ends.assign(n, 0);
      std::uint64_t after = ticks1;
      for (std::uint64_t i = n; i-- > 0;) {
        const trace_event& e = b.kept(i);
        if (!e.timed()) continue;
        const std::uint64_t bound = after + slack;
        after = std::min(bound - ((bound - e.ticks_low()) & trace_event::low_mask), after);
        ticks[i] = after;
      }
      std::uint64_t before = none;  // the last timed event's index
      for (std::uint64_t i = 0; i < n; ++i) {
        if (ticks[i] == none) continue;
        if (before == none) {
          for (std::uint64_t j = 0; j < i; ++j) ticks[j] = ticks[i];  // the oldest: untimed
        } else if (i > before + 1) {
          const double step = static_cast<double>(ticks[i] - ticks[before]) /
                              static_cast<double>(i - before);
          for (std::uint64_t j = before + 1; j < i; ++j)
            ticks[j] = ticks[before] +
                       static_cast<std::uint64_t>(step * static_cast<double>(j - before));
        }
        before = i;
      }
      for (std::uint64_t j = before == none ? 0 : before + 1; j < n; ++j)
        ticks[j] = before == none ? ticks1 : ticks[before];
      std::uint64_t boundary = none;  // the next span boundary's ticks, if any
      for (std::uint64_t i = n; i-- > 0;) {
        const trace_kind k = b.kept(i).kind();
        if (k == trace_kind::task) ends[i] = boundary == none ? ticks[i] : boundary;
        if (k == trace_kind::task || k == trace_kind::forwarded || k == trace_kind::span_end)
          boundary = ticks[i];
      }
    };
    std::map<const void*, std::string> names;
    std::string out;
    char text[256];
    std::snprintf(text, sizeof text,
                  "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,"
                  "\"args\":{\"name\":\"tessera runtime %u (%zu workers)\"}}",
                  pid, pid, m_buffers.size());
    out += text;
    for (unsigned w = 0; w < m_buffers.size(); ++w) {
      const trace_buffer& b = *m_buffers[w];
      contents.recorded += b.recorded();
      contents.dropped += b.dropped();
      std::snprintf(text, sizeof text,
                    ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":"
                    "{\"name\":\"worker %u (cpu %u)\",\"recorded\":%" PRIu64
                    ",\"dropped\":%" PRIu64 "}}",
                    pid, w, w, w < cpus.size() ? cpus[w] : 0u, b.recorded(), b.dropped());
      out += text;
      std::snprintf(text, sizeof text,
                    ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%u,\"tid\":%u,"
                    "\"args\":{\"sort_index\":%u}}",
                    pid, w, w);
      out += text;
      restore(b);
      for (std::uint64_t i = 0; i < b.kept_count(); ++i) {
        const trace_event& e = b.kept(i);
        const std::uint64_t ts = to_ns(ticks[i]);
        const auto instant = [&](const char* cat, const char* name) {
          std::snprintf(text, sizeof text,
                        ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":%u,"
                        "\"tid\":%u,\"ts\":",
                        cat, name, pid, w);
          out += text;
          append_us(out, ts);
        };
        switch (e.kind()) {
          case trace_kind::task: {
            const void* type = b.types().type(e.type_id());
            auto it = names.find(type);
            if (it == names.end()) it = names.emplace(type, demangled(type)).first;
            out += ",\n{\"ph\":\"X\",\"cat\":\"task\",\"name\":\"";
            append_escaped(out, it->second);
            std::snprintf(text, sizeof text, "\",\"pid\":%u,\"tid\":%u,\"ts\":", pid, w);
            out += text;
            append_us(out, ts);
            out += ",\"dur\":";
            const std::uint64_t end = to_ns(ends[i]);
            append_us(out, end > ts ? end - ts : 0);
            if (e.resource() != 0) {
              const std::string_view prim = primitive_name(e.primitive());
              std::snprintf(text, sizeof text,
                            ",\"args\":{\"resource\":\"0x%" PRIx64 "\",\"primitive\":\"%.*s\","
                            "\"retries\":%u,\"timed\":%s}}",
                            e.resource(), static_cast<int>(prim.size()), prim.data(),
                            static_cast<unsigned>(e.retries()), e.timed() ? "true" : "false");
              out += text;
            } else {
              out += e.timed() ? ",\"args\":{\"resource\":null,\"primitive\":\"none\","
                                 "\"retries\":0,\"timed\":true}}"
                               : ",\"args\":{\"resource\":null,\"primitive\":\"none\","
                                 "\"retries\":0,\"timed\":false}}";
            }
            break;
          }
          case trace_kind::forwarded:
            instant("task", "forwarded to its resource's pool");
            out += "}";
            break;
          case trace_kind::span_end:  // the end of the span before it; no event of its own
            break;
          case trace_kind::pool_handed:
          case trace_kind::tasks_stolen:
            instant("steal",
                    e.kind() == trace_kind::pool_handed ? "pool handed over" : "tasks stolen");
            std::snprintf(text, sizeof text, ",\"args\":{\"from\":%u,\"to\":%u,\"count\":%u}}",
                          w, static_cast<unsigned>(e.peer()), e.value());
            out += text;
            break;
          case trace_kind::park:
            instant("idle", "park");
            out += "}";
            break;
          case trace_kind::wake:
            instant("idle", "wake");
            out += e.value() != 0 ? ",\"args\":{\"timed_out\":true}}"
                                : ",\"args\":{\"timed_out\":false}}";
            break;
          case trace_kind::epoch_advanced:
            instant("epoch", "epoch advanced");
            std::snprintf(text, sizeof text, ",\"args\":{\"epoch\":%u}}", e.value());
            out += text;
            break;
          case trace_kind::group_completed:
            instant("group", "group completed");
            std::snprintf(text, sizeof text, ",\"args\":{\"group\":%u}}", e.value());
            out += text;
            break;
          case trace_kind::queue_length:
            std::snprintf(text, sizeof text,
                          ",\n{\"ph\":\"C\",\"name\":\"queue w%u\",\"pid\":%u,\"tid\":%u,"
                          "\"ts\":",
                          w, pid, w);
            out += text;
            append_us(out, ts);
            std::snprintf(text, sizeof text, ",\"args\":{\"queued\":%u,\"window\":%u}}",
                          e.value(), static_cast<unsigned>(e.peer()));
            out += text;
            break;
        }
      }
    }
    contents.runtimes.push_back(std::move(out));

    const std::string temporary = m_file + ".tmp";
    std::FILE* f = std::fopen(temporary.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "tessera: trace: cannot write '%s': %s\n", temporary.c_str(),
                   std::strerror(errno));  // NOLINT(concurrency-mt-unsafe)
      return;
    }
    std::fputs("{\"traceEvents\":[\n", f);
    for (std::size_t i = 0; i < contents.runtimes.size(); ++i) {
      if (i > 0) std::fputs(",\n", f);
      std::fwrite(contents.runtimes[i].data(), 1, contents.runtimes[i].size(), f);
    }
    std::fprintf(f,
                 "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"tessera_trace\":1,"
                 "\"runtimes\":%zu,\"recorded_events\":%" PRIu64 ",\"dropped_events\":%" PRIu64
                 "}}\n",
                 contents.runtimes.size(), contents.recorded, contents.dropped);
    const bool ok = std::ferror(f) == 0;
    if (std::fclose(f) != 0 || !ok || std::rename(temporary.c_str(), m_file.c_str()) != 0) {
      std::fprintf(stderr, "tessera: trace: cannot write '%s': %s\n", m_file.c_str(),
                   std::strerror(errno));  // NOLINT(concurrency-mt-unsafe)
      std::remove(temporary.c_str());
    }
  } catch (const std::exception& e) {  // out of memory formatting: the runtime goes on
    std::fprintf(stderr, "tessera: trace: not written: %s\n", e.what());
  }
}

}  // namespace tessera::detail
