// server::aof_log's rewrite — see aof.h: a snapshot of the tree taken by a walk over its leaves
// while the server serves, then the tail of the writes made meanwhile, into a temp file that
// replaces the log.
//
//   start ──▶ step ──▶ step ... ──▶ finish
//   (temp file,   (a walk over up to 64 leaves or 1 MiB    (the tail, fdatasync, rename,
//    tail on)      of records, read latches; the chunk      fsync(dir), the new descriptor)
//                  written without them)
//
// Each step is spawned by the poller (a fresh operation of the epoch mechanism, so reclamation
// goes on during a long rewrite); they run one after the other and own rewrite_state.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <thread>
#include <unistd.h>

#include "aof.h"
#include "connection.h"
#include "kv_server.h"

namespace server {
namespace {

constexpr std::size_t chunk_bytes = std::size_t{1} << 20;
constexpr std::size_t chunk_leaves = 64;
/// Tail bytes below which finish() takes the leader role and writes the rest.
constexpr std::size_t tail_settle_bytes = std::size_t{256} * 1024;

}  // namespace

struct aof_log::rewrite_state {
  leaf_walk walk;
  aof_log* log = nullptr;
  int fd = -1;
  std::string temp_path;
  std::string chunk;      ///< records of the current step, written after it
  std::string next_from;  ///< the key the next step starts from
  bool last = false;      ///< the walk reached the last leaf
  std::size_t leaves = 0; ///< visited in the current step
  std::uint64_t keys = 0;
  std::uint64_t bytes = 0;
  std::int64_t unix_offset_ms = 0;  ///< unix ms minus steady ms (PXAT of the deadlines)
};

class aof_log::rewrite_walk {
 public:
  static walk_step visit(leaf_walk& w, leaf_access& a, leaf& l) {
    auto& st = *static_cast<rewrite_state*>(w.user);
    char when[24];
    for (const slot& s : l.slots) {
      if (s.key < w.from) continue;
      if (s.expire_ms != 0 && s.expire_ms <= a.now_ms()) continue;
      if (s.expire_ms != 0) {
        const auto r = std::to_chars(when, when + sizeof(when), s.expire_ms + st.unix_offset_ms);
        const std::string_view args[] = {"SET", s.key, s.value.view(), "PXAT",
                                         std::string_view(when, r.ptr)};
        encode_command(st.chunk, args);
      } else {
        const std::string_view args[] = {"SET", s.key, s.value.view()};
        encode_command(st.chunk, args);
      }
      ++st.keys;
    }
    ++st.leaves;
    if (l.right == nullptr) {
      st.last = true;
      return walk_step::next_leaf;  // the walk ends here
    }
    if (st.chunk.size() >= chunk_bytes || st.leaves >= chunk_leaves) {
      st.next_from = l.high;
      return walk_step::stop;
    }
    return walk_step::next_leaf;
  }

  static void done(leaf_walk& w, tessera::context& ctx) {
    static_cast<rewrite_state*>(w.user)->log->rewrite_chunk_done(ctx);
  }
};

// Here, where rewrite_state is complete.
aof_log::aof_log(kv_server& srv, const settings& s)
    : m_srv(srv), m_settings(s), m_path(log_path(s)), m_policy(s.appendfsync) {}

aof_log::~aof_log() {
  stop_sync_thread();
  if (m_rw && m_rw->fd >= 0) ::close(m_rw->fd);
  if (m_fd >= 0) ::close(m_fd);
}

rewrite_start aof_log::start_rewrite(std::string& error) {
  // acq_rel: the claim; the previous rewrite's state was released before its store(false).
  if (m_rewriting.exchange(true, std::memory_order_acq_rel)) {
    error = "ERR Background append only file rewriting already in progress";
    return rewrite_start::already_running;
  }
  auto st = std::make_unique<rewrite_state>();
  st->log = this;
  std::string dir = m_settings.dir;
  st->temp_path = dir + "/temp-rewriteaof-" + std::to_string(::getpid()) + ".aof";
  st->fd = ::open(st->temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC,
                  0644);
  if (st->fd < 0) {
    error = "ERR cannot create " + st->temp_path + " for the rewrite: " + std::strerror(errno) +
            "; the log goes on as before";
    m_last_rewrite_ok.store(false, std::memory_order_relaxed);
    if (!m_lost.load(std::memory_order_relaxed)) {
      schedule_retry();
      log_event(error.substr(4) + " (retried in " +
                std::to_string(m_retry_wait_ms.load(std::memory_order_relaxed) / 1000) + " s)");
    }
    m_rewriting.store(false, std::memory_order_release);
    return rewrite_start::failed;
  }
  st->unix_offset_ms = unix_offset_ms();
  st->walk.writes = false;
  st->walk.visit = &rewrite_walk::visit;
  st->walk.on_done = &rewrite_walk::done;
  st->walk.user = st.get();
  m_rw = std::move(st);
  m_rewrite_started_ms.store(steady_ms(), std::memory_order_relaxed);
  {
    // From here on every record appended is in the tail too: the snapshot of a leaf taken
    // after this point has every write before it, the tail every write after it.
    const std::lock_guard<std::mutex> lock(m_buf_mutex);
    m_tail.clear();
    m_tail_active = true;
  }
  m_srv.post([this](tessera::context& ctx) { rewrite_step(ctx); });
  return rewrite_start::started;
}

void aof_log::rewrite_step(tessera::context& ctx) {
  m_rw->walk.from = m_rw->next_from;
  m_rw->leaves = 0;
  m_srv.tree().walk(m_rw->walk, ctx);
}

void aof_log::rewrite_chunk_done(tessera::context& /*ctx*/) {
  rewrite_state& st = *m_rw;
  int err = 0;
  write_all(st.fd, st.chunk, err);
  st.bytes += st.chunk.size();
  st.chunk.clear();
  if (err != 0) {
    return rewrite_abort(std::string("writing ") + st.temp_path + ": " + std::strerror(err));
  }
  if (st.last) {
    m_srv.post([this](tessera::context&) { rewrite_finish(); });
  } else {
    m_srv.post([this](tessera::context& c) { rewrite_step(c); });
  }
}

void aof_log::rewrite_finish() {
  rewrite_state& st = *m_rw;
  int err = 0;
  // Most of the tail first, while the log goes on as before.
  for (int i = 0; i < 8; ++i) {
    std::string part;
    {
      const std::lock_guard<std::mutex> lock(m_buf_mutex);
      part.swap(m_tail);
    }
    write_all(st.fd, part, err);
    st.bytes += part.size();
    if (err != 0) {
      return rewrite_abort(std::string("writing ") + st.temp_path + ": " + std::strerror(err));
    }
    if (part.size() < tail_settle_bytes) break;
  }
  // The leader role: nobody writes the old log from here to the switch. The rest of the tail
  // and `end`, the LSN the new file covers, are taken together.
  while (m_leading.exchange(true, std::memory_order_seq_cst)) std::this_thread::yield();
  std::string rest;
  std::uint64_t end = 0;
  {
    const std::lock_guard<std::mutex> lock(m_buf_mutex);
    rest.swap(m_tail);
    m_tail_active = false;
    end = m_appended;
  }
  write_all(st.fd, rest, err);
  st.bytes += rest.size();
  const char* step = "writing";
  if (err == 0 && ::fdatasync(st.fd) != 0) {
    err = errno;
    step = "syncing";
  }
  if (err == 0 && ::rename(st.temp_path.c_str(), m_path.c_str()) != 0) {
    err = errno;
    step = "renaming";
  }
  if (err != 0) {
    m_leading.store(false, std::memory_order_seq_cst);
    rewrite_abort(std::string(step) + " " + st.temp_path + ": " + std::strerror(err));
    return drain();
  }
  fsync_dir(m_settings.dir);
  note_file(st.fd);
  int old = -1;
  {
    const std::lock_guard<std::mutex> lock(m_fd_mutex);
    old = m_fd;
    m_fd = st.fd;
  }
  ::close(old);
  st.fd = -1;
  {
    // What the old log had still to write up to `end` is in the new file (the snapshot or the
    // tail); what was appended after `end` goes on to the new file.
    const std::lock_guard<std::mutex> lock(m_buf_mutex);
    const std::uint64_t after = m_appended - end;
    m_buf.erase(0, m_buf.size() - static_cast<std::size_t>(after));
  }
  m_out.clear();
  m_written.store(end, std::memory_order_release);
  m_synced.store(end, std::memory_order_release);
  m_size.store(st.bytes, std::memory_order_relaxed);
  m_base_size.store(st.bytes, std::memory_order_relaxed);
  const bool was_lost = m_lost.exchange(false, std::memory_order_relaxed);
  const bool was_failed =
      m_status.exchange(write_status::ok, std::memory_order_relaxed) == write_status::failed;
  m_errno.store(0, std::memory_order_relaxed);
  const std::vector<connection*> ready = take_ready();
  m_leading.store(false, std::memory_order_seq_cst);
  for (connection* c : ready) m_srv.resume_flow(*c);

  const std::int64_t took = steady_ms() - m_rewrite_started_ms.load(std::memory_order_relaxed);
  log_event("background append only file rewriting done: " + std::to_string(st.keys) +
            " keys, " + std::to_string(st.bytes) + " bytes, " + std::to_string(took) + " ms" +
            (was_lost || was_failed ? "; the log is writable again, writes are accepted" : ""));
  m_last_rewrite_ms.store(took, std::memory_order_relaxed);
  m_last_rewrite_ok.store(true, std::memory_order_relaxed);
  m_retry_at_ms.store(0, std::memory_order_relaxed);
  m_retry_wait_ms.store(0, std::memory_order_relaxed);
  m_rewrites.fetch_add(1, std::memory_order_relaxed);
  m_last_save_unix_s.store((steady_ms() + unix_offset_ms()) / 1000, std::memory_order_relaxed);
  m_rw.reset();
  // release: the next rewrite's claim sees this one's state gone.
  m_rewriting.store(false, std::memory_order_release);
  drain();
}

void aof_log::schedule_retry() {
  const std::int64_t wait = std::clamp<std::int64_t>(
      m_retry_wait_ms.load(std::memory_order_relaxed) * 2, 1000, 60000);
  m_retry_wait_ms.store(wait, std::memory_order_relaxed);
  m_retry_at_ms.store(steady_ms() + wait, std::memory_order_relaxed);
}

void aof_log::rewrite_abort(const std::string& why, bool retry) {
  {
    const std::lock_guard<std::mutex> lock(m_buf_mutex);
    m_tail_active = false;
    std::string().swap(m_tail);
  }
  if (m_rw->fd >= 0) ::close(m_rw->fd);
  ::unlink(m_rw->temp_path.c_str());
  if (!m_lost.load(std::memory_order_relaxed) && retry) {
    schedule_retry();
    log_event("background append only file rewriting failed, the log goes on as before: " + why +
              " (retried in " +
              std::to_string(m_retry_wait_ms.load(std::memory_order_relaxed) / 1000) + " s)");
  }
  m_last_rewrite_ok.store(false, std::memory_order_relaxed);
  m_rw.reset();
  m_rewriting.store(false, std::memory_order_release);
}

}  // namespace server
