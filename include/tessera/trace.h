// tessera/trace.h — a timeline of what each worker did, for Perfetto (ui.perfetto.dev) and
// chrome://tracing.
//
// With tracing on, every worker records 16-byte events (clock ticks and ids, nothing formatted)
// into its own bounded ring buffer (no lock, no allocation while tasks run; when the ring is
// full the oldest events are overwritten and counted as dropped). When the runtime stops, the
// rings are written as Chrome trace-event JSON, names resolved then:
//
//   {"traceEvents": [
//     {"ph":"M","name":"process_name","pid":1,"args":{"name":"tessera runtime 1 (2 workers)"}},
//     {"ph":"M","name":"thread_name","pid":1,"tid":0,"args":{"name":"worker 0 (cpu 0)",
//      "recorded":N,"dropped":D}},
//     {"ph":"X","cat":"task","name":"<task type>","pid":1,"tid":0,"ts":12.345,"dur":0.250,
//      "args":{"resource":"0x…","primitive":"optimistic_latch","retries":0,"timed":true}},
//     {"ph":"i","s":"t","cat":"steal","name":"tasks stolen","pid":1,"tid":0,"ts":…,
//      "args":{"from":0,"to":1,"count":7}},                 // also "pool handed over"
//     {"ph":"i","s":"t","cat":"idle","name":"park"|"wake",…},
//     {"ph":"i","s":"t","cat":"epoch","name":"epoch advanced","args":{"epoch":E},…},
//     {"ph":"i","s":"t","cat":"group","name":"group completed","args":{"group":G},…},
//     {"ph":"C","name":"queue w0","pid":1,"tid":0,"ts":…,"args":{"queued":Q,"window":W}}],
//    "displayTimeUnit":"ns",
//    "otherData":{"tessera_trace":1,"runtimes":R,"recorded_events":N,"dropped_events":D}}
//
// One process ("pid") per runtime the program made, one thread track ("tid") per worker; "ts"
// and "dur" in microseconds with nanosecond digits, from one clock for all workers. A task span
// is named after the task's type (demangled typeid; a lambda's is its function_task<…>). While
// a worker's tasks are short, it reads the clock only every few tasks and spaces the spans in
// between evenly ("timed":false; trace_options::time_every_task turns this off).
// Every runtime of the process that traces into the same file is kept: the file is rewritten
// whole, and valid, each time one of them stops (also when its tasks threw or were cancelled).
//
//   tessera::runtime rt({.workers = 2, .trace = {.file = "run.json"}});
//   …                                   // or, for any program: TESSERA_TRACE=run.json ./prog
//   rt.stop();                          // run.json is written here
#pragma once

#include <cstddef>
#include <string>

namespace tessera {

struct trace_options {
  /// Where the trace goes; empty: no tracing, unless the environment variable TESSERA_TRACE
  /// names a file (read when the runtime is made).
  std::string file{};
  /// Events each worker's ring keeps (rounded up to a power of two, at least 16): a task span
  /// is one event, 16 bytes. The environment variable TESSERA_TRACE_EVENTS overrides it.
  std::size_t events_per_worker = 32768;
  /// Read the clock at every task's start. Otherwise (the default) a worker whose tasks are
  /// short reads it every 2nd to 64th task, keeping reads about 4,096 clock ticks (1-2 us) or
  /// more apart, and the spans in between are evenly spaced ("timed":false in their args): the
  /// cost of a clock read (10-20 ns on AMD Zen) is then under 1 % of such tasks instead of a
  /// tenth to a fifth.
  /// TESSERA_TRACE_TIME_EVERY_TASK=1 in the environment sets it.
  bool time_every_task = false;
};

}  // namespace tessera
