// server::settings — see config.h.
#include "config.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "resp_parser.h"

namespace server {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}

bool parse_yes_no(std::string_view s, bool& out) {
  const std::string l = lower(s);
  if (l == "yes") {
    out = true;
    return true;
  }
  if (l == "no") {
    out = false;
    return true;
  }
  return false;
}

bool parse_count(std::string_view s, std::uint64_t& out) {
  long long v = 0;
  if (!parse_integer(s, v) || v < 0) return false;
  out = static_cast<std::uint64_t>(v);
  return true;
}

/// Directives redis.conf files commonly carry that a server without persistence or replication
/// accepts and ignores.
bool ignored(std::string_view name) {
  static constexpr std::string_view names[] = {
      "daemonize", "supervised", "pidfile", "loglevel", "databases", "save", "dbfilename",
      "aof-use-rdb-preamble", "aof-rewrite-incremental-fsync", "no-appendfsync-on-rewrite",
      "aof-timestamp-enabled", "appenddirname", "io-threads", "io-threads-do-reads", "tcp-backlog",
      "tcp-keepalive", "always-show-logo", "set-proc-title", "stop-writes-on-bgsave-error",
      "rdbcompression", "rdbchecksum", "lazyfree-lazy-eviction", "maxmemory-policy",
      "unixsocket", "unixsocketperm", "hz", "dynamic-hz", "latency-tracking"};
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

bool bad_args(std::string& error, std::string_view name) {
  error = "Bad directive or wrong number of arguments: '" + std::string(name) + "'";
  return false;
}

}  // namespace

std::string_view to_string(fsync_policy p) noexcept {
  switch (p) {
    case fsync_policy::always: return "always";
    case fsync_policy::everysec: return "everysec";
    case fsync_policy::no: return "no";
  }
  return "everysec";
}

bool parse_memory(std::string_view s, std::uint64_t& out) noexcept {
  std::size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits])) != 0) ++digits;
  if (digits == 0 || digits > 18) return false;
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < digits; ++i) v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
  std::string unit;
  for (const char c : s.substr(digits)) {
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  std::uint64_t mul = 1;
  if (unit.empty() || unit == "b") {
    mul = 1;
  } else if (unit == "k") {
    mul = 1000;
  } else if (unit == "kb") {
    mul = 1024;
  } else if (unit == "m") {
    mul = 1000ULL * 1000;
  } else if (unit == "mb") {
    mul = 1024ULL * 1024;
  } else if (unit == "g") {
    mul = 1000ULL * 1000 * 1000;
  } else if (unit == "gb") {
    mul = 1024ULL * 1024 * 1024;
  } else {
    return false;
  }
  out = v * mul;
  return true;
}

bool apply_directive(settings& out, std::string_view name, const std::vector<std::string>& args,
                     std::string& error) {
  const auto one = [&](auto&& fn) {
    if (args.size() != 1) return bad_args(error, name);
    if (!fn(args[0])) {
      error = "Invalid argument '" + args[0] + "' for '" + std::string(name) + "'";
      return false;
    }
    return true;
  };
  if (name == "port") {
    return one([&](const std::string& a) {
      std::uint64_t p = 0;
      if (!parse_count(a, p) || p > 65535) return false;
      out.port = static_cast<int>(p);
      return true;
    });
  }
  if (name == "bind") {
    if (args.empty()) return bad_args(error, name);
    out.bind = args;
    return true;
  }
  if (name == "protected-mode") {
    return one([&](const std::string& a) { return parse_yes_no(a, out.protected_mode); });
  }
  if (name == "requirepass") {
    if (args.size() > 1) return bad_args(error, name);
    out.requirepass = args.empty() ? std::string() : args[0];
    return true;
  }
  if (name == "maxclients") {
    return one([&](const std::string& a) { return parse_count(a, out.maxclients); });
  }
  if (name == "maxmemory") {
    return one([&](const std::string& a) { return parse_memory(a, out.maxmemory); });
  }
  if (name == "proto-max-bulk-len") {
    return one([&](const std::string& a) {
      return parse_memory(a, out.proto_max_bulk_len) &&
             out.proto_max_bulk_len >= std::uint64_t{1024} * 1024;
    });
  }
  if (name == "timeout") {
    return one([&](const std::string& a) { return parse_count(a, out.timeout_s); });
  }
  if (name == "workers") {
    return one([&](const std::string& a) {
      std::uint64_t w = 0;
      if (!parse_count(a, w) || w > 4096) return false;
      out.workers = static_cast<unsigned>(w);
      return true;
    });
  }
  if (name == "worker-spin-us") {
    return one([&](const std::string& a) {
      std::uint64_t us = 0;
      if (!parse_count(a, us) || us > 1000000) return false;
      out.worker_spin_us = static_cast<std::int64_t>(us);
      return true;
    });
  }
  if (name == "client-output-buffer-limit") {
    // Redis's form: <class> <hard> <soft> <seconds>; the hard limit of class normal is ours.
    if (args.size() != 4) return bad_args(error, name);
    if (lower(args[0]) != "normal") return true;
    std::uint64_t hard = 0;
    if (!parse_memory(args[1], hard)) return bad_args(error, name);
    out.output_buffer_limit = hard;
    return true;
  }
  if (name == "trace") {
    if (args.size() != 1 || args[0].empty()) return bad_args(error, name);
    out.trace = args[0];
    return true;
  }
  if (name == "trace-events") {
    return one([&](const std::string& a) {
      return parse_count(a, out.trace_events) && out.trace_events >= 16 &&
             out.trace_events <= (std::uint64_t{1} << 30);
    });
  }
  if (name == "logfile") {
    if (args.size() != 1) return bad_args(error, name);
    out.logfile = args[0];
    return true;
  }
  if (name == "appendonly") {
    return one([&](const std::string& a) { return parse_yes_no(a, out.appendonly); });
  }
  if (name == "appendfsync") {
    return one([&](const std::string& a) {
      const std::string l = lower(a);
      if (l == "always") {
        out.appendfsync = fsync_policy::always;
      } else if (l == "everysec") {
        out.appendfsync = fsync_policy::everysec;
      } else if (l == "no") {
        out.appendfsync = fsync_policy::no;
      } else {
        return false;
      }
      return true;
    });
  }
  if (name == "dir") {
    return one([&](const std::string& a) {
      out.dir = a;
      return !a.empty();
    });
  }
  if (name == "appendfilename") {
    return one([&](const std::string& a) {
      out.appendfilename = a;
      return !a.empty() && a.find('/') == std::string::npos;
    });
  }
  if (name == "aof-load-truncated") {
    return one([&](const std::string& a) { return parse_yes_no(a, out.aof_load_truncated); });
  }
  if (name == "auto-aof-rewrite-percentage") {
    return one(
        [&](const std::string& a) { return parse_count(a, out.auto_aof_rewrite_percentage); });
  }
  if (name == "auto-aof-rewrite-min-size") {
    return one(
        [&](const std::string& a) { return parse_memory(a, out.auto_aof_rewrite_min_size); });
  }
  if (ignored(name)) return true;
  return bad_args(error, name);
}

config_outcome load_config(int argc, const char* const* argv, settings& out, std::string& error) {
  int i = 1;
  std::vector<std::pair<std::string, std::vector<std::string>>> lines;
  if (i < argc) {
    const std::string_view first = argv[i];
    if (first == "--help" || first == "-h") return config_outcome::help;
    if (first == "--version" || first == "-v") return config_outcome::version;
    if (first.substr(0, 2) != "--") {
      std::ifstream file{std::string(first)};
      if (!file) {
        error = "Fatal error, can't open config file '" + std::string(first) + "'";
        return config_outcome::error;
      }
      std::string line;
      int number = 0;
      while (std::getline(file, line)) {
        ++number;
        std::deque<std::string> owned;
        std::vector<std::string_view> words;
        if (!split_inline_args(line, owned, words)) {
          error = "config line " + std::to_string(number) + ": unbalanced quotes";
          return config_outcome::error;
        }
        if (words.empty() || words[0].front() == '#') continue;
        std::vector<std::string> args(words.begin() + 1, words.end());
        lines.emplace_back(lower(words[0]), std::move(args));
      }
      ++i;
    }
  }
  for (; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") return config_outcome::help;
    if (a == "--version" || a == "-v") return config_outcome::version;
    if (a.substr(0, 2) != "--" || a.size() == 2) {
      error = "unexpected argument '" + std::string(a) + "' (flags are --directive value...)";
      return config_outcome::error;
    }
    std::vector<std::string> args;
    while (i + 1 < argc && std::string_view(argv[i + 1]).substr(0, 2) != "--") {
      args.emplace_back(argv[++i]);
    }
    lines.emplace_back(lower(a.substr(2)), std::move(args));
  }
  for (const auto& [name, args] : lines) {
    if (!apply_directive(out, name, args, error)) return config_outcome::error;
  }
  return config_outcome::ok;
}

std::string usage_text() {
  return "Usage: tessera-kv-server [/path/to/redis.conf] [--directive value ...]\n"
         "       tessera-kv-server --help | --version\n"
         "\n"
         "A Redis-protocol (RESP2/RESP3) key-value server on the tessera task runtime.\n"
         "Directives (in the config file, or as --flags that override it):\n"
         "  port <n>                     TCP port (default 6379)\n"
         "  bind <addr> [addr ...]       addresses to listen on (default 127.0.0.1)\n"
         "  protected-mode yes|no        refuse non-loopback binds without requirepass (yes)\n"
         "  requirepass <password>       clients must AUTH first\n"
         "  maxclients <n>               connections at most (default 10000)\n"
         "  maxmemory <bytes>            writes answer -OOM above it (0: no limit; 1gb, 100mb)\n"
         "  proto-max-bulk-len <bytes>   longest bulk string in a request (default 512mb)\n"
         "  timeout <seconds>            close clients idle this long (0: never)\n"
         "  client-output-buffer-limit normal <hard> <soft> <secs>\n"
         "                               a client's pending replies at most <hard> (256mb)\n"
         "  workers <n>                  tessera workers (default: one per CPU)\n"
         "  worker-spin-us <us>          an idle worker looks for work this long, then parks\n"
         "                               (default: the runtime's 200; 0 when the process\n"
         "                               may run on one CPU only)\n"
         "  logfile <path>               log here instead of stdout\n"
         "  trace <file.json>            write a timeline of the workers' tasks (Perfetto) when\n"
         "                               the server stops; same as TESSERA_TRACE=<file.json>\n"
         "  trace-events <n>             the last n events per worker are kept (default 32768)\n"
         "  appendonly yes|no            keep an append-only log of the writes, replayed at start\n"
         "  appendfsync always|everysec|no\n"
         "                               always: a write's reply waits for fdatasync; everysec:\n"
         "                               for write(), fdatasync once a second (default); no: none\n"
         "  dir <path>                   the log's directory (default .; created if missing)\n"
         "  appendfilename <name>        the log's file name (default appendonly.aof)\n"
         "  aof-load-truncated yes|no    cut a truncated last record off at start (yes), or stop\n"
         "  auto-aof-rewrite-percentage <n>  rewrite when the log grew n% over its last rewrite\n"
         "  auto-aof-rewrite-min-size <bytes> ... and is at least this big (default 64mb)\n"
         "\n"
         "Example: tessera-kv-server --port 6380 --workers 2\n"
         "         tessera-kv-server --appendonly yes --appendfsync always --dir /var/lib/kv\n"
         "         redis-cli -p 6380 set greeting hello\n";
}

}  // namespace server
