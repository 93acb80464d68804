#pragma once
// server::connection — one client: its socket, its unparsed input, its pending output, and the
// batch of pipelined requests in flight.
//
// A connection is driven by one flow at a time, never by two workers at once: the poller turns
// a readiness event (EPOLLONESHOT: the descriptor is disarmed until re-armed) into a serve task;
// that task reads, parses a batch of requests and dispatches them (replies written at once, or
// key requests submitted to the tree as tasks); the last of the batch's tree tasks to finish
// (`pending` reaches 0) assembles the replies in request order and goes on with the next batch
// or re-arms the descriptor. Re-arming is the last thing a flow does with the connection.
//
// Ordering: requests of one batch run concurrently, so a batch never holds two requests on the
// same key when one of them writes, nor a command that sees the whole store (KEYS, SCAN,
// DBSIZE, FLUSHALL, INFO) beside others: such a request starts the next batch. Replies go out
// in request order.
//
// Memory-ordering contract: everything the dispatching flow and each tree task wrote is visible
// to the flow that takes `pending` to 0 (acq_rel decrements).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

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
};

/// How a request's reply is made from its tree requests (finalize in commands.cpp).
enum class reply_kind : std::uint8_t {
  parts,           ///< `reply` then each request's part (one-key commands, direct replies)
  array_of_parts,  ///< an array of the parts (MGET)
  sum,             ///< an integer, the sum of the requests' results (DEL, EXISTS)
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
  std::deque<op_slot> ops;    ///< deque: a push never moves the slots tasks point to
  std::unordered_map<std::string_view, bool> batch_keys;  ///< key -> written in this batch
  std::unique_ptr<walk_state> walk;
  std::string error_reply;    ///< a protocol error after the batch's replies (then close)
  std::atomic<int> pending{0};
  /// Hands the connection from one flow to the next across epoll: a release RMW before each
  /// (re-)arm, an acquire RMW when a serve task starts. The kernel orders the arm before the
  /// event; an RMW reads the latest value, so the serve task synchronizes with the flow before
  /// it (a happens-before that ThreadSanitizer, which does not model epoll, can see).
  std::atomic<std::uint64_t> handoff{0};
  std::string last_command;   ///< CLIENT LIST's cmd=
  /// The LSN the replies in `out` wait for (aof.h): the batch's last record; 0: none.
  std::uint64_t wait_lsn = 0;
};

}  // namespace server
