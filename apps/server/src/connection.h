#pragma once
// server::connection — one client: its socket, its unparsed input, its pending output, and the
// batch of pipelined requests in flight.
//
// A connection is driven by one flow at a time, never by two workers at once. The socket is
// registered once, edge-triggered (EPOLLIN | EPOLLOUT | EPOLLET), and `flow` counts the readiness
// events: the poll role adds one per event and spawns a serve task only when it found 0 (no flow
// running). That task reads, parses a batch of requests and dispatches them (replies written at
// once, or key requests submitted to the tree as tasks); the last of the batch's tree tasks to
// finish (`pending` reaches 0) assembles the replies in request order and goes on with the next
// batch (requests already read, a few batches a flow: kv_server::batch_done) or ends the flow:
// it sets `flow` from the count it read when it started back to 0. If
// that fails, events came meanwhile, and the flow hands the connection to the poll role for a fresh
// serve task (as it does when requests are left in its input); no event is lost, and no system
// call is made at the end of a flow (EPOLLONESHOT would need an epoll_ctl to re-arm).
//
// Ordering: requests of one batch run concurrently, so a batch never holds two requests on the
// same key when one of them writes, nor a command that sees the whole store (KEYS, SCAN,
// DBSIZE, FLUSHALL, INFO) beside others: such a request starts the next batch. Replies go out
// in request order.
//
// Memory-ordering contract: everything the dispatching flow and each tree task wrote is visible
// to the flow that takes `pending` to 0 (acq_rel decrements). A flow's end (a release CAS of
// `flow` to 0) happens before the next flow (the poll role's acquire RMW that finds 0, then the
// spawn). A closed connection is freed by the poll role after the epoll_wait round in which it
// last could have seen an event of it (kv_server::close_connection).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "byte_word.h"
#include "resp_parser.h"
#include "resp_writer.h"
#include "string_tree.h"

namespace server {

class kv_server;
class connection;
struct command_spec;

/// One key request of a batch and its part of a reply.
struct op_slot {
  key_op op;
  connection* conn = nullptr;
  std::string out;           ///< the reply, or this key's part of it
  long long result = 0;      ///< integer replies that a multi-key command sums
  std::int64_t expire = 0;   ///< SET / EXPIRE: the deadline (steady ms) or 0
  unsigned flags = 0;        ///< the command's options
  std::uint64_t lsn = 0;     ///< the LSN of the record this request logged (aof.h), or 0
  /// Where this request's log records go instead of the log: a buffer its command (RENAME, a
  /// transaction) writes as one MULTI ... EXEC block when all of it took effect; nullptr: the log.
  std::string* block = nullptr;
  std::string records;       ///< such a buffer, in the command's first request
  std::string stash;         ///< a value carried from one request of a command to another (RENAME)
};

/// The op slots of the batch in flight: addresses stay put while the batch grows (tree tasks
/// point to them), and the storage is kept from one batch to the next (a batch of GETs
/// allocates nothing here once the connection has served one like it).
class op_slots {
 public:
  static constexpr std::size_t chunk = 64;
  /// Chunks kept by clear(); the rest (a batch of huge MSETs) is freed.
  static constexpr std::size_t kept_chunks = 8;

  /// A fresh slot at the end (its reply buffer keeps its capacity).
  op_slot& emplace_back() {
    if (m_size == m_chunks.size() * chunk) {
      m_chunks.push_back(std::make_unique<op_slot[]>(chunk));
    }
    op_slot& s = (*this)[m_size++];
    // Field by field, every field of op_slot (cheaper than a fresh op_slot assigned whole with
    // the reply buffer moved out and back); the buffer keeps its capacity.
    s.op = key_op{};
    s.conn = nullptr;
    s.out.clear();
    s.result = 0;
    s.expire = 0;
    s.flags = 0;
    s.lsn = 0;
    s.block = nullptr;
    s.records.clear();
    s.stash.clear();
    return s;
  }
  op_slot& operator[](std::size_t i) noexcept { return m_chunks[i / chunk][i % chunk]; }
  const op_slot& operator[](std::size_t i) const noexcept { return m_chunks[i / chunk][i % chunk]; }
  [[nodiscard]] std::size_t size() const noexcept { return m_size; }
  void clear() noexcept {
    m_size = 0;
    if (m_chunks.size() > kept_chunks) m_chunks.resize(kept_chunks);
  }

 private:
  std::vector<std::unique_ptr<op_slot[]>> m_chunks;
  std::size_t m_size = 0;
};

/// The keys of the batch in flight and whether a request of the batch writes them: an
/// open-addressing table of views into the connection's input, emptied per batch by a
/// generation count (no pass over the table, no allocation once it has grown).
class batch_key_set {
 public:
  enum class seen : std::uint8_t { no, read, written };

  [[nodiscard]] seen find(std::string_view key) const noexcept {
    if (m_size == 0) return seen::no;
    const std::uint64_t h = hash(key);
    for (std::size_t i = h & (m_table.size() - 1);; i = (i + 1) & (m_table.size() - 1)) {
      const entry& e = m_table[i];
      if (e.gen != m_gen) return seen::no;
      if (e.hash == h && e.key == key) return e.writes ? seen::written : seen::read;
    }
  }
  /// Adds `key`, or marks it written if `writes`.
  void add(std::string_view key, bool writes) { (void)mark(key, writes); }
  /// Adds `key`, or marks it written if `writes`, in one probe; returns what was seen of it
  /// before.
  seen mark(std::string_view key, bool writes) {
    if ((m_size + 1) * 2 > m_table.size()) grow();
    const std::uint64_t h = hash(key);
    for (std::size_t i = h & (m_table.size() - 1);; i = (i + 1) & (m_table.size() - 1)) {
      entry& e = m_table[i];
      if (e.gen != m_gen) {
        e = entry{h, key, writes, m_gen};
        ++m_size;
        return seen::no;
      }
      if (e.hash == h && e.key == key) {
        const seen before = e.writes ? seen::written : seen::read;
        e.writes = e.writes || writes;
        return before;
      }
    }
  }
  void clear() noexcept {
    m_size = 0;
    if (m_table.size() > max_kept) {
      m_table = std::vector<entry>(min_table);
      m_gen = 1;
    } else if (++m_gen == 0) {  // wrapped: no entry may look current
      for (entry& e : m_table) e.gen = 0;
      m_gen = 1;
    }
  }
  /// A cheap 64-bit hash of the key's bytes (8 at a time).
  static std::uint64_t hash(std::string_view key) noexcept {
    std::uint64_t h = 0x9E3779B97F4A7C15ULL ^ key.size();
    std::size_t i = 0;
    for (; i + 8 <= key.size(); i += 8) {
      std::uint64_t w = 0;
      std::memcpy(&w, key.data() + i, 8);
      h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
      h ^= h >> 32;
    }
    if (i < key.size()) {
      const std::uint64_t w = load_bytes(key.data() + i, key.size() - i);
      h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    }
    h ^= h >> 29;
    h *= 0xFF51AFD7ED558CCDULL;
    return h ^ (h >> 32);
  }

 private:
  static constexpr std::size_t min_table = 64;
  static constexpr std::size_t max_kept = 4096;
  struct entry {
    std::uint64_t hash = 0;
    std::string_view key;
    bool writes = false;
    std::uint32_t gen = 0;  ///< in the set iff equal to m_gen
  };
  void grow() {
    std::vector<entry> old = std::move(m_table);
    m_table = std::vector<entry>(old.empty() ? min_table : old.size() * 2);
    const std::uint32_t gen = m_gen;
    m_gen = 1;
    m_size = 0;
    for (const entry& e : old) {
      if (e.gen != gen) continue;
      for (std::size_t i = e.hash & (m_table.size() - 1);; i = (i + 1) & (m_table.size() - 1)) {
        if (m_table[i].gen != m_gen) {
          m_table[i] = entry{e.hash, e.key, e.writes, m_gen};
          ++m_size;
          break;
        }
      }
    }
  }
  std::vector<entry> m_table;
  std::size_t m_size = 0;
  std::uint32_t m_gen = 1;
};

/// How a request's reply is made from its tree requests (finalize in commands.cpp).
enum class reply_kind : std::uint8_t {
  parts,           ///< `reply` then each request's part (one-key commands, direct replies)
  array_of_parts,  ///< an array of the parts (MGET)
  sum,             ///< an integer, the sum of the requests' results (DEL, EXISTS)
  first_part,      ///< the first request's part (RENAME, COPY)
  watch,           ///< +OK, the requests' snapshots added to the connection's watched keys
  ok,              ///< +OK (MSET, FLUSHALL)
  walk_keys,       ///< the keys a walk collected (KEYS)
  walk_scan,       ///< the next cursor and the keys (SCAN)
};

/// One request of a batch.
struct batch_command {
  reply_kind kind = reply_kind::parts;
  const command_spec* spec = nullptr;
  std::size_t first_arg = 0;
  std::size_t nargs = 0;
  std::size_t first_op = 0;
  std::size_t nops = 0;
  std::string reply;  ///< written at dispatch (commands without tree tasks), or assembled
};

/// KEYS, SCAN and FLUSHALL: a walk over the leaves, alone in its batch.
struct walk_state {
  leaf_walk walk;
  connection* conn = nullptr;
  std::string pattern;
  bool has_pattern = false;
  std::size_t count = 0;     ///< SCAN: keys to examine
  std::size_t examined = 0;
  std::vector<std::string> keys;
  std::string next_cursor;   ///< SCAN: the key to start from next time; empty: done
  std::size_t removed = 0;   ///< FLUSHALL
  std::uint64_t lsn = 0;     ///< FLUSHALL: the LSN of its last record (aof.h), or 0
};

class connection {
 public:
  connection(kv_server& server, int socket, std::uint64_t client_id, std::string peer,
             const parse_limits& l)
      : srv(&server), fd(socket), id(client_id), addr(std::move(peer)), parser(l) {}
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection() = default;

  kv_server* srv;
  int fd;
  std::uint64_t id;
  std::string addr;
  std::int64_t created_ms = 0;
  std::atomic<std::int64_t> last_ms{0};  ///< last read (relaxed: the idle timeout's estimate)
  protocol proto = protocol::resp2;
  bool authenticated = false;
  bool close_after_reply = false;
  bool closing = false;

  request_parser parser;
  std::string in;              ///< bytes read; requests from in_pos on are not answered yet
  std::size_t in_pos = 0;
  std::size_t batch_bytes = 0; ///< bytes of in (from in_pos) the current batch parsed
  std::string out;             ///< replies not sent yet, from out_pos on
  std::size_t out_pos = 0;

  // The batch in flight.
  std::vector<std::string_view> args;
  std::vector<batch_command> cmds;
  op_slots ops;               ///< a push never moves the slots tasks point to
  /// The batch's keys, and whether written, from its first writing command on (batch_writes):
  /// before one, the batch only reads, and reads never conflict (dispatch).
  batch_key_set batch_keys;
  bool batch_writes = false;  ///< a command of the batch writes a key: batch_keys is kept
  std::unique_ptr<walk_state> walk;
  /// The batch's single-key requests, submitted together once the batch is parsed
  /// (string_tree::submit_group: answered in the flow's run where their leaves are free).
  std::vector<key_op*> group;
  std::string error_reply;    ///< a protocol error after the batch's replies (then close)
  std::atomic<int> pending{0};
  /// Readiness events counted by the poll role since the last flow ended (0: no flow running).
  std::atomic<std::uint64_t> flow{0};
  /// `flow` as the running flow read it when its serve task started: it ends with a CAS from it.
  std::uint64_t flow_seen = 0;
  /// Batches this flow went on with from the end of the one before (kv_server::batch_done);
  /// reset by each serve task.
  std::uint8_t continued = 0;
  /// The last read stopped at the per-event limit: input may be waiting in the socket.
  bool input_may_remain = false;
  /// The last batch stopped at an incomplete request (its rest has not come yet).
  bool parse_waits = true;
  std::string_view last_command;  ///< the command table's name of the last command
  /// The last command name looked up as the client sent it (up to 16 bytes) and its spec: a
  /// pipeline repeats its command, so the next lookup is one compare (dispatch).
  const command_spec* last_spec = nullptr;
  std::uint8_t last_name_size = 0;  ///< 0: none
  char last_name[16] = {};
  /// The LSN the replies in `out` wait for (aof.h): the batch's last record; 0: none.
  std::uint64_t wait_lsn = 0;

  // MULTI ... EXEC (transaction.cpp). Between MULTI and EXEC or DISCARD commands are checked
  // and queued (their arguments copied); EXEC, alone in its batch, dispatches them at once, and
  // their tree requests make one multi-key request: all take effect at one moment.
  bool in_multi = false;
  bool multi_failed = false;  ///< a queued command was refused: EXEC answers EXECABORT
  std::vector<std::string> queued_args;   ///< the queued commands' arguments, in order
  std::vector<std::size_t> queued_nargs;  ///< arguments of each queued command
  std::size_t queued_bytes = 0;
  /// The arguments of the transaction EXEC runs (the batch's args point into them), kept until
  /// the batch is complete.
  std::vector<std::string> exec_args;
  /// From EXEC's dispatch to the batch's completion: the batch is a transaction (its commands'
  /// requests are collected, not submitted; submit_transaction makes them one request whose
  /// records go to txn_records, op_slot::block).
  bool txn_active = false;
  std::string txn_records;
  /// A watched key as WATCH saw it (transaction.cpp): EXEC runs only if each still is so.
  struct watched_key {
    std::string key;
    bool exists = false;
    std::int64_t expire_ms = 0;
    std::uint64_t value_hash = 0;
    std::size_t value_size = 0;
  };
  std::vector<watched_key> watched;
  std::vector<watched_key> exec_watched;  ///< EXEC's, kept until the batch is complete
  bool txn_aborted = false;  ///< EXEC's check found a watched key changed: the reply is nil
};

}  // namespace server
