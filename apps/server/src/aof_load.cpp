// server::aof_log::load — see aof.h: reading the log at start-up and replaying it into the tree.
//
// The file is a sequence of RESP arrays of bulk strings. A record that stops at the end of the
// file is truncated (a crash in the middle of a write: never acknowledged); anything else that
// is not a record is corrupt, and stops the start with the record's byte offset: the server
// never starts on a log it read only in part.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aof.h"
#include "kv_server.h"
#include "resp_parser.h"

namespace server {
namespace {

enum class record_outcome : std::uint8_t { record, truncated, corrupt };

struct record_parse {
  record_outcome outcome = record_outcome::record;
  std::size_t next = 0;     ///< after the record
  std::size_t bad_at = 0;   ///< corrupt: the offending byte
  std::string reason;
};

constexpr std::size_t max_args = std::size_t{1} << 20;
constexpr std::size_t max_bulk = std::size_t{1} << 30;

/// Reads `lead` then a decimal number and CRLF at `at`.
record_outcome read_header(std::string_view d, std::size_t& at, char lead, std::size_t& value,
                           record_parse& r) {
  if (at >= d.size()) return record_outcome::truncated;
  if (d[at] != lead) {
    r.bad_at = at;
    r.reason = std::string("expected '") + lead + "', found byte " +
               std::to_string(static_cast<unsigned char>(d[at]));
    return record_outcome::corrupt;
  }
  std::size_t i = at + 1;
  value = 0;
  std::size_t digits = 0;
  while (i < d.size() && std::isdigit(static_cast<unsigned char>(d[i])) != 0 && digits < 12) {
    value = value * 10 + static_cast<std::size_t>(d[i] - '0');
    ++i;
    ++digits;
  }
  if (i >= d.size()) return record_outcome::truncated;
  if (digits == 0 || d[i] != '\r') {
    r.bad_at = i;
    r.reason = std::string("bad length after '") + lead + "'";
    return record_outcome::corrupt;
  }
  if (i + 1 >= d.size()) return record_outcome::truncated;
  if (d[i + 1] != '\n') {
    r.bad_at = i + 1;
    r.reason = "expected a line feed";
    return record_outcome::corrupt;
  }
  at = i + 2;
  return record_outcome::record;
}

record_parse parse_record(std::string_view d, std::size_t off,
                          std::vector<std::string_view>& args) {
  record_parse r;
  args.clear();
  std::size_t at = off;
  std::size_t n = 0;
  r.outcome = read_header(d, at, '*', n, r);
  if (r.outcome != record_outcome::record) return r;
  if (n == 0 || n > max_args) {
    r.outcome = record_outcome::corrupt;
    r.bad_at = off;
    r.reason = "an array of " + std::to_string(n) + " arguments";
    return r;
  }
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t len = 0;
    r.outcome = read_header(d, at, '$', len, r);
    if (r.outcome != record_outcome::record) return r;
    if (len > max_bulk) {
      r.outcome = record_outcome::corrupt;
      r.bad_at = at;
      r.reason = "a bulk string of " + std::to_string(len) + " bytes";
      return r;
    }
    if (d.size() - at < len + 2) {
      // Whatever is there must be the start of the string and its CRLF.
      if (d.size() - at > len && d[at + len] != '\r') {
        r.outcome = record_outcome::corrupt;
        r.bad_at = at + len;
        r.reason = "a bulk string not followed by CRLF";
        return r;
      }
      r.outcome = record_outcome::truncated;
      return r;
    }
    if (d[at + len] != '\r' || d[at + len + 1] != '\n') {
      r.outcome = record_outcome::corrupt;
      r.bad_at = at + len;
      r.reason = "a bulk string not followed by CRLF";
      return r;
    }
    args.emplace_back(d.substr(at, len));
    at += len + 2;
  }
  r.next = at;
  return r;
}

// ---- replay ----------------------------------------------------------------------------------

struct replay_op {
  std::string_view value;
  std::int64_t deadline = 0;  ///< steady ms; 0: none
  bool keep_ttl = false;
  bool nx = false;
  bool xx = false;
};

replay_op& of(key_op& op) { return *static_cast<replay_op*>(op.user); }

void replay_set(key_op& op, leaf_access& a) {
  replay_op& r = of(op);
  const slot* e = a.find(op.key);
  if ((r.nx && e != nullptr) || (r.xx && e == nullptr)) return;
  if (r.deadline != 0 && r.deadline <= a.now_ms()) {
    a.erase(op.key);  // a deadline passed while the server was down
    return;
  }
  a.put(op.key, std::string(r.value), r.deadline, r.keep_ttl);
}

void replay_del(key_op& op, leaf_access& a) { a.erase(op.key); }

void replay_expire(key_op& op, leaf_access& a) {
  slot* e = a.find(op.key);
  if (e == nullptr) return;
  const std::int64_t d = of(op).deadline;
  if (d != 0 && d <= a.now_ms()) {
    a.erase(op.key);
  } else {
    a.set_expire(*e, d);
  }
}

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A Unix-time deadline in ms as a steady-clock one (never 0: 0 means none).
std::int64_t to_steady(long long unix_ms) {
  const std::int64_t d = steady_ms() + (unix_ms - unix_now_ms());
  return d <= 0 ? 1 : d;
}

std::string upper_ascii(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return r;
}

void apply_one(string_tree& tree, std::string_view key, void (*fn)(key_op&, leaf_access&),
               replay_op& r) {
  key_op op;
  op.key = key;
  op.writes = true;
  op.apply = fn;
  op.user = &r;
  tree.apply_exclusive(op);
}

/// Replays one command. Outcome: false with `why` for one the server cannot replay.
bool replay(string_tree& tree, const std::vector<std::string_view>& args, std::string& why) {
  const std::string name = upper_ascii(args[0]);
  const auto bad = [&](const char* what) {
    why = std::string(what) + " in '" + name + "'";
    return false;
  };
  if (name == "SET") {
    if (args.size() < 3) return bad("wrong number of arguments");
    replay_op r;
    r.value = args[2];
    for (std::size_t i = 3; i < args.size(); ++i) {
      const std::string opt = upper_ascii(args[i]);
      if (opt == "NX") {
        r.nx = true;
      } else if (opt == "XX") {
        r.xx = true;
      } else if (opt == "GET") {
      } else if (opt == "KEEPTTL") {
        r.keep_ttl = true;
      } else if ((opt == "EX" || opt == "PX" || opt == "EXAT" || opt == "PXAT") &&
                 i + 1 < args.size()) {
        long long v = 0;
        if (!parse_integer(args[++i], v) || v <= 0 || v > LLONG_MAX / 1000) {
          return bad("a bad expire time");
        }
        const long long ms = (opt == "EX" || opt == "EXAT") ? v * 1000 : v;
        r.deadline = (opt == "EX" || opt == "PX") ? to_steady(unix_now_ms() + ms) : to_steady(ms);
      } else {
        return bad("a syntax error");
      }
    }
    apply_one(tree, args[1], &replay_set, r);
    return true;
  }
  if (name == "MSET") {
    if (args.size() < 3 || args.size() % 2 == 0) return bad("wrong number of arguments");
    for (std::size_t i = 1; i + 1 < args.size(); i += 2) {
      replay_op r;
      r.value = args[i + 1];
      apply_one(tree, args[i], &replay_set, r);
    }
    return true;
  }
  if (name == "DEL" || name == "UNLINK") {
    if (args.size() < 2) return bad("wrong number of arguments");
    replay_op r;
    for (std::size_t i = 1; i < args.size(); ++i) apply_one(tree, args[i], &replay_del, r);
    return true;
  }
  if (name == "PEXPIREAT" || name == "EXPIREAT" || name == "PEXPIRE" || name == "EXPIRE") {
    if (args.size() != 3) return bad("wrong number of arguments");
    long long v = 0;
    if (!parse_integer(args[2], v) || v > LLONG_MAX / 1000 || v < LLONG_MIN / 1000) {
      return bad("a bad expire time");
    }
    if (name == "EXPIREAT" || name == "EXPIRE") v *= 1000;
    if (name == "PEXPIRE" || name == "EXPIRE") v += unix_now_ms();
    replay_op r;
    r.deadline = to_steady(v);
    apply_one(tree, args[1], &replay_expire, r);
    return true;
  }
  if (name == "PERSIST") {
    if (args.size() != 2) return bad("wrong number of arguments");
    replay_op r;  // deadline 0: none
    apply_one(tree, args[1], &replay_expire, r);
    return true;
  }
  if (name == "FLUSHALL" || name == "FLUSHDB") {
    for (leaf* l = tree.leaf_for(std::string_view()); l != nullptr; l = l->right) {
      leaf_access a(tree, *l, true, steady_ms());
      while (!l->slots.empty()) a.erase(std::string(l->slots.back().key));
    }
    return true;
  }
  if (name == "SELECT") {
    if (args.size() != 2 || args[1] != "0") return bad("a database other than 0");
    return true;
  }
  if (name == "MULTI" || name == "EXEC") return true;
  why = "'" + name.substr(0, 64) +
        "', which the server does not replay (it replays SET, MSET, DEL, UNLINK, PEXPIREAT, "
        "EXPIREAT, PEXPIRE, EXPIRE, PERSIST, FLUSHALL, FLUSHDB, SELECT 0, MULTI and EXEC)";
  return false;
}

/// Removes the temp files of a rewrite that a crash interrupted.
void remove_leftovers(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name.rfind("temp-rewriteaof-", 0) == 0 && name.size() > 4 &&
        name.substr(name.size() - 4) == ".aof") {
      ::unlink((dir + "/" + std::string(name)).c_str());
    }
  }
  ::closedir(d);
}

}  // namespace

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

load_outcome aof_log::load(std::string& message) {
  const load_outcome o = load_file(message);
  if (o == load_outcome::loaded) start_sync_thread();
  return o;
}

load_outcome aof_log::load_file(std::string& message) {
  const std::string& dir = m_settings.dir;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT || ::mkdir(dir.c_str(), 0755) != 0) {
      message = "cannot use directory '" + dir + "' for the append only file: " +
                std::strerror(errno);
      return load_outcome::failed;
    }
  } else if (!S_ISDIR(st.st_mode)) {
    message = "dir '" + dir + "' is not a directory";
    return load_outcome::failed;
  }
  remove_leftovers(dir);
  const bool existed = ::stat(m_path.c_str(), &st) == 0;
  m_fd = ::open(m_path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (m_fd < 0) {
    message = "cannot open the append only file " + m_path + ": " + std::strerror(errno);
    return load_outcome::failed;
  }
  note_file(m_fd);
  if (!existed) {
    fsync_dir(dir);
    message = "created the append only file " + m_path + " (appendfsync " +
              std::string(to_string(policy())) + ")";
    return load_outcome::loaded;
  }
  const auto t0 = steady_ms();
  std::string data;
  {
    if (::fstat(m_fd, &st) != 0) {
      message = "cannot stat the append only file " + m_path + ": " + std::strerror(errno);
      return load_outcome::failed;
    }
    data.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < data.size()) {
      const ssize_t n = ::pread(m_fd, data.data() + got, data.size() - got,
                                static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        message = "cannot read the append only file " + m_path + " at byte " +
                  std::to_string(got) + ": " + (n < 0 ? std::strerror(errno) : "end of file");
        return load_outcome::failed;
      }
      got += static_cast<std::size_t>(n);
    }
  }
  string_tree& tree = m_srv.tree();
  std::vector<std::string_view> args;
  std::size_t off = 0;
  std::uint64_t records = 0;
  while (off < data.size()) {
    const record_parse r = parse_record(data, off, args);
    if (r.outcome == record_outcome::corrupt) {
      message = "Bad file format reading the append only file " + m_path + ": the record at byte " +
                std::to_string(off) + " is corrupt (" + r.reason + " at byte " +
                std::to_string(r.bad_at) + "; " + std::to_string(records) +
                " records before it are fine). The server does not start on a log it cannot "
                "read in full: repair the record, or cut the log there with redis-check-aof "
                "--fix " + m_path + " (losing everything after it)";
      return load_outcome::failed;
    }
    if (r.outcome == record_outcome::truncated) {
      const std::size_t dropped = data.size() - off;
      if (!m_settings.aof_load_truncated) {
        message = "the append only file " + m_path + " ends in a truncated record at byte " +
                  std::to_string(off) + " of " + std::to_string(data.size()) +
                  " (a crash in the middle of a write?); start with --aof-load-truncated yes to "
                  "cut it off there (" + std::to_string(dropped) +
                  " bytes, never acknowledged), or run redis-check-aof --fix " + m_path;
        return load_outcome::failed;
      }
      if (::ftruncate(m_fd, static_cast<off_t>(off)) != 0 || ::fdatasync(m_fd) != 0) {
        message = "cannot cut the truncated record off the append only file " + m_path +
                  " at byte " + std::to_string(off) + ": " + std::strerror(errno);
        return load_outcome::failed;
      }
      message = "!!! Warning: short read while loading the append only file " + m_path +
                ": the last record, at byte " + std::to_string(off) + " of " +
                std::to_string(data.size()) + ", is truncated (a crash in the middle of a "
                "write?); cut off at byte " + std::to_string(off) + " (aof-load-truncated yes), " +
                std::to_string(dropped) + " bytes dropped. ";
      data.resize(off);
      break;
    }
    std::string why;
    if (!replay(tree, args, why)) {
      message = "cannot replay the record at byte " + std::to_string(off) +
                " of the append only file " + m_path + ": " + why;
      return load_outcome::failed;
    }
    ++records;
    off = r.next;
  }
  m_size.store(data.size(), std::memory_order_relaxed);
  m_base_size.store(data.size(), std::memory_order_relaxed);
  message += "DB loaded from append only file " + m_path + ": " + std::to_string(records) +
             " records (" + std::to_string(data.size()) + " bytes), " +
             std::to_string(tree.counters().keys.load(std::memory_order_relaxed)) + " keys, " +
             std::to_string(steady_ms() - t0) + " ms";
  return load_outcome::loaded;
}

}  // namespace server
