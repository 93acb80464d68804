// The connection and server commands (PING ... SHUTDOWN), dispatch() and finalize().
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <unordered_map>

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim
#endif

#include "byte_word.h"
#include "command_table.h"
#include "commands.h"
#include "glob.h"
#include "kv_server.h"

namespace server {

void call::arity_error() {
  error("ERR wrong number of arguments for '" + std::string(spec->name) + "' command");
}

namespace {

constexpr std::string_view server_version = "7.0.0";

/// The process's resident set now (/proc/self/statm), 0 where it cannot be read.
std::uint64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0;
  unsigned long long resident = 0;
  const int got = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (got != 2) return 0;
  const long page = ::sysconf(_SC_PAGESIZE);
  return resident * static_cast<std::uint64_t>(page > 0 ? page : 4096);
}

/// Bytes as Redis's INFO writes them for its *_human fields: 1023B, 1.50K, 12.25M, 2.00G.
std::string human_bytes(std::uint64_t bytes) {
  static constexpr std::array<char, 5> units = {'B', 'K', 'M', 'G', 'T'};
  double v = static_cast<double>(bytes);
  std::size_t u = 0;
  while (v >= 1024 && u + 1 < units.size()) {
    v /= 1024;
    ++u;
  }
  char out[32];
  if (u == 0) {
    std::snprintf(out, sizeof out, "%lluB", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(out, sizeof out, "%.2f%c", v, units[u]);
  }
  return out;
}

void cmd_ping(call& k) {
  if (k.args.size() > 2) return k.arity_error();
  if (k.args.size() == 2) {
    k.reply().bulk(k.args[1]);
  } else {
    k.reply().simple("PONG");
  }
}

void cmd_echo(call& k) { k.reply().bulk(k.args[1]); }

/// TIME: the Unix time as seconds and microseconds, two bulk strings.
void cmd_time(call& k) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  reply_writer w = k.reply();
  w.array(2);
  w.bulk(std::to_string(us / 1'000'000));
  w.bulk(std::to_string(us % 1'000'000));
}

void cmd_quit(call& k) {
  k.reply().ok();
  k.conn->close_after_reply = true;
}

void cmd_select(call& k) {
  long long db = 0;
  if (!parse_integer(k.args[1], db)) return k.error(err_not_integer);
  if (db != 0) return k.error("ERR DB index is out of range");
  k.reply().ok();
}

bool check_password(call& k, std::string_view user, std::string_view pass) {
  std::string want;
  {
    const std::lock_guard<std::mutex> lock(k.srv->config_mutex());
    want = k.srv->config().requirepass;
  }
  if (user != "default" || pass != want) {
    k.error("WRONGPASS invalid username-password pair or user is disabled.");
    return false;
  }
  k.conn->authenticated = true;
  return true;
}

void cmd_auth(call& k) {
  if (k.args.size() > 3) return k.error(err_syntax);
  bool configured = false;
  {
    const std::lock_guard<std::mutex> lock(k.srv->config_mutex());
    configured = !k.srv->config().requirepass.empty();
  }
  if (!configured && k.args.size() == 2) {
    return k.error(
        "ERR AUTH <password> called without any password configured for the default user. "
        "Are you sure your configuration is correct?");
  }
  const std::string_view user = k.args.size() == 3 ? k.args[1] : "default";
  if (check_password(k, user, k.args.back())) k.reply().ok();
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]
void cmd_hello(call& k) {
  protocol proto = k.conn->proto;
  std::size_t i = 1;
  if (k.args.size() >= 2) {
    long long v = 0;
    if (!parse_integer(k.args[1], v)) {
      return k.error("ERR Protocol version is not an integer or out of range");
    }
    if (v != 2 && v != 3) return k.error("NOPROTO unsupported protocol version");
    proto = v == 3 ? protocol::resp3 : protocol::resp2;
    i = 2;
  }
  std::string name;
  bool set_name = false;
  for (; i < k.args.size(); ++i) {
    const std::string opt = upper(k.args[i]);
    if (opt == "AUTH" && i + 2 < k.args.size()) {
      if (!check_password(k, k.args[i + 1], k.args[i + 2])) return;
      i += 2;
    } else if (opt == "SETNAME" && i + 1 < k.args.size()) {
      name = std::string(k.args[++i]);
      set_name = true;
    } else {
      return k.error("ERR Syntax error in HELLO option '" + std::string(k.args[i]) + "'");
    }
  }
  bool need_auth = false;
  {
    const std::lock_guard<std::mutex> lock(k.srv->config_mutex());
    need_auth = !k.srv->config().requirepass.empty();
  }
  if (need_auth && !k.conn->authenticated) {
    return k.error("NOAUTH HELLO must be called with the client already authenticated, "
                   "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
                   "authenticate the client and select the RESP protocol version at the same "
                   "time");
  }
  if (set_name) k.srv->set_client_name(*k.conn, name);
  k.conn->proto = proto;
  reply_writer w = k.reply();
  w.map(7);
  w.bulk("server");
  w.bulk("redis");
  w.bulk("version");
  w.bulk(server_version);
  w.bulk("proto");
  w.integer(static_cast<long long>(proto));
  w.bulk("id");
  w.integer(static_cast<long long>(k.conn->id));
  w.bulk("mode");
  w.bulk("standalone");
  w.bulk("role");
  w.bulk("master");
  w.bulk("modules");
  w.array(0);
}

// ---- COMMAND --------------------------------------------------------------------------------

std::vector<const command_spec*> all_specs() {
  std::vector<const command_spec*> r;
  for (const auto& s : key_commands()) r.push_back(&s);
  for (const auto& s : server_commands()) r.push_back(&s);
  for (const auto& s : transaction_commands()) r.push_back(&s);
  return r;
}

/// ASCII case-insensitive equality of `name` with a lower-case command name.
bool equal_nocase(std::string_view name, std::string_view lower_name) noexcept {
  for (std::size_t i = 0; i < name.size(); ++i) {
    char ch = name[i];
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    if (ch != lower_name[i]) return false;
  }
  return true;
}

const command_spec* find_spec(std::string_view name) {
  // The commands by the length of their name (a handful each), compared without a copy.
  static constexpr std::size_t longest = 32;
  static const auto index = [] {
    std::array<std::vector<const command_spec*>, longest + 1> by_size;
    for (const command_spec* s : all_specs()) {
      if (s->name.size() <= longest) by_size[s->name.size()].push_back(s);
    }
    return by_size;
  }();
  if (name.size() > longest) return nullptr;
  for (const command_spec* s : index[name.size()]) {
    if (equal_nocase(name, s->name)) return s;
  }
  return nullptr;
}

void write_info(reply_writer& w, const command_spec& s) {
  w.array(10);
  w.bulk(s.name);
  w.integer(s.arity);
  std::vector<std::string_view> flags;
  if ((s.flags & cmd_write) != 0) flags.emplace_back("write");
  if ((s.flags & cmd_readonly) != 0) flags.emplace_back("readonly");
  if ((s.flags & cmd_denyoom) != 0) flags.emplace_back("denyoom");
  if ((s.flags & cmd_fast) != 0) flags.emplace_back("fast");
  if ((s.flags & cmd_no_auth) != 0) flags.emplace_back("no_auth");
  w.set(flags.size());
  for (const auto f : flags) w.simple(f);
  w.integer(s.first_key);
  w.integer(s.last_key);
  w.integer(s.step);
  w.set(0);    // ACL categories
  w.set(0);    // tips
  w.array(0);  // key specs
  w.array(0);  // subcommands
}

std::string_view group_of(const command_spec& s) {
  if (s.first_key != 0) return "string";
  if ((s.flags & cmd_whole_store) != 0) return "generic";
  return "server";
}

void cmd_command(call& k) {
  reply_writer w = k.reply();
  if (k.args.size() == 1) {
    const auto specs = all_specs();
    w.array(specs.size());
    for (const command_spec* s : specs) write_info(w, *s);
    return;
  }
  const std::string sub = upper(k.args[1]);
  if (sub == "COUNT" && k.args.size() == 2) {
    w.integer(static_cast<long long>(command_count()));
  } else if (sub == "INFO") {
    if (k.args.size() == 2) {
      const auto specs = all_specs();
      w.array(specs.size());
      for (const command_spec* s : specs) write_info(w, *s);
      return;
    }
    w.array(k.args.size() - 2);
    for (std::size_t i = 2; i < k.args.size(); ++i) {
      if (const command_spec* s = find_spec(k.args[i])) {
        write_info(w, *s);
      } else {
        w.null_array();
      }
    }
  } else if (sub == "DOCS") {
    std::vector<const command_spec*> specs;
    if (k.args.size() == 2) {
      specs = all_specs();
    } else {
      for (std::size_t i = 2; i < k.args.size(); ++i) {
        if (const command_spec* s = find_spec(k.args[i])) specs.push_back(s);
      }
    }
    w.map(specs.size());
    for (const command_spec* s : specs) {
      w.bulk(s->name);
      w.map(3);
      w.bulk("summary");
      w.bulk(std::string("The ") + upper(s->name) + " command");
      w.bulk("since");
      w.bulk("1.0.0");
      w.bulk("group");
      w.bulk(group_of(*s));
    }
  } else if (sub == "LIST" && k.args.size() == 2) {
    const auto specs = all_specs();
    w.array(specs.size());
    for (const command_spec* s : specs) w.bulk(s->name);
  } else {
    k.error("ERR unknown subcommand '" + std::string(k.args[1]) + "'. Try COMMAND HELP.");
  }
}

// ---- CLIENT ---------------------------------------------------------------------------------

/// CLIENT KILL ip:port, or CLIENT KILL [ID id] [ADDR ip:port] [LADDR ip:port] [TYPE type]
/// [USER name] [SKIPME yes|no], as Redis 7.0 parses and answers them.
void client_kill(call& k) {
  kv_server::kill_filter f;
  bool skipme = true;
  const bool old_form = k.args.size() == 3;
  if (old_form) {
    f.addr = std::string(k.args[2]);
    skipme = false;
  } else {
    if (k.args.size() % 2 != 0) return k.error(err_syntax);
    for (std::size_t i = 2; i + 1 < k.args.size(); i += 2) {
      const std::string opt = upper(k.args[i]);
      const std::string_view v = k.args[i + 1];
      if (opt == "ID") {
        long long id = 0;
        if (!parse_integer(v, id) || id < 1) {
          return k.error("ERR client-id should be greater than 0");
        }
        f.id = static_cast<std::uint64_t>(id);
      } else if (opt == "TYPE") {
        const std::string type = lower(v);
        if (type != "normal" && type != "master" && type != "slave" && type != "replica" &&
            type != "pubsub") {
          return k.error("ERR Unknown client type '" + std::string(v) + "'");
        }
        f.none = f.none || type != "normal";  // every client here is a normal one
      } else if (opt == "ADDR") {
        f.addr = std::string(v);
      } else if (opt == "LADDR") {
        f.laddr = std::string(v);
      } else if (opt == "USER") {
        if (v != "default") return k.error("ERR No such user '" + std::string(v) + "'");
      } else if (opt == "SKIPME") {
        const std::string yn = lower(v);
        if (yn != "yes" && yn != "no") return k.error(err_syntax);
        skipme = yn == "yes";
      } else {
        return k.error(err_syntax);
      }
    }
  }
  bool self = false;
  const std::size_t n = k.srv->kill_clients(f, *k.conn, skipme, self);
  if (old_form) {
    if (n == 0) return k.error("ERR No such client");
    k.reply().ok();
  } else {
    k.reply().integer(static_cast<long long>(n));
  }
  if (self) k.conn->close_after_reply = true;
}

void cmd_client(call& k) {
  const std::string sub = upper(k.args[1]);
  reply_writer w = k.reply();
  if (sub == "ID" && k.args.size() == 2) {
    w.integer(static_cast<long long>(k.conn->id));
  } else if (sub == "GETNAME" && k.args.size() == 2) {
    const std::string name = k.srv->client_name(*k.conn);
    if (name.empty()) {
      w.null();
    } else {
      w.bulk(name);
    }
  } else if (sub == "SETNAME" && k.args.size() == 3) {
    for (const char ch : k.args[2]) {
      if (ch < '!' || ch > '~') {
        return k.error("ERR Client names cannot contain spaces, newlines or special characters.");
      }
    }
    k.srv->set_client_name(*k.conn, std::string(k.args[2]));
    w.ok();
  } else if (sub == "LIST") {
    w.verbatim(k.srv->client_list());
  } else if (sub == "KILL" && k.args.size() >= 3) {
    client_kill(k);
  } else if (sub == "HELP" && k.args.size() == 2) {
    static constexpr std::string_view lines[] = {
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ID", "    Return the ID of the current connection.",
        "GETNAME", "    Return the name of the current connection.",
        "SETNAME <name>", "    Assign the name <name> to the current connection.",
        "SETINFO <LIB-NAME|LIB-VER> <value>", "    Accepted, not kept.",
        "LIST", "    Return information about client connections.",
        "INFO", "    Return information about the current client connection.",
        "KILL <ip:port>", "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are ID, ADDR, LADDR, TYPE (normal, and master, replica,",
        "    pubsub: none here), USER (default) and SKIPME <yes|no> (default yes).",
        "HELP", "    Print this help.",
    };
    w.array(std::size(lines));
    for (const std::string_view line : lines) w.simple(line);
  } else if (sub == "SETINFO" && k.args.size() == 4) {
    w.ok();
  } else if (sub == "INFO" && k.args.size() == 2) {
    const std::string all = k.srv->client_list();
    const std::string want = "id=" + std::to_string(k.conn->id) + " ";
    std::size_t at = all.find(want);
    if (at != 0) at = all.find("\n" + want) + 1;
    w.verbatim(all.substr(at, all.find('\n', at) - at + 1));
  } else {
    k.error("ERR unknown subcommand or wrong number of arguments for '" +
            std::string(k.args[1]) + "'. Try CLIENT HELP.");
  }
}

// ---- CONFIG ---------------------------------------------------------------------------------

std::vector<std::pair<std::string, std::string>> config_values(const settings& s) {
  std::string bind;
  for (const auto& b : s.bind) bind += (bind.empty() ? "" : " ") + b;
  return {
      {"port", std::to_string(s.port)},
      {"bind", bind},
      {"protected-mode", s.protected_mode ? "yes" : "no"},
      {"requirepass", s.requirepass},
      {"maxclients", std::to_string(s.maxclients)},
      {"maxmemory", std::to_string(s.maxmemory)},
      {"proto-max-bulk-len", std::to_string(s.proto_max_bulk_len)},
      {"timeout", std::to_string(s.timeout_s)},
      {"client-output-buffer-limit",
       "normal " + std::to_string(s.output_buffer_limit) + " 0 0 replica 0 0 0 pubsub 0 0 0"},
      {"workers", std::to_string(s.workers)},
      {"worker-spin-us", std::to_string(s.worker_spin_us >= 0
                                         ? s.worker_spin_us
                                         : tessera::runtime_options{}.spin_before_park.count())},
      {"save", ""},
      {"appendonly", s.appendonly ? "yes" : "no"},
      {"appendfsync", std::string(to_string(s.appendfsync))},
      {"dir", s.dir},
      {"appendfilename", s.appendfilename},
      {"aof-load-truncated", s.aof_load_truncated ? "yes" : "no"},
      {"auto-aof-rewrite-percentage", std::to_string(s.auto_aof_rewrite_percentage)},
      {"auto-aof-rewrite-min-size", std::to_string(s.auto_aof_rewrite_min_size)},
      {"databases", "1"},
  };
}

void cmd_config(call& k) {
  const std::string sub = upper(k.args[1]);
  reply_writer w = k.reply();
  if (sub == "GET" && k.args.size() >= 3) {
    std::vector<std::pair<std::string, std::string>> values;
    {
      const std::lock_guard<std::mutex> lock(k.srv->config_mutex());
      values = config_values(k.srv->config());
    }
    std::vector<std::pair<std::string, std::string>> hits;
    for (const auto& [name, value] : values) {
      for (std::size_t i = 2; i < k.args.size(); ++i) {
        if (glob_match(k.args[i], name, true)) {
          hits.emplace_back(name, value);
          break;
        }
      }
    }
    w.map(hits.size());
    for (const auto& [name, value] : hits) {
      w.bulk(name);
      w.bulk(value);
    }
  } else if (sub == "SET" && k.args.size() >= 4 && k.args.size() % 2 == 0) {
    static constexpr std::string_view settable[] = {"requirepass", "maxclients", "maxmemory",
                                                   "proto-max-bulk-len", "timeout",
                                                   "protected-mode", "save", "appendonly",
                                                   "appendfsync", "aof-load-truncated",
                                                   "auto-aof-rewrite-percentage",
                                                   "auto-aof-rewrite-min-size"};
    const std::lock_guard<std::mutex> lock(k.srv->config_mutex());
    settings next = k.srv->config();
    for (std::size_t i = 2; i < k.args.size(); i += 2) {
      const std::string name = lower(k.args[i]);
      if (std::find(std::begin(settable), std::end(settable), name) == std::end(settable)) {
        return k.error("ERR Unknown option or number of arguments for CONFIG SET - '" +
                       std::string(k.args[i]) + "'");
      }
      std::string error;
      if (!apply_directive(next, name, {std::string(k.args[i + 1])}, error)) {
        std::string msg = "ERR CONFIG SET failed (possibly related to argument '";
        msg += name;
        msg += "') - ";
        msg += error;
        return k.error(msg);
      }
    }
    if (next.appendonly != k.srv->config().appendonly) {
      return k.error("ERR CONFIG SET appendonly is not supported while the server runs: restart "
                     "it with --appendonly " + std::string(next.appendonly ? "yes" : "no"));
    }
    k.srv->config() = next;
    k.srv->config_changed();
    if (aof_log* log = k.srv->aof()) log->set_policy(next.appendfsync);
    w.ok();
  } else if (sub == "RESETSTAT" && k.args.size() == 2) {
    w.ok();
  } else {
    k.error("ERR unknown subcommand or wrong number of arguments for '" +
            std::string(k.args[1]) + "'. Try CONFIG HELP.");
  }
}

// ---- INFO -----------------------------------------------------------------------------------

std::string info_text(kv_server& srv, const std::vector<std::string>& sections) {
  const auto want = [&](std::string_view s) {
    if (sections.empty()) return true;
    for (const auto& x : sections) {
      if (x == s || x == "all" || x == "everything" || x == "default") return true;
    }
    return false;
  };
  std::string r;
  const auto line = [&r](std::string_view k, std::string_view v) { append_info_field(r, k, v); };
  const std::int64_t up = (steady_ms() - srv.start_ms()) / 1000;
  if (want("server")) {
    r += "# Server\r\n";
    line("redis_version", std::string(server_version));
    line("tessera_kv_server", "yes");
    line("redis_mode", "standalone");
    line("os", "Linux");
    line("multiplexing_api", "epoll");
    line("process_id", std::to_string(::getpid()));
    line("tcp_port", srv.ports().empty() ? "0" : std::to_string(srv.ports().front()));
    line("uptime_in_seconds", std::to_string(up));
    line("uptime_in_days", std::to_string(up / 86400));
    r += "\r\n";
  }
  const tree_counters& tc = srv.tree().counters();
  if (want("clients")) {
    r += "# Clients\r\n";
    line("connected_clients", std::to_string(srv.client_count()));
    {
      const std::lock_guard<std::mutex> lock(srv.config_mutex());
      line("maxclients", std::to_string(srv.config().maxclients));
    }
    r += "\r\n";
  }
  if (want("memory")) {
    r += "# Memory\r\n";
    // The dataset's bytes as the tree counts them; the resident set now, as Redis reports it.
    const std::int64_t used = std::max<std::int64_t>(0, tc.bytes.load(std::memory_order_relaxed));
    const std::uint64_t rss = resident_bytes();
    line("used_memory", std::to_string(used));
    line("used_memory_human", human_bytes(static_cast<std::uint64_t>(used)));
    line("used_memory_rss", std::to_string(rss));
    line("used_memory_rss_human", human_bytes(rss));
    std::uint64_t maxmemory = 0;
    {
      const std::lock_guard<std::mutex> lock(srv.config_mutex());
      maxmemory = srv.config().maxmemory;
    }
    line("maxmemory", std::to_string(maxmemory));
    line("maxmemory_human", human_bytes(maxmemory));
    line("maxmemory_policy", "noeviction");
    if (used > 0) {
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.2f",
                    static_cast<double>(rss) / static_cast<double>(used));
      line("mem_fragmentation_ratio", ratio);
    }
    r += "\r\n";
  }
  if (want("replication")) {  // a primary without replicas (no replication)
    r += "# Replication\r\n";
    line("role", "master");
    line("connected_slaves", "0");
    line("master_repl_offset", "0");
    line("repl_backlog_active", "0");
    r += "\r\n";
  }
  if (want("persistence")) {
    r += "# Persistence\r\n";
    line("loading", "0");
    if (aof_log* log = srv.aof()) {
      r += log->info();
    } else {
      line("aof_enabled", "0");
      line("aof_rewrite_in_progress", "0");
      line("aof_last_write_status", "ok");
    }
    line("rdb_bgsave_in_progress", "0");
    line("rdb_last_bgsave_status", "ok");
    r += "\r\n";
  }
  if (want("stats")) {
    server_stats& st = srv.stats();
    const auto get = [](const std::atomic<std::uint64_t>& a) {
      return std::to_string(a.load(std::memory_order_relaxed));
    };
    r += "# Stats\r\n";
    line("total_connections_received", get(st.connections_received));
    line("total_commands_processed", get(st.commands_processed));
    line("total_net_input_bytes", get(st.net_input_bytes));
    line("total_net_output_bytes", get(st.net_output_bytes));
    line("rejected_connections", get(st.rejected_connections));
    line("client_output_buffer_limit_disconnections", get(st.output_limit_disconnects));
    line("expired_keys", get(tc.expired));
    line("evicted_keys", "0");
    line("keyspace_hits", get(st.keyspace_hits));
    line("keyspace_misses", get(st.keyspace_misses));
    r += "\r\n";
  }
  if (want("keyspace")) {
    r += "# Keyspace\r\n";
    const auto keys = tc.keys.load(std::memory_order_relaxed);
    if (keys > 0) {
      line("db0", "keys=" + std::to_string(keys) + ",expires=" +
                      std::to_string(tc.volatile_keys.load(std::memory_order_relaxed)) +
                      ",avg_ttl=0");
    }
    r += "\r\n";
  }
  if (want("tessera")) {
    const tessera::runtime_statistics rs = srv.runtime().statistics();
    r += "# Tessera\r\n";
    line("workers", std::to_string(rs.workers.size()));
    line("tree_leaves", std::to_string(tc.leaves.load(std::memory_order_relaxed)));
    line("tree_splits", std::to_string(tc.splits.load(std::memory_order_relaxed)));
    line("tree_inner_nodes", std::to_string(tc.inner_nodes.load(std::memory_order_relaxed)));
    line("tree_height", std::to_string(srv.tree().height()));
    line("spawned_external", std::to_string(rs.spawned_external));
    line("continued_batches",
         std::to_string(srv.stats().continued_batches.load(std::memory_order_relaxed)));
    for (std::size_t i = 0; i < rs.workers.size(); ++i) {
      const tessera::worker_statistics& w = rs.workers[i];
      line("worker" + std::to_string(i),
           "executed=" + std::to_string(w.executed) +
               ",spawned_local=" + std::to_string(w.spawned_local) +
               ",spawned_remote=" + std::to_string(w.spawned_remote) +
               ",tasks_stolen=" + std::to_string(w.tasks_stolen) +
               ",pools_stolen=" + std::to_string(w.pools_stolen) +
               ",idle_ms=" + std::to_string(w.idle_ns / 1'000'000) +
               ",parked_ms=" + std::to_string(w.parked_ns / 1'000'000) +
               ",step_probes=" + std::to_string(w.step_probes) +
               ",step_changes=" + std::to_string(w.step_changes) +
               ",prefetch_distance=" + std::to_string(w.prefetch_distance));
    }
    r += "\r\n";
  }
  if (r.size() >= 2) r.resize(r.size() - 2);  // no blank line after the last section
  return r;
}

void cmd_info(call& k) {
  std::vector<std::string> sections;
  for (std::size_t i = 1; i < k.args.size(); ++i) sections.push_back(lower(k.args[i]));
  k.reply().verbatim(info_text(*k.srv, sections));
}

/// BGREWRITEAOF, and BGSAVE / SAVE, which start the same rewrite (the log is the only
/// persistence; SAVE does not wait for it).
void start_rewrite(call& k, std::string_view started) {
  aof_log* log = k.srv->aof();
  if (log == nullptr) {
    return k.error("ERR appendonly is no: there is no log to rewrite (start the server with "
                   "--appendonly yes)");
  }
  std::string error;
  switch (log->start_rewrite(error)) {
    case rewrite_start::started: return k.reply().simple(started);
    case rewrite_start::already_running:
    case rewrite_start::failed: return k.error(error);
  }
}

void cmd_bgrewriteaof(call& k) {
  start_rewrite(k, "Background append only file rewriting started");
}
void cmd_bgsave(call& k) {
  if (k.args.size() > 2) return k.error(err_syntax);
  start_rewrite(k, "Background saving started");
}
void cmd_save(call& k) { start_rewrite(k, "OK"); }

// ---- MEMORY ---------------------------------------------------------------------------------

/// Gives wholly free memory back to the system: tessera's pool's (nodes and value headers;
/// tessera/runtime.h, release_free_memory, after the calling thread's cached blocks) and glibc's
/// heap's (the values' bytes; malloc_trim).
void purge_memory() noexcept {
  (void)tessera::release_free_memory();
#if defined(__GLIBC__)
  (void)::malloc_trim(0);
#endif
}

/// MEMORY PURGE: a task on each worker gives its cached blocks back to the pool's heaps, and
/// once they all ran one purge sees every chunk they freed. Answered at once, as Redis answers
/// it after its allocator's purge; memory not yet reclaimed (a FLUSHALL a moment ago) stays.
void start_purge(call& k) {
  if (k.ctx == nullptr) {
    purge_memory();
    return;
  }
  tessera::context& ctx = *k.ctx;
  tessera::runtime& rt = ctx.runtime();
  bool made = false;
  tessera::group g{};
  try {
    g = rt.make_group();
    made = true;
    for (unsigned w = 0; w < rt.workers(); ++w) {
      auto* t = ctx.make_task_from([](tessera::context&) { tessera::release_thread_cache(); });
      t->annotate(tessera::worker_id{static_cast<std::uint16_t>(w)}).annotate(g);
      ctx.spawn(t);
    }
    ctx.when_done(g, [](tessera::context&) { purge_memory(); });
  } catch (...) {
    // No memory for a task, or the server stopping: what ran ran; the rest here, now.
    if (made) {
      try {
        rt.detach(g);
      } catch (...) {
      }
    }
    purge_memory();
  }
}

void cmd_memory(call& k) {
  const std::string sub = upper(k.args[1]);
  reply_writer w = k.reply();
  if (sub == "PURGE" && k.args.size() == 2) {
    start_purge(k);
    w.ok();
  } else if (sub == "USAGE" && k.args.size() >= 3) {
    memory_usage(k);
  } else if (sub == "HELP" && k.args.size() == 2) {
    static constexpr std::string_view lines[] = {
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "USAGE <key> [SAMPLES <count>]",
        "    Return the bytes a key and its value take, as used_memory counts them.",
        "PURGE",
        "    Return the memory no key, value or node uses to the system.",
        "HELP",
        "    Print this help.",
    };
    w.array(std::size(lines));
    for (const std::string_view line : lines) w.simple(line);
  } else {
    k.error("ERR unknown subcommand or wrong number of arguments for '" +
            std::string(k.args[1]) + "'. Try MEMORY HELP.");
  }
}

/// ROLE: a primary without replicas, as a standalone redis-server answers.
void cmd_role(call& k) {
  reply_writer w = k.reply();
  w.array(3);
  w.bulk("master");
  w.integer(0);
  w.array(0);
}

/// LASTSAVE: when the log was last rewritten (the server's only save), else when it started.
void cmd_lastsave(call& k) {
  const aof_log* log = k.srv->aof();
  const std::int64_t saved = log != nullptr ? log->last_save_unix_s() : 0;
  k.reply().integer(saved != 0 ? saved : (k.srv->start_ms() + unix_offset_ms()) / 1000);
}

void cmd_shutdown(call& k) {
  for (std::size_t i = 1; i < k.args.size(); ++i) {
    const std::string opt = upper(k.args[i]);
    if (opt != "NOSAVE" && opt != "SAVE" && opt != "NOW" && opt != "FORCE") {
      return k.error(err_syntax);
    }
  }
  // No reply on success, as Redis: the server closes the connection when it exits.
  k.srv->request_shutdown();
}

}  // namespace

const std::vector<command_spec>& server_commands() {
  static const std::vector<command_spec> table = {
      {"ping", -1, cmd_fast, 0, 0, 0, &cmd_ping},
      {"echo", 2, cmd_fast, 0, 0, 0, &cmd_echo},
      {"time", 1, cmd_fast, 0, 0, 0, &cmd_time},
      {"quit", -1, cmd_fast | cmd_no_auth | cmd_ends_batch | cmd_txn_control, 0, 0, 0, &cmd_quit},
      {"select", 2, cmd_fast, 0, 0, 0, &cmd_select},
      {"auth", -2, cmd_fast | cmd_no_auth | cmd_ends_batch, 0, 0, 0, &cmd_auth},
      {"hello", -1, cmd_fast | cmd_no_auth | cmd_ends_batch, 0, 0, 0, &cmd_hello},
      {"command", -1, 0, 0, 0, 0, &cmd_command},
      {"client", -2, 0, 0, 0, 0, &cmd_client},
      {"config", -2, 0, 0, 0, 0, &cmd_config},
      // (alone in its batch: MEMORY USAGE reads a key the batch's rules do not see)
      {"memory", -2, cmd_whole_store, 0, 0, 0, &cmd_memory},
      {"role", 1, cmd_fast, 0, 0, 0, &cmd_role},
      {"lastsave", 1, cmd_fast, 0, 0, 0, &cmd_lastsave},
      {"info", -1, cmd_whole_store, 0, 0, 0, &cmd_info},
      {"shutdown", -1, cmd_ends_batch, 0, 0, 0, &cmd_shutdown},
      {"bgrewriteaof", 1, 0, 0, 0, 0, &cmd_bgrewriteaof},
      {"bgsave", -1, 0, 0, 0, 0, &cmd_bgsave},
      {"save", 1, 0, 0, 0, 0, &cmd_save},
  };
  return table;
}

std::size_t command_count() noexcept {
  return key_commands().size() + server_commands().size() + transaction_commands().size();
}

namespace {

/// find_spec, through the connection's last lookup (the same bytes: the same spec).
const command_spec* spec_for(connection& c, std::string_view name) {
  if (name.size() == c.last_name_size && !name.empty() &&
      same_bytes(name.data(), c.last_name, name.size())) {  // (16 bytes at most)
    return c.last_spec;
  }
  const command_spec* s = find_spec(name);
  if (s != nullptr && name.size() <= sizeof c.last_name) {
    std::memcpy(c.last_name, name.data(), name.size());
    c.last_name_size = static_cast<std::uint8_t>(name.size());
    c.last_spec = s;
  }
  return s;
}

}  // namespace

namespace {

/// The batch's next command, c.args[first_arg, first_arg + nargs), as its handler gets it.
call begin_command(kv_server& srv, connection& c, tessera::context& ctx, const command_spec* spec,
                   std::size_t first_arg, std::size_t nargs) {
  batch_command& cmd = c.cmds.emplace_back();
  cmd.spec = spec;
  cmd.first_arg = first_arg;
  cmd.nargs = nargs;
  cmd.first_op = c.ops.size();
  const std::span<const std::string_view> args(c.args.data() + first_arg, nargs);
  return call{&srv, &c, &ctx, args, &cmd, spec};
}

}  // namespace

/// Calls f(i) for the index of every key argument of a request of `spec` with `nargs`
/// arguments (none when it has none, or too few arguments for its first).
template <class F>
void for_each_key(const command_spec& spec, std::size_t nargs, F&& f) {
  if (spec.first_key <= 0) return;
  const std::size_t last =
      spec.last_key < 0 ? nargs - 1 : static_cast<std::size_t>(spec.last_key);
  for (std::size_t i = static_cast<std::size_t>(spec.first_key); i <= last && i < nargs;
       i += static_cast<std::size_t>(spec.step)) {
    f(i);
  }
}

/// The batch's first command that writes a key: from now on its keys are kept (connection.h),
/// starting with those of the commands before, which all read.
[[gnu::noinline]] void start_batch_keys(connection& c) {
  c.batch_writes = true;
  for (const batch_command& cmd : c.cmds) {
    if (cmd.spec == nullptr) continue;
    for_each_key(*cmd.spec, cmd.nargs,
                 [&](std::size_t i) { c.batch_keys.add(c.args[cmd.first_arg + i], false); });
  }
}

dispatch_outcome dispatch(kv_server& srv, connection& c, tessera::context& ctx,
                          std::size_t first_arg, std::size_t nargs) {
  const std::span<const std::string_view> args(c.args.data() + first_arg, nargs);
  const command_spec* spec = spec_for(c, args[0]);
  const bool first_in_batch = c.cmds.empty();
  const bool writes = spec != nullptr && (spec->flags & cmd_write) != 0;
  // Between MULTI and EXEC a command is checked and queued (transaction.cpp): it touches no key
  // now, so it neither ends the batch nor counts in its keys.
  const bool queued = c.in_multi && (spec == nullptr || (spec->flags & cmd_txn_control) == 0);
  // Two requests on one key, one of them a write, never share a batch (connection.h). Reads
  // never conflict with reads, so a batch's keys are kept only from its first writing command
  // on (start_batch_keys: a batch of GETs hashes no key).
  const bool keyed = spec != nullptr && !queued && spec->first_key > 0 &&
                     static_cast<std::size_t>(spec->first_key) < nargs;
  if (keyed && writes && !c.batch_writes) start_batch_keys(c);
  const bool track = keyed && c.batch_writes;
  const auto conflicts = [writes](batch_key_set::seen seen) {
    return seen == batch_key_set::seen::written || (seen == batch_key_set::seen::read && writes);
  };
  // A one-key command's key is looked up and added in one probe, before the checks below (a
  // command they refuse keeps its key in the set: at worst a later request of the batch starts
  // the next batch); several keys are looked up here and added after the checks.
  const bool one_key = track && spec->last_key == spec->first_key;
  if (spec != nullptr) {
    if ((spec->flags & cmd_whole_store) != 0 && !first_in_batch && !queued) {
      return dispatch_outcome::end_before;
    }
    if (one_key) {
      const std::string_view key = args[static_cast<std::size_t>(spec->first_key)];
      if (conflicts(c.batch_keys.mark(key, writes))) {
        return dispatch_outcome::end_before;  // (the batch's keys are cleared with it)
      }
    } else if (track && !first_in_batch) {
      bool conflict = false;
      for_each_key(*spec, nargs, [&](std::size_t i) {
        conflict = conflict || conflicts(c.batch_keys.find(args[i]));
      });
      if (conflict) return dispatch_outcome::end_before;
    }
  }
  call k = begin_command(srv, c, ctx, spec, first_arg, nargs);
  // A command refused here inside MULTI fails the transaction (EXEC answers EXECABORT).
  const bool multi_failed_before = c.multi_failed;
  if (queued) c.multi_failed = true;  // put back below once the command passed the checks
  if (spec == nullptr) {
    std::string msg = "ERR unknown command '" + std::string(args[0].substr(0, 128)) +
                      "', with args beginning with: ";
    for (std::size_t i = 1; i < nargs && msg.size() < 128; ++i) {
      msg += "'" + std::string(args[i].substr(0, 128 - std::min<std::size_t>(128, msg.size()))) +
             "' ";
    }
    k.error(msg);
    return dispatch_outcome::next;
  }
  c.last_command = spec->name;
  const bool need_auth = srv.auth_required();
  const std::uint64_t maxmemory = srv.maxmemory();
  if (need_auth && !c.authenticated && (spec->flags & cmd_no_auth) == 0) {
    k.error("NOAUTH Authentication required.");
    return dispatch_outcome::next;
  }
  if ((spec->arity > 0 && nargs != static_cast<std::size_t>(spec->arity)) ||
      (spec->arity < 0 && nargs < static_cast<std::size_t>(-spec->arity))) {
    k.arity_error();
    return dispatch_outcome::next;
  }
  if ((spec->flags & cmd_denyoom) != 0 && maxmemory != 0 &&
      srv.tree().counters().bytes.load(std::memory_order_relaxed) >
          static_cast<std::int64_t>(maxmemory)) {
    k.error("OOM command not allowed when used memory > 'maxmemory'.");
    return dispatch_outcome::next;
  }
  // Writes are refused while the log cannot be written; reads go on (aof.h).
  if ((spec->flags & cmd_write) != 0 && srv.aof() != nullptr) {
    const std::string refused = srv.aof()->refusal();
    if (!refused.empty()) {
      k.error(refused);
      return dispatch_outcome::next;
    }
  }
  if (queued) {
    c.multi_failed = multi_failed_before;
    queue_command(k);
    return dispatch_outcome::next;
  }
  if (track && !one_key) {
    for_each_key(*spec, nargs, [&](std::size_t i) { c.batch_keys.add(args[i], writes); });
  }
  spec->handler(k);
  if ((spec->flags & (cmd_whole_store | cmd_ends_batch)) != 0 || c.close_after_reply) {
    return dispatch_outcome::end_after;
  }
  return dispatch_outcome::next;
}

void dispatch_queued(kv_server& srv, connection& c, tessera::context& ctx, std::size_t first_arg,
                     std::size_t nargs) {
  const command_spec* spec = find_spec(c.args[first_arg]);  // (found when it was queued)
  call k = begin_command(srv, c, ctx, spec, first_arg, nargs);
  spec->handler(k);
}

namespace {

/// The outcome of `cmd`'s tree requests: the first failure among them, or applied. A command
/// without tree requests and without a direct reply is the batch's walk (alone in its batch).
/// (Not for reply_kind::parts: a failed request's part is its error already, op_settle.)
[[gnu::noinline]] op_outcome outcome_of(const connection& c, const batch_command& cmd) noexcept {
  if (cmd.nops == 0) return c.walk ? c.walk->walk.outcome : op_outcome::applied;
  for (std::size_t i = 0; i < cmd.nops; ++i) {
    const op_outcome o = c.ops[cmd.first_op + i].op.outcome;
    if (o != op_outcome::applied) return o;
  }
  return op_outcome::applied;
}

}  // namespace

void finalize(kv_server& /*srv*/, connection& c, batch_command& cmd) {
  reply_writer w(c.out, c.proto);
  if (!cmd.reply.empty()) {  // an error at dispatch, or a direct reply
    c.out.append(cmd.reply);
    return;
  }
  if (cmd.kind == reply_kind::parts) [[likely]] {
    // (A failed request's part is its error reply: op_settle.)
    for (std::size_t i = 0; i < cmd.nops; ++i) c.out.append(c.ops[cmd.first_op + i].out);
    return;
  }
  // A request whose apply (or walk's visit) threw ended with the failure as its outcome
  // (string_tree.h): the command's reply is the error, in its place.
  const op_outcome o = outcome_of(c, cmd);
  if (o != op_outcome::applied) {
    w.error(o == op_outcome::out_of_memory ? err_out_of_memory : err_request_failed);
    return;
  }
  switch (cmd.kind) {
    case reply_kind::parts:
      break;
    case reply_kind::array_of_parts:
      w.array(cmd.nops);
      for (std::size_t i = 0; i < cmd.nops; ++i) c.out.append(c.ops[cmd.first_op + i].out);
      break;
    case reply_kind::sum: {
      long long n = 0;
      for (std::size_t i = 0; i < cmd.nops; ++i) n += c.ops[cmd.first_op + i].result;
      w.integer(n);
      break;
    }
    case reply_kind::ok: w.ok(); break;
    case reply_kind::first_part: c.out.append(c.ops[cmd.first_op].out); break;
    case reply_kind::watch:
      // Here, once the batch is complete, not in the requests' tasks (which may run at once).
      for (std::size_t i = 0; i < cmd.nops; ++i) {
        const op_slot& s = c.ops[cmd.first_op + i];
        c.watched.push_back({std::string(s.op.key), s.result != 0, s.expire,
                             static_cast<std::uint64_t>(s.op.number), s.op.index});
      }
      w.ok();
      break;
    case reply_kind::walk_keys:
      w.array(c.walk->keys.size());
      for (const auto& key : c.walk->keys) w.bulk(key);
      break;
    case reply_kind::walk_scan:
      w.array(2);
      w.bulk(c.walk->next_cursor.empty() ? std::string("0")
                                         : encode_scan_cursor(c.walk->next_cursor));
      w.array(c.walk->keys.size());
      for (const auto& key : c.walk->keys) w.bulk(key);
      break;
  }
}

}  // namespace server
