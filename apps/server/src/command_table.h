#pragma once
// The command table's internals, shared by commands.cpp (keys) and server_commands.cpp (the
// connection and the server): a command's spec and what its handler works with.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/tessera.h>

#include "connection.h"
#include "resp_writer.h"

namespace server {

class kv_server;

enum command_flags : unsigned {
  cmd_write = 1,
  cmd_readonly = 2,
  cmd_denyoom = 4,        ///< refused with -OOM above maxmemory
  cmd_fast = 8,
  cmd_whole_store = 16,   ///< sees every key: alone in its batch
  cmd_no_auth = 32,       ///< allowed before AUTH
  cmd_ends_batch = 64,    ///< the batch ends after it (QUIT, SHUTDOWN, HELLO, AUTH)
  cmd_txn_control = 128,  ///< runs at once between MULTI and EXEC (MULTI, EXEC, DISCARD, ...)
  cmd_two_phase = 256,    ///< checks every key before it writes one (RENAME, MSETNX, COPY)
};

inline constexpr std::string_view err_not_integer = "ERR value is not an integer or out of range";
inline constexpr std::string_view err_syntax = "ERR syntax error";
/// A command whose tree request failed (string_tree.h, op_outcome): out of memory, or another
/// exception from its apply.
inline constexpr std::string_view err_out_of_memory = "ERR out of memory";
inline constexpr std::string_view err_request_failed = "ERR internal error";

struct command_spec;

/// One command being dispatched.
struct call {
  kv_server* srv;
  connection* conn;
  tessera::context* ctx;
  std::span<const std::string_view> args;
  batch_command* cmd;
  const command_spec* spec;

  reply_writer reply() { return reply_writer(cmd->reply, conn->proto); }
  void error(std::string_view text) { reply().error(text); }
  void arity_error();
  void cmd_reply_kind(reply_kind k) { cmd->kind = k; }
};

struct command_spec {
  std::string_view name;
  int arity;  ///< as Redis's: n exactly, -n at least n (the name counted)
  unsigned flags;
  int first_key;
  int last_key;  ///< -1: the last argument
  int step;
  void (*handler)(call&);
};

const std::vector<command_spec>& key_commands();
const std::vector<command_spec>& server_commands();
const std::vector<command_spec>& transaction_commands();

/// Between MULTI and EXEC: queues the command `k` (checked already: it exists, its arity, auth,
/// memory), or refuses one that cannot run in a transaction (transaction.cpp).
void queue_command(call& k);
/// A multi-key request's commit whose records went to a buffer (op_slot::block, in its first
/// op's slot): written as one MULTI ... EXEC block; a failed op's reply part is the error.
void commit_block(std::span<key_op* const> ops);
/// EXEC: the requests its commands made (c.ops from first_op on) as one multi-key request,
/// taking effect at one moment; their records are logged as one MULTI ... EXEC block.
/// `decide`: EXEC's check of the watched keys (two passes, string_tree.h), or nullptr.
void submit_transaction(connection& c, tessera::context& ctx, std::size_t first_op,
                        bool (*decide)(std::span<key_op* const>) = nullptr);
/// WATCH key...: each key's state, for EXEC (transaction.cpp).
void watch_keys(call& k);
/// EXEC's requests that check the watched keys (c.exec_watched), before the queued commands'.
void add_watch_checks(call& k);
/// The decision of a transaction with watched keys: false (and the reply nil) if one changed.
bool decide_watched(std::span<key_op* const> ops);
/// Runs a queued command's handler (EXEC): no checks, no batch rules.
void dispatch_queued(kv_server& srv, connection& c, tessera::context& ctx, std::size_t first_arg,
                     std::size_t nargs);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
/// A batch's tree request (or walk) finished: the last one finishes the batch.
void op_done_count(connection& c, tessera::context& ctx);
/// A key request's settle (under the leaf's latch: counts it done; true if it was the batch's
/// last) and on_done (then only for the last: finishes the batch).
bool op_settle(key_op& op);
void op_done_last(key_op& op, tessera::context& ctx);
std::string encode_scan_cursor(std::string_view key);
/// MEMORY USAGE key [SAMPLES count]: a tree request for the key (commands.cpp).
void memory_usage(call& k);

}  // namespace server
