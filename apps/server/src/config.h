#pragma once
// server::settings — tessera-kv-server's configuration, read as redis-server reads its own: a
// config file in Redis's format (one `directive arg...` a line, # comments, "quoted" args) as
// the first argument, then `--directive arg...` flags that override it (redis-server turns its
// flags into config lines the same way). Units as Redis's: 1k = 1000, 1kb = 1024, mb, gb.
//
//   server::settings s;
//   server::config_outcome o = server::load_config(argc, argv, s, error);
//   // o == config_outcome::ok: s.port, s.bind, ...; help: print usage_text(); error: `error`

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace server {

/// When the append-only log's writes are on disk before a write's reply goes out (aof.h).
enum class fsync_policy : std::uint8_t {
  always,    ///< fdatasync'ed: survives a power loss
  everysec,  ///< written to the file (survives the process), fdatasync'ed once a second
  no,        ///< handed to the log at once, written shortly after; the kernel flushes it
};

std::string_view to_string(fsync_policy p) noexcept;

struct settings {
  int port = 6379;
  std::vector<std::string> bind{"127.0.0.1"};
  bool protected_mode = true;
  std::string requirepass;
  std::uint64_t maxclients = 10000;
  std::uint64_t maxmemory = 0;                          ///< bytes; 0: no limit
  std::uint64_t proto_max_bulk_len = 512ULL << 20;      ///< 512 MiB
  std::uint64_t timeout_s = 0;                          ///< idle clients closed; 0: never
  std::uint64_t output_buffer_limit = 256ULL << 20;     ///< per client, then disconnect
  unsigned workers = 0;                                 ///< 0: one per CPU
  /// How long an idle worker looks for work before it parks (runtime_options::spin_before_park);
  /// -1: the runtime's default.
  std::int64_t worker_spin_us = -1;
  std::string logfile;                                  ///< "" : stdout
  std::string trace;                                    ///< timeline file (tessera/trace.h); "": off
  std::uint64_t trace_events = 0;                       ///< per worker's ring; 0: the runtime's default
  // The append-only log (aof.h), in Redis's spellings.
  bool appendonly = false;
  fsync_policy appendfsync = fsync_policy::everysec;
  std::string dir = ".";                                ///< where the log lives
  std::string appendfilename = "appendonly.aof";
  bool aof_load_truncated = true;                       ///< cut a truncated last record off
  std::uint64_t auto_aof_rewrite_percentage = 100;      ///< growth over the last rewrite; 0: off
  std::uint64_t auto_aof_rewrite_min_size = 64ULL << 20;
};

enum class config_outcome : std::uint8_t { ok, help, version, error };

/// Reads argv as redis-server does (config file first, then --flags).
config_outcome load_config(int argc, const char* const* argv, settings& out, std::string& error);

/// Applies one directive (name lower-case, without dashes) to `out`. Outcome: false with a
/// message in `error` for an unknown directive or a bad value.
bool apply_directive(settings& out, std::string_view name, const std::vector<std::string>& args,
                     std::string& error);

/// Redis's memtoll: "100", "1k" (1000), "1kb" (1024), "mb", "gb". Outcome: false if malformed.
bool parse_memory(std::string_view s, std::uint64_t& out) noexcept;

std::string usage_text();

}  // namespace server
