// server::aof_log — see aof.h: appending, group commit, the fsync policies, write errors.
// Loading is in aof_load.cpp, the rewrite in aof_rewrite.cpp.
#include "aof.h"
#include "resp_writer.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "connection.h"
#include "kv_server.h"

namespace server {
namespace {

/// Rounds one leader leads before it hands on through the poller.
constexpr int leader_rounds = 4;

}  // namespace

void log_event(const std::string& line) {
  std::printf("tessera-kv-server: %s\n", line.c_str());
  std::fflush(stdout);
}

void encode_command(std::string& out, std::span<const std::string_view> args) {
  char num[24];
  const auto put_len = [&](char lead, std::size_t n) {
    out += lead;
    const auto r = std::to_chars(num, num + sizeof(num), n);
    out.append(num, r.ptr);
    out += "\r\n";
  };
  put_len('*', args.size());
  for (const std::string_view a : args) {
    put_len('$', a.size());
    out.append(a);
    out += "\r\n";
  }
}

std::string log_path(const settings& s) {
  std::string p = s.dir;
  if (!p.empty() && p.back() != '/') p += '/';
  return p + s.appendfilename;
}

std::uint64_t aof_log::append(std::initializer_list<std::string_view> args) {
  return append(std::span<const std::string_view>(args.begin(), args.size()));
}

std::uint64_t aof_log::append(std::span<const std::string_view> args) {
  return append_delta(args, args);  // an assignment is its own tail form
}

std::uint64_t aof_log::append_delta(std::span<const std::string_view> delta,
                                    std::span<const std::string_view> assignment) {
  const std::lock_guard<std::mutex> lock(m_buf_mutex);
  const std::size_t at = m_buf.size();
  if (m_tail_active) {
    encode_command(m_buf, assignment);
    m_tail.append(m_buf, at, std::string::npos);
  } else {
    encode_command(m_buf, delta);
  }
  m_appended += m_buf.size() - at;
  return m_appended;
}

std::uint64_t aof_log::append_encoded(std::string_view records) {
  const std::lock_guard<std::mutex> lock(m_buf_mutex);
  m_buf.append(records);
  if (m_tail_active) m_tail.append(records);
  m_appended += records.size();
  return m_appended;
}

bool aof_log::is_safe(std::uint64_t lsn) const noexcept {
  switch (m_policy.load(std::memory_order_relaxed)) {
    case fsync_policy::always: return m_synced.load(std::memory_order_acquire) >= lsn;
    case fsync_policy::everysec: return m_written.load(std::memory_order_acquire) >= lsn;
    case fsync_policy::no: return true;
  }
  return true;
}

void aof_log::park(connection& c) {
  {
    const std::lock_guard<std::mutex> lock(m_wait_mutex);
    m_waiters.emplace_back(c.wait_lsn, &c);
  }
  drain();
}

std::vector<connection*> aof_log::take_ready() {
  std::vector<connection*> ready;
  const std::lock_guard<std::mutex> lock(m_wait_mutex);
  std::size_t kept = 0;
  for (auto& w : m_waiters) {
    if (is_safe(w.first)) {
      ready.push_back(w.second);
    } else {
      m_waiters[kept++] = w;
    }
  }
  m_waiters.resize(kept);
  return ready;
}

bool aof_log::has_work() {
  if (m_status.load(std::memory_order_relaxed) == write_status::failed ||
      m_lost.load(std::memory_order_relaxed)) {
    return false;  // the tick retries
  }
  {
    // seq_cst with the sync thread's clear of m_sync_busy before its task drains: if that
    // drain found this leader in the way, this load comes after the clear (drain()).
    const bool held = m_policy.load(std::memory_order_relaxed) == fsync_policy::always &&
                      m_sync_busy.load(std::memory_order_seq_cst);
    const std::lock_guard<std::mutex> lock(m_buf_mutex);
    if (!m_buf.empty() && !held) return true;
  }
  const std::lock_guard<std::mutex> lock(m_wait_mutex);
  for (const auto& w : m_waiters) {
    if (is_safe(w.first)) return true;
  }
  return false;
}

void aof_log::drain() {
  // The leader role is a flag, not a lock: whoever fails to take it leaves at once, so a
  // connection parked while a leader writes must still be seen. park() queues, then exchanges;
  // the leader clears the flag, then looks for work (has_work, under the same mutexes). Either
  // the leader's look sees the new waiter, or its clear comes first and the parker's exchange
  // (seq_cst, as the clear) makes the parker the next leader.
  for (int round = 0; round < leader_rounds; ++round) {
    if (m_leading.exchange(true, std::memory_order_seq_cst)) return;
    lead_round();
    const std::vector<connection*> ready = take_ready();
    m_leading.store(false, std::memory_order_seq_cst);
    for (connection* c : ready) m_srv.resume_flow(*c);
    if (!has_work()) return;
  }
  m_srv.post([this](tessera::context&) { drain(); });
}

void aof_log::set_failed(int err, const char* what) {
  m_errno.store(err, std::memory_order_relaxed);
  if (m_status.exchange(write_status::failed, std::memory_order_relaxed) == write_status::ok) {
    log_event(std::string("error ") + what + " the append only file " + m_path + ": " +
              std::strerror(err) + "; writes are refused (-MISCONF) until it works again");
  }
}

std::size_t aof_log::write_all(int fd, std::string_view bytes, int& err) {
  std::size_t done = 0;
  err = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    err = n < 0 ? errno : ENOSPC;  // a write of 0 bytes: no room
    break;
  }
  return done;
}

void aof_log::lead_round() {
  if (m_lost.load(std::memory_order_relaxed)) return;  // only a rewrite brings the log back
  // `always` while the sync thread syncs: the records wait in the buffer and go out in one
  // write() when it is done (its task drains), so a group is one write() and one fdatasync.
  if (m_policy.load(std::memory_order_relaxed) == fsync_policy::always &&
      m_sync_busy.load(std::memory_order_seq_cst)) {
    return;
  }
  std::uint64_t end = 0;
  {
    const std::lock_guard<std::mutex> lock(m_buf_mutex);
    if (m_out.empty()) {
      m_out.swap(m_buf);
    } else {
      m_out.append(m_buf);
      m_buf.clear();
    }
    end = m_appended;
  }
  if (!m_out.empty()) {
    int err = 0;
    m_write_calls.fetch_add(1, std::memory_order_relaxed);
    const std::size_t done = write_all(m_fd, m_out, err);
    m_size.fetch_add(done, std::memory_order_relaxed);
    m_out.erase(0, done);
    if (err != 0) {
      // What was written counts; the rest stays for the retry (a record may end half-written
      // in the file meanwhile: it is completed by the retry, or cut off as a truncated tail).
      m_written.store(end - m_out.size(), std::memory_order_release);
      return set_failed(err, "writing");
    }
    m_written.store(end, std::memory_order_release);
  }
  // `always`: the sync thread fdatasyncs what is written now, and releases the waiters.
  if (m_policy.load(std::memory_order_relaxed) == fsync_policy::always &&
      m_synced.load(std::memory_order_relaxed) < m_written.load(std::memory_order_relaxed)) {
    { const std::lock_guard<std::mutex> lock(m_sync_mutex); }  // no lost wake-up: see sync_loop
    m_sync_cv.notify_one();
  }
  if (m_status.load(std::memory_order_relaxed) == write_status::failed) {
    m_status.store(write_status::ok, std::memory_order_relaxed);
    m_errno.store(0, std::memory_order_relaxed);
    log_event("the append only file " + m_path + " is writable again; writes are accepted");
  }
}

void aof_log::note_file(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return;
  m_file_ino.store(st.st_ino, std::memory_order_relaxed);
  m_file_dev.store(st.st_dev, std::memory_order_relaxed);
}

void aof_log::start_sync_thread() {
  m_sync_thread = std::thread([this] { sync_loop(); });
}

void aof_log::stop_sync_thread() {
  if (!m_sync_thread.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(m_sync_mutex);
    m_sync_stop = true;
  }
  m_sync_cv.notify_one();
  m_sync_thread.join();
}

void aof_log::sync_loop() {
  std::int64_t last_ms = steady_ms();
  bool last_failed = false;
  std::unique_lock<std::mutex> lock(m_sync_mutex);
  while (!m_sync_stop) {
    // The leader stores m_written, then takes and drops m_sync_mutex before it notifies: this
    // check (under the mutex) sees the store, or the notification comes after the wait began.
    const fsync_policy p = m_policy.load(std::memory_order_relaxed);
    const std::uint64_t written = m_written.load(std::memory_order_acquire);
    const std::int64_t now = steady_ms();
    const bool policy_due = p == fsync_policy::always ||
                            (p == fsync_policy::everysec && now - last_ms >= 1000);
    const bool due = written > m_synced.load(std::memory_order_relaxed) && policy_due &&
                     (!last_failed || now - last_ms >= 100);
    if (!due) {
      m_sync_cv.wait_for(lock, std::chrono::milliseconds(p == fsync_policy::always ? 100 : 50));
      continue;
    }
    lock.unlock();
    // seq_cst: see lead_round and has_work. What is written from here on waits for the next
    // round (the leader that wrote it notifies again).
    m_sync_busy.store(true, std::memory_order_seq_cst);
    const std::uint64_t target = m_written.load(std::memory_order_acquire);
    int err = 0;
    {
      // The rewrite swaps the descriptor under this mutex: whichever file this is, it holds
      // `written` once synced (the new one was fdatasync'ed up to at least that much).
      const std::lock_guard<std::mutex> fd_lock(m_fd_mutex);
      if (::fdatasync(m_fd) != 0) err = errno;
    }
    m_fsync_calls.fetch_add(1, std::memory_order_relaxed);
    last_ms = steady_ms();
    last_failed = err != 0;
    if (err != 0) {
      m_errno.store(err, std::memory_order_relaxed);
      if (!m_sync_failed.exchange(true, std::memory_order_relaxed)) {
        log_event(std::string("error syncing the append only file ") + m_path + ": " +
                  std::strerror(err) + "; writes are refused (-MISCONF) until it works again");
      }
    } else {
      // A rewrite that finished meanwhile may have moved m_synced further: only forward.
      std::uint64_t cur = m_synced.load(std::memory_order_relaxed);
      while (cur < target &&
             !m_synced.compare_exchange_weak(cur, target, std::memory_order_release,
                                             std::memory_order_relaxed)) {
      }
      if (m_sync_failed.exchange(false, std::memory_order_relaxed)) {
        log_event("the append only file " + m_path + " syncs again; writes are accepted");
      }
    }
    m_sync_busy.store(false, std::memory_order_seq_cst);
    if (p == fsync_policy::always) {
      // The group that formed during this fdatasync goes to the file from here, before the
      // replies are released, so that the next fdatasync starts at once (the loop's next
      // check) instead of after a hand-over to a worker and back: the disk is what bounds
      // `always`, and each hand-over between threads is a wake-up during which it idles.
      if (!last_failed) write_group();
      // The replies that waited: a task spawned from this thread (outside the runtime: a
      // fresh operation) goes on with their connections, while the disk syncs the next group.
      // Spawned after write_group() let go of the leader flag: a connection parked while this
      // thread held it is seen by the task's take_ready() or drain().
      m_srv.runtime().spawn([this](tessera::context&) {
        for (connection* c : take_ready()) m_srv.resume_flow(*c);
        drain();
      });
    }
    lock.lock();
  }
}

void aof_log::write_group() {
  // m_sync_busy is clear (seq_cst) before this exchange: a leader that holds the flag now
  // looks for work after it lets go (has_work, seq_cst), sees the sync thread idle and writes
  // the group itself (lead_round wakes this thread for it).
  if (m_leading.exchange(true, std::memory_order_seq_cst)) return;
  lead_round();
  m_leading.store(false, std::memory_order_seq_cst);
}

void aof_log::check_file() {
  // acquire: a finished rewrite's note_file (before its release of the flag) is seen. A
  // rewrite that switches files while we look is seen by the second look (flag or count).
  if (m_rewriting.load(std::memory_order_acquire)) return;
  const std::uint64_t rewrites = m_rewrites.load(std::memory_order_relaxed);
  struct stat on_disk {};
  const bool same = ::stat(m_path.c_str(), &on_disk) == 0 &&
                    on_disk.st_ino == m_file_ino.load(std::memory_order_relaxed) &&
                    on_disk.st_dev == m_file_dev.load(std::memory_order_relaxed);
  if (same || m_rewriting.load(std::memory_order_acquire) ||
      m_rewrites.load(std::memory_order_relaxed) != rewrites) {
    return;
  }
  if (!m_lost.exchange(true, std::memory_order_relaxed)) {
    log_event("the append only file " + m_path +
              " was removed or replaced; writes are refused (-MISCONF) and the log is rewritten "
              "from memory once a second until that works");
  }
  m_errno.store(ENOENT, std::memory_order_relaxed);
  m_status.store(write_status::failed, std::memory_order_relaxed);
}

void aof_log::tick() {
  const std::int64_t now = steady_ms();
  if (now - m_last_check_ms >= 1000) {
    m_last_check_ms = now;
    check_file();
    if (m_lost.load(std::memory_order_relaxed)) {
      std::string error;
      start_rewrite(error);  // fails (and says so) while the directory is unusable
    }
  }
  const bool failed = m_status.load(std::memory_order_relaxed) == write_status::failed;
  if (failed && !m_lost.load(std::memory_order_relaxed)) {
    // Retry: the leader writes what it kept and clears the state when that works.
    m_srv.post([this](tessera::context&) { drain(); });
  }
  // Stragglers: a leader that handed on, or data buffered under `no` with nobody writing.
  {
    bool pending = false;
    {
      const std::lock_guard<std::mutex> lock(m_buf_mutex);
      pending = !m_buf.empty();
    }
    if (pending && !failed) m_srv.post([this](tessera::context&) { drain(); });
  }
  std::uint64_t pct = 0;
  std::uint64_t min_size = 0;
  {
    const std::lock_guard<std::mutex> lock(m_srv.config_mutex());
    pct = m_srv.config().auto_aof_rewrite_percentage;
    min_size = m_srv.config().auto_aof_rewrite_min_size;
  }
  const std::uint64_t size = m_size.load(std::memory_order_relaxed);
  const std::uint64_t base = m_base_size.load(std::memory_order_relaxed);
  // After a failed rewrite, neither the retry nor the automatic one before its time.
  const std::int64_t retry_at = m_retry_at_ms.load(std::memory_order_relaxed);
  if (failed || m_rewriting.load(std::memory_order_acquire) || (retry_at != 0 && now < retry_at)) {
    return;
  }
  std::string error;
  if (retry_at != 0) {
    if (start_rewrite(error) == rewrite_start::started) {
      log_event("retrying the rewriting of the append only file that failed");
    }
  } else if (pct != 0 && size >= min_size && size > base + base / 100 * pct) {
    if (start_rewrite(error) == rewrite_start::started) {
      log_event("starting automatic rewriting of the append only file (" +
                std::to_string(size) + " bytes, " + std::to_string(base) +
                " after the last rewrite)");
    }
  }
}

void aof_log::shutdown() {
  stop_sync_thread();
  m_srv.runtime().wait_idle();  // a release task the sync thread spawned before it stopped
  // Its next step was posted to a poller that has stopped.
  if (m_rewriting.load(std::memory_order_acquire)) {
    rewrite_abort("the server is shutting down", false);
  }
  while (m_leading.exchange(true, std::memory_order_seq_cst)) {
  }
  lead_round();
  if (m_status.load(std::memory_order_relaxed) == write_status::ok &&
      !m_lost.load(std::memory_order_relaxed) && ::fdatasync(m_fd) == 0) {
    m_synced.store(m_written.load(std::memory_order_relaxed), std::memory_order_release);
  }
  const std::vector<connection*> ready = take_ready();
  m_leading.store(false, std::memory_order_seq_cst);
  for (connection* c : ready) m_srv.resume_flow(*c);
  const std::lock_guard<std::mutex> lock(m_wait_mutex);
  if (!m_waiters.empty()) {
    log_event(std::to_string(m_waiters.size()) +
              " clients' writes could not be logged before the exit; they got no reply");
  }
}

std::string aof_log::refusal() const {
  if (m_status.load(std::memory_order_relaxed) == write_status::ok &&
      !m_lost.load(std::memory_order_relaxed) && !m_sync_failed.load(std::memory_order_relaxed)) {
    return {};
  }
  const int err = m_errno.load(std::memory_order_relaxed);
  return std::string("MISCONF Errors writing to the AOF file: ") + std::strerror(err);
}

std::string aof_log::info() const {
  std::string r;
  const auto line = [&r](std::string_view k, std::string_view v) { append_info_field(r, k, v); };
  const bool rewriting = m_rewriting.load(std::memory_order_relaxed);
  const bool ok = m_status.load(std::memory_order_relaxed) == write_status::ok &&
                  !m_lost.load(std::memory_order_relaxed) &&
                  !m_sync_failed.load(std::memory_order_relaxed);
  std::size_t buffered = 0;
  {
    const std::lock_guard<std::mutex> lock(m_buf_mutex);
    buffered = m_buf.size();
  }
  line("aof_enabled", "1");
  line("aof_rewrite_in_progress", rewriting ? "1" : "0");
  line("aof_rewrite_scheduled",
       m_retry_at_ms.load(std::memory_order_relaxed) != 0 && !rewriting ? "1" : "0");
  line("aof_last_rewrite_time_sec",
       std::to_string(m_last_rewrite_ms.load(std::memory_order_relaxed) < 0
                          ? -1
                          : m_last_rewrite_ms.load(std::memory_order_relaxed) / 1000));
  line("aof_current_rewrite_time_sec",
       rewriting ? std::to_string((steady_ms() - m_rewrite_started_ms.load(
                                                     std::memory_order_relaxed)) / 1000)
                 : "-1");
  line("aof_last_bgrewrite_status",
       m_last_rewrite_ok.load(std::memory_order_relaxed) ? "ok" : "err");
  line("aof_rewrites", std::to_string(m_rewrites.load(std::memory_order_relaxed)));
  line("aof_last_write_status", ok ? "ok" : "err");
  line("aof_last_write_error",
       ok ? std::string() : std::strerror(m_errno.load(std::memory_order_relaxed)));
  line("aof_fsync_policy", std::string(to_string(policy())));
  line("aof_current_size", std::to_string(m_size.load(std::memory_order_relaxed)));
  line("aof_base_size", std::to_string(m_base_size.load(std::memory_order_relaxed)));
  line("aof_buffer_length", std::to_string(buffered));
  line("aof_pending_bio_fsync",
       m_synced.load(std::memory_order_relaxed) < m_written.load(std::memory_order_relaxed)
           ? "1"
           : "0");
  line("aof_delayed_fsync", "0");
  line("aof_write_calls", std::to_string(m_write_calls.load(std::memory_order_relaxed)));
  line("aof_fsync_calls", std::to_string(m_fsync_calls.load(std::memory_order_relaxed)));
  return r;
}

}  // namespace server
