#pragma once
// server::aof_log — the server's append-only log, in Redis's AOF format (RESP arrays of write
// commands, one after the other, so redis-check-aof and redis-server read it), replayed at
// start-up, group-committed, and compacted by a rewrite while the server serves.
//
// Records. A write is logged as its effect, from its apply() under the leaf's write latch (so a
// key's records are in the order its writes took effect) and only when it changed something
// (an error reply or a no-op logs nothing): SET key value [PXAT unix-ms] (SET, SETNX, GETSET,
// and INCR/DECR/INCRBY/DECRBY/APPEND as the value they left), MSET k v ... (one record per
// MSET), DEL key ... (DEL, UNLINK: one record with the keys removed; GETDEL, an EXPIRE into the
// past, FLUSHALL: one DEL per leaf), PEXPIREAT key unix-ms, PERSIST key. A multi-key command's
// record is appended from its commit (string_tree.h, "Multi-key requests"): under its last
// leaf's latch while it holds its other leaves, so no write to one of its keys is logged between
// it and the writes it orders itself after or before. Every record assigns what it names outright, so replaying a record on top of a state
// that already has its effect changes nothing: the rewrite relies on it (below).
//
// Group commit. append() copies a record into one buffer (a mutex) and returns its log
// sequence number (LSN: the log's logical length after it). A batch that logged something
// finishes its replies but holds them until is_safe(its LSN): `always` — fdatasync'ed;
// `everysec` — written to the file (it survives the process; fdatasync runs once a second);
// `no` — at once. It parks the connection and calls drain(): one task at a time is the leader
// (an atomic flag), which takes the whole buffer, write()s it in one call, and releases every
// parked connection whose LSN is now safe; the others' records go in its write. A leader leads
// a few rounds at most, then hands on through the poll role (a task spawned from outside begins a
// fresh operation of the epoch mechanism). fdatasync runs on one sync thread (a tessera task
// never blocks for milliseconds): under `always` the leader wakes it, it syncs everything
// written so far (the next group forms in the buffer while the disk works), writes that group
// itself when the leader flag is free (write_group), spawns a task that releases the
// connections now safe, and starts the next fdatasync at once; under everysec it syncs once a
// second.
//
// Errors. A failed write or fdatasync (ENOSPC, EFBIG, EIO, ...) keeps the data in the buffer,
// releases nothing, makes writes answer -MISCONF (reads go on) and is retried every tick (100
// ms) until it succeeds. A log file that is removed or replaced under the server (found by the
// tick) is written to no more; the server rewrites the log from memory once a second until
// that succeeds (e.g. its directory is back).
//
// Rewrite (BGREWRITEAOF, BGSAVE, automatically past auto-aof-rewrite-percentage): every
// record appended from its start on is also kept in a tail buffer; a walk over the tree's
// leaves (read latches, a few leaves per task, each task spawned from outside) writes SET
// records of the live keys to a temp file; then the tail is written after them, the file
// fdatasync'ed, renamed over the log, the directory fsync'ed, and the log goes on in the new
// file. A write that hit a leaf before the walk did is in the snapshot and in the tail:
// harmless, tail records being assignments (append_delta). A crash at any step leaves the
// old log or the new one.
// A rewrite that fails (the directory read-only or full) leaves the old log as it was and is
// retried by the tick after 1 s, then 2, 4, ... up to 60 s, until one succeeds (INFO
// aof_rewrite_scheduled:1 meanwhile); the automatic rewrite waits for the same time.
//
// Memory-ordering contract: once is_safe(lsn) returned true, the log's bytes up to `lsn` were
// written (and under `always` fdatasync'ed) before it returned (acquire loads of the LSNs that
// the leader stores with release after its write/fdatasync returned).
//
//   aof_log log(srv, settings);
//   if (log.load(msg) != load_outcome::loaded) ...;      // before serving: replays the file
//   std::uint64_t lsn = log.append({"SET", key, value}); // from apply(), under the latch
//   if (!log.is_safe(lsn)) log.park(conn);               // the reply waits (drain())

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <tessera/tessera.h>

#include "config.h"

namespace server {

class kv_server;
class connection;

enum class load_outcome : std::uint8_t {
  loaded,  ///< replayed (a truncated last record cut off if aof-load-truncated yes)
  failed,  ///< the server must not start: `message` says what and where
};

enum class rewrite_start : std::uint8_t { started, already_running, failed };

/// What the last write (or fdatasync) of the log did.
enum class write_status : std::uint8_t { ok, failed };

/// The log's path for the settings (dir/appendfilename).
std::string log_path(const settings& s);
/// Appends one RESP array of bulk strings (a record) to `out`.
void encode_command(std::string& out, std::span<const std::string_view> args);
/// Prints "tessera-kv-server: <line>" to the server's log (stdout).
void log_event(const std::string& line);
/// fsync()s a directory (after a file in it was created or renamed); errors are ignored.
void fsync_dir(const std::string& dir);

class aof_log {
 public:
  aof_log(kv_server& srv, const settings& s);
  aof_log(const aof_log&) = delete;
  aof_log& operator=(const aof_log&) = delete;
  ~aof_log();

  /// Opens (or creates) the log and replays it into the tree; no task may run on the tree.
  /// `message` gets the line to print: what was loaded, or what stopped the start and where.
  load_outcome load(std::string& message);

  /// Appends one record (a command and its arguments); returns its LSN. From apply() under the
  /// key's leaf latch. Thread-safe.
  std::uint64_t append(std::initializer_list<std::string_view> args);
  std::uint64_t append(std::span<const std::string_view> args);

  /// Appends a record that changes a value relative to what it was (`APPEND key suffix`), or,
  /// while a rewrite collects its tail, the assignment with the same effect (`SET key value
  /// ...`): a tail record may also be in the rewrite's snapshot, so it must be idempotent. One
  /// decision under the buffer's mutex, the one the rewrite's start takes: a delta appended
  /// before the start is in the old log only, and its write in the snapshot (the walk reads the
  /// leaf after the writer's latch). From apply() under the key's leaf latch. Thread-safe.
  std::uint64_t append_delta(std::span<const std::string_view> delta,
                             std::span<const std::string_view> assignment);

  /// Appends records already encoded (encode_command) as one piece: no other writer's record
  /// comes between them (a transaction's MULTI ... EXEC). Each must be an assignment (see
  /// append_delta: it may also be in a rewrite's snapshot). Returns the LSN of its last byte.
  std::uint64_t append_encoded(std::string_view records);

  /// Whether a reply that waits for `lsn` may go out under the current policy.
  [[nodiscard]] bool is_safe(std::uint64_t lsn) const noexcept;
  /// Holds `c`'s replies until its LSN (c.wait_lsn) is safe, then hands the connection back
  /// (kv_server::resume_flow). The caller's flow ends here: it must not touch `c` after.
  void park(connection& c);
  /// Writes what is buffered if no other task is writing (the leader; see above).
  void drain();

  /// From run()'s thread, every 100 ms (tick): retries after an error, the check that the log file is
  /// still there (once a second), the automatic rewrite.
  void tick();
  /// From the main thread once the runtime is idle: writes and fdatasyncs what is left,
  /// releases the parked connections, abandons a rewrite in progress.
  void shutdown();

  /// Unix seconds of the last rewrite that completed, 0 if none did (LASTSAVE).
  [[nodiscard]] std::int64_t last_save_unix_s() const noexcept {
    return m_last_save_unix_s.load(std::memory_order_relaxed);
  }
  /// -MISCONF text for writes while the log cannot be written, or "" when writes may go on.
  [[nodiscard]] std::string refusal() const;
  rewrite_start start_rewrite(std::string& error);
  /// INFO's "# Persistence" lines.
  [[nodiscard]] std::string info() const;
  void set_policy(fsync_policy p) noexcept { m_policy.store(p, std::memory_order_relaxed); }
  [[nodiscard]] fsync_policy policy() const noexcept {
    return m_policy.load(std::memory_order_relaxed);
  }
  [[nodiscard]] const std::string& path() const noexcept { return m_path; }

 private:
  struct rewrite_state;
  class rewrite_walk;

  load_outcome load_file(std::string& message);
  /// Replays redis-server 7's multi-part log (its manifest's base and incremental files, in
  /// order) and copies it into the server's one file (m_path).
  load_outcome import_redis_dir(const std::string& manifest, std::string& message);
  /// One leader round: the buffer to the file (and fdatasync under `always`).
  void lead_round();
  /// Parked connections whose LSN is safe now, removed from the list.
  std::vector<connection*> take_ready();
  bool has_work();
  void set_failed(int err, const char* what);
  void check_file();
  /// Remembers which file `fd` is (check_file compares the path's with it).
  void note_file(int fd);
  void start_sync_thread();
  void stop_sync_thread();
  void sync_loop();
  /// From the sync thread after an fdatasync under `always`: writes the buffered group (the
  /// next fdatasync's) if no leader is writing; one that is writes it instead.
  void write_group();
  // The rewrite (aof_rewrite.cpp).
  void rewrite_step(tessera::context& ctx);
  void rewrite_chunk_done(tessera::context& ctx);
  void rewrite_finish();
  /// Drops the temp file, the log goes on as before; `retry`: schedule_retry().
  void rewrite_abort(const std::string& why, bool retry = true);
  /// Writes `bytes` (EINTR retried); returns how many were written, `err` the error or 0.
  static std::size_t write_all(int fd, std::string_view bytes, int& err);

  kv_server& m_srv;
  settings m_settings;  ///< the log's settings as at start (dir, names)
  std::string m_path;
  std::atomic<fsync_policy> m_policy;  ///< relaxed: CONFIG SET applies to later checks

  /// The buffer appends go to; m_appended is the LSN of its last byte.
  mutable std::mutex m_buf_mutex;
  std::string m_buf;              // GUARDED_BY(m_buf_mutex)
  std::uint64_t m_appended = 0;   // GUARDED_BY(m_buf_mutex)
  bool m_tail_active = false;     // GUARDED_BY(m_buf_mutex)
  std::string m_tail;             // GUARDED_BY(m_buf_mutex): records since the rewrite began

  /// The leader role: whoever exchanges false -> true writes the log (seq_cst: see drain()).
  std::atomic<bool> m_leading{false};
  std::string m_out;   ///< the leader's bytes not yet written (kept across a failed write)
  int m_fd = -1;       ///< written by the leader; swapped by the rewrite under m_fd_mutex too
  std::mutex m_fd_mutex;
  /// LSNs through which the log is written / fdatasync'ed (release stores, acquire loads).
  std::atomic<std::uint64_t> m_written{0};
  std::atomic<std::uint64_t> m_synced{0};
  /// The sync thread: fdatasync blocks for milliseconds, and a tessera task never blocks (a
  /// worker stuck in it strands the tasks queued on its pool), so one thread does it, as
  /// Redis's bio thread: woken by the leader under `always`, once a second under everysec.
  std::thread m_sync_thread;
  std::mutex m_sync_mutex;
  std::condition_variable m_sync_cv;
  bool m_sync_stop = false;  // GUARDED_BY(m_sync_mutex)
  std::atomic<bool> m_sync_failed{false};  ///< the last fdatasync failed (relaxed)
  std::atomic<bool> m_sync_busy{false};    ///< an fdatasync is running (seq_cst: lead_round)
  std::int64_t m_last_check_ms = 0;     ///< run()'s thread only
  /// The open log's inode and device (relaxed: the open and the rewrite's switch store them
  /// before the rewrite flag clears, which check_file acquires first).
  std::atomic<std::uint64_t> m_file_ino{0};
  std::atomic<std::uint64_t> m_file_dev{0};

  /// Failure state (relaxed: read for replies and INFO; the leader and the tick write it).
  std::atomic<write_status> m_status{write_status::ok};
  std::atomic<int> m_errno{0};
  std::atomic<bool> m_lost{false};  ///< the file was removed or replaced: only a rewrite helps
  // Statistics and sizes (relaxed: INFO and the automatic rewrite's check read estimates).
  std::atomic<std::uint64_t> m_write_calls{0};  ///< write()s of the log (group commits)
  std::atomic<std::uint64_t> m_fsync_calls{0};  ///< fdatasync()s of the log
  std::atomic<std::uint64_t> m_size{0};       ///< the file's size
  std::atomic<std::uint64_t> m_base_size{0};  ///< its size after the last rewrite (or load)

  std::mutex m_wait_mutex;
  std::vector<std::pair<std::uint64_t, connection*>> m_waiters;  // GUARDED_BY(m_wait_mutex)


  // The rewrite: m_rewriting is the claim (acq_rel exchange); m_rw belongs to the rewrite's
  // tasks, which run one after the other.
  std::atomic<bool> m_rewriting{false};
  std::unique_ptr<rewrite_state> m_rw;
  std::atomic<std::uint64_t> m_rewrites{0};  ///< done; check_file compares it (see there)
  std::atomic<bool> m_last_rewrite_ok{true};
  std::atomic<std::int64_t> m_rewrite_started_ms{0};
  std::atomic<std::int64_t> m_last_rewrite_ms{-1};
  /// Unix seconds of the last rewrite that completed (LASTSAVE); 0: none yet.
  std::atomic<std::int64_t> m_last_save_unix_s{0};
  /// A failed rewrite's retry (steady ms; 0: none) and the wait before the next one after it
  /// fails again (relaxed: the rewrite's tasks and the poller's tick, one after the other).
  std::atomic<std::int64_t> m_retry_at_ms{0};
  std::atomic<std::int64_t> m_retry_wait_ms{0};
  /// Schedules the retry of a rewrite that failed.
  void schedule_retry();
};

}  // namespace server
