// src/trace/trace_session.h — a runtime's trace: one ring per worker, written out at stop().
//
// The scheduler makes a session when tracing is on (runtime_options::trace, or TESSERA_TRACE),
// hands worker i the ring buffer(i) before the worker starts, and calls finish() after it joined
// every worker (which orders the workers' plain stores into their rings before the reads here).
// finish() formats the events as Chrome trace-event JSON (tessera/trace.h has the shape) and
// rewrites the file with the events of every runtime of this process that traced into it.
//
//   auto s = trace_session::from_options(options.trace, workers);   // nullptr: tracing off
//   worker.attach_trace(&s->buffer(i));
//   …join the workers…
//   s->finish(cpus);
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/trace.h"
#include "trace/trace_buffer.h"

namespace tessera::detail {

class trace_session {
 public:
  /// The session `options` (or, with no file named there, the environment's TESSERA_TRACE)
  /// asks for, or nullptr when tracing is off.
  static std::unique_ptr<trace_session> from_options(const trace_options& options,
                                                     unsigned workers);
  trace_session(std::string file, std::size_t events_per_worker, unsigned workers,
                bool time_every_task = false);

  trace_buffer& buffer(unsigned worker) noexcept { return *m_buffers[worker]; }
  const std::string& file() const noexcept { return m_file; }

  /// After the workers were joined: writes the file (with the events of this process's other
  /// runtimes that traced into it before). `cpus[i]`: worker i's CPU. A file that cannot be
  /// written is said on stderr; the runtime goes on. Once per session; later calls do nothing.
  void finish(const std::vector<unsigned>& cpus) noexcept;

 private:
  std::string m_file;
  std::vector<std::unique_ptr<trace_buffer>> m_buffers;
  std::uint64_t m_ticks0;
  std::chrono::steady_clock::time_point m_steady0;
  bool m_finished = false;
};

}  // namespace tessera::detail
