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
#include "aof_replay.h"
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

/// Reads all of `fd` into `data`; false with `error` on failure.
bool read_all(int fd, std::string& data, std::string& error) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    error = std::string("cannot stat it: ") + std::strerror(errno);
    return false;
  }
  data.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::pread(fd, data.data() + got, data.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = "cannot read it at byte " + std::to_string(got) + ": " +
              (n < 0 ? std::strerror(errno) : "end of file");
      return false;
    }
    got += static_cast<std::size_t>(n);
  }
  return true;
}

bool read_path(const std::string& path, std::string& data, std::string& error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  const bool ok = read_all(fd, data, error);
  ::close(fd);
  if (!ok) error = path + ": " + error;
  return ok;
}

enum class replay_end : std::uint8_t { complete, truncated, corrupt };

struct replay_result {
  replay_end end = replay_end::complete;
  std::size_t cut_at = 0;  ///< truncated: where the unfinished record or transaction begins
  bool in_transaction = false;  ///< truncated: a MULTI without its EXEC
  std::uint64_t records = 0;
  std::uint64_t no_effect = 0;  ///< records that were error replies in Redis too
  std::string what;             ///< corrupt: the sentence, naming the byte offset
};

/// Replays a log's bytes into the tree: records one by one, a MULTI ... EXEC transaction at its
/// EXEC (one the data ends inside is truncated at its MULTI, as in redis-server).
replay_result replay_data(string_tree& tree, std::string_view data) {
  replay_result out;
  std::vector<std::string_view> args;
  std::vector<std::pair<std::size_t, std::vector<std::string_view>>> queued;
  constexpr std::size_t none = std::string_view::npos;
  std::size_t multi_at = none;
  std::uint64_t records_at_multi = 0;
  std::size_t off = 0;
  const auto replay = [&](std::size_t at, std::span<const std::string_view> a) {
    std::string why;
    switch (replay_record(tree, a, why)) {
      case replay_outcome::applied: return true;
      case replay_outcome::no_effect: ++out.no_effect; return true;
      case replay_outcome::refused: break;
    }
    out.end = replay_end::corrupt;
    out.what = "cannot replay the record at byte " + std::to_string(at) + ": " + why;
    return false;
  };
  const auto corrupt = [&](std::size_t at, const std::string& reason) {
    out.end = replay_end::corrupt;
    out.what = "the record at byte " + std::to_string(at) + " is corrupt (" + reason + "; " +
               std::to_string(out.records) + " records before it are fine)";
    return out;
  };
  while (off < data.size()) {
    const record_parse r = parse_record(data, off, args);
    if (r.outcome == record_outcome::corrupt) {
      return corrupt(off, r.reason + " at byte " + std::to_string(r.bad_at));
    }
    if (r.outcome == record_outcome::truncated) break;
    const std::string name = record_name(args[0]);
    if (name == "MULTI") {
      if (multi_at != none) return corrupt(off, "a MULTI inside a transaction");
      multi_at = off;
      records_at_multi = out.records;
      queued.clear();
    } else if (name == "EXEC") {
      if (multi_at == none) return corrupt(off, "an EXEC without its MULTI");
      for (const auto& [at, q] : queued) {
        if (!replay(at, q)) return out;
      }
      multi_at = none;
    } else if (multi_at != none) {
      queued.emplace_back(off, args);
    } else if (!replay(off, args)) {
      return out;
    }
    ++out.records;
    off = r.next;
  }
  if (off < data.size() || multi_at != none) {
    out.end = replay_end::truncated;
    out.in_transaction = multi_at != none;
    out.cut_at = multi_at != none ? multi_at : off;
    if (out.in_transaction) out.records = records_at_multi;  // the cut-off ones never applied
  }
  return out;
}

/// The sentence for a truncated end at `r.cut_at` of `size` bytes.
std::string truncated_what(const replay_result& r, std::size_t size) {
  const std::string at = std::to_string(r.cut_at) + " of " + std::to_string(size);
  return r.in_transaction ? "a transaction without its EXEC (its MULTI at byte " + at + ")"
                          : "a truncated record at byte " + at;
}

/// Creates and removes a file in `dir`: whether the rewrite can work there.
bool dir_writable(const std::string& dir, std::string& error) {
  const std::string probe = dir + "/temp-rewriteaof-" + std::to_string(::getpid()) + ".aof";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = std::strerror(errno);
    return false;
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
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
  {
    std::string why;
    if (!dir_writable(dir, why)) {
      message = "cannot create files in dir '" + dir + "' (" + why +
                "): the append only file is rewritten there (BGREWRITEAOF, the automatic "
                "rewrite) and recreated there if it is removed; make the directory writable by "
                "the server's user";
      return load_outcome::failed;
    }
  }
  const bool existed = ::stat(m_path.c_str(), &st) == 0;
  const std::string manifest = dir + "/appendonlydir/" + m_settings.appendfilename + ".manifest";
  // redis-server 7's log (a directory of parts) where the server has none of its own yet.
  const bool import = !existed && ::stat(manifest.c_str(), &st) == 0;
  if (import && import_redis_dir(manifest, message) == load_outcome::failed) {
    return load_outcome::failed;
  }
  m_fd = ::open(m_path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (m_fd < 0) {
    message = "cannot open the append only file " + m_path + ": " + std::strerror(errno);
    return load_outcome::failed;
  }
  note_file(m_fd);
  if (import) return load_outcome::loaded;
  if (!existed) {
    fsync_dir(dir);
    message = "created the append only file " + m_path + " (appendfsync " +
              std::string(to_string(policy())) + ")";
    return load_outcome::loaded;
  }
  const auto t0 = steady_ms();
  std::string data;
  {
    std::string error;
    if (!read_all(m_fd, data, error)) {
      message = "the append only file " + m_path + ": " + error;
      return load_outcome::failed;
    }
  }
  if (data.rfind("REDIS", 0) == 0) {
    message = "the append only file " + m_path + " begins with an RDB preamble "
              "(redis-server's aof-use-rdb-preamble yes), which this server does not read: in "
              "redis-server, CONFIG SET aof-use-rdb-preamble no and BGREWRITEAOF first";
    return load_outcome::failed;
  }
  string_tree& tree = m_srv.tree();
  const replay_result r = replay_data(tree, data);
  if (r.end == replay_end::corrupt) {
    message = "Bad file format reading the append only file " + m_path + ": " + r.what +
              ". The server does not start on a log it cannot read in full: repair the "
              "record, or cut the log there with redis-check-aof --fix " + m_path +
              " (losing everything after it)";
    return load_outcome::failed;
  }
  if (r.end == replay_end::truncated) {
    const std::size_t off = r.cut_at;
    const std::size_t dropped = data.size() - off;
    if (!m_settings.aof_load_truncated) {
      message = "the append only file " + m_path + " ends in " +
                truncated_what(r, data.size()) +
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
              ": it ends in " + truncated_what(r, data.size()) +
              " (a crash in the middle of a write?); cut off at byte " + std::to_string(off) +
              " (aof-load-truncated yes), " + std::to_string(dropped) + " bytes dropped. ";
    data.resize(off);
  }
  const std::uint64_t expired = drop_expired(tree);
  m_size.store(data.size(), std::memory_order_relaxed);
  m_base_size.store(data.size(), std::memory_order_relaxed);
  message += "DB loaded from append only file " + m_path + ": " +
             std::to_string(r.records) + " records (" + std::to_string(data.size()) +
             " bytes), " +
             std::to_string(tree.counters().keys.load(std::memory_order_relaxed)) + " keys, " +
             std::to_string(steady_ms() - t0) + " ms";
  if (expired != 0) {
    message += "; " + std::to_string(expired) + " keys expired while the server was down";
  }
  if (r.no_effect != 0) {
    message += "; " + std::to_string(r.no_effect) +
               " records changed nothing (an error reply in Redis too: an INCR of a non-integer "
               "or past the 64-bit range)";
  }
  return load_outcome::loaded;
}

load_outcome aof_log::import_redis_dir(const std::string& manifest, std::string& message) {
  // redis-server 7's multi-part log: a manifest naming a base file and incremental ones, each
  // line "file NAME seq N type b|h|i" (h: history, to be deleted). Their records, in order,
  // are the log: replayed, then copied into the server's one file (a truncated end of the last
  // part cut off or refused as in the server's own log).
  const std::string part_dir = manifest.substr(0, manifest.rfind('/'));
  std::string text;
  std::string error;
  if (!read_path(manifest, text, error)) {
    message = "cannot import redis-server's append only files: " + error;
    return load_outcome::failed;
  }
  std::vector<std::string> parts;  // base first, then the incremental files
  std::size_t line_start = 0;
  while (line_start < text.size()) {
    std::size_t eol = text.find('\n', line_start);
    if (eol == std::string::npos) eol = text.size();
    const std::string_view line(text.data() + line_start, eol - line_start);
    line_start = eol + 1;
    std::vector<std::string_view> words;
    for (std::size_t i = 0; i < line.size();) {
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])) != 0) ++i;
      const std::size_t b = i;
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])) == 0) ++i;
      if (i > b) words.push_back(line.substr(b, i - b));
    }
    if (words.empty()) continue;
    std::string_view file;
    std::string_view type;
    for (std::size_t i = 0; i + 1 < words.size(); i += 2) {
      if (words[i] == "file") file = words[i + 1];
      if (words[i] == "type") type = words[i + 1];
    }
    if (file.empty() || type.empty() || file.front() == '"') {
      message = "cannot import redis-server's append only files: a line of " + manifest +
                " this server does not read: '" + std::string(line.substr(0, 200)) + "'";
      return load_outcome::failed;
    }
    if (type == "b") {
      parts.insert(parts.begin(), std::string(file));
    } else if (type == "i") {
      parts.emplace_back(file);
    }
  }
  const auto t0 = steady_ms();
  std::string all;
  std::string cut;
  std::uint64_t records = 0;
  std::uint64_t no_effect = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string path = part_dir + "/" + parts[i];
    std::string data;
    if (!read_path(path, data, error)) {
      message = "cannot import redis-server's append only files: " + error;
      return load_outcome::failed;
    }
    if (data.rfind("REDIS", 0) == 0) {
      message = "cannot import redis-server's append only files: " + path +
                " is in RDB format (redis-server's aof-use-rdb-preamble yes, its default), "
                "which this server does not read; in redis-server, CONFIG SET "
                "aof-use-rdb-preamble no and BGREWRITEAOF first";
      return load_outcome::failed;
    }
    const replay_result r = replay_data(m_srv.tree(), data);
    if (r.end == replay_end::corrupt) {
      message = "cannot import redis-server's append only file " + path + ": " + r.what;
      return load_outcome::failed;
    }
    if (r.end == replay_end::truncated && i + 1 < parts.size()) {
      message = "cannot import redis-server's append only files: " + path + " ends in " +
                truncated_what(r, data.size()) + ", and it is not the last of them";
      return load_outcome::failed;
    }
    if (r.end == replay_end::truncated) {
      if (!m_settings.aof_load_truncated) {
        message = "cannot import redis-server's append only files: " + path + " ends in " +
                  truncated_what(r, data.size()) + "; start with --aof-load-truncated yes to "
                  "cut it off there, or run redis-check-aof --fix on it";
        return load_outcome::failed;
      }
      cut = "; " + path + " ended in " + truncated_what(r, data.size()) + ", cut off";
      data.resize(r.cut_at);
    }
    records += r.records;
    no_effect += r.no_effect;
    all += data;
  }
  const std::uint64_t expired = drop_expired(m_srv.tree());
  const std::string temp = m_settings.dir + "/temp-rewriteaof-" + std::to_string(::getpid()) +
                           ".aof";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0) {
    write_all(fd, all, err);
    if (err == 0 && ::fdatasync(fd) != 0) err = errno;
    ::close(fd);
  }
  if (err == 0 && ::rename(temp.c_str(), m_path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(temp.c_str());
    message = "cannot import redis-server's append only files into " + m_path + ": " +
              std::strerror(err);
    return load_outcome::failed;
  }
  fsync_dir(m_settings.dir);
  m_size.store(all.size(), std::memory_order_relaxed);
  m_base_size.store(all.size(), std::memory_order_relaxed);
  message = "DB loaded from redis-server's append only files (" + manifest + ": " +
            std::to_string(parts.size()) + " files, " + std::to_string(records) +
            " records" + cut + "), " +
            std::to_string(m_srv.tree().counters().keys.load(std::memory_order_relaxed)) +
            " keys, " + std::to_string(steady_ms() - t0) + " ms; copied into " + m_path +
            ", which the server goes on with (redis-server's files are left as they were)";
  if (expired != 0) {
    message += "; " + std::to_string(expired) + " keys expired while the server was down";
  }
  if (no_effect != 0) {
    message += "; " + std::to_string(no_effect) + " records changed nothing (an error reply "
               "in Redis too)";
  }
  return load_outcome::loaded;
}

}  // namespace server
