// MULTI, EXEC, DISCARD, WATCH, UNWATCH: transactions.
//
// Between MULTI and EXEC a connection's commands are checked as dispatch() checks any command
// (it exists, its arity, AUTH, maxmemory, a log that cannot be written) and queued, their
// arguments copied; each is answered +QUEUED, a refused one with its error, and then EXEC
// answers -EXECABORT, as in Redis. EXEC is alone in its batch: it answers with the array header,
// then runs the queued commands' handlers in order (dispatch_queued), each a batch command of
// its own whose reply finalize() writes as usual, so the array's elements are their replies,
// errors included (an error at EXEC, e.g. INCR of a non-number, does not stop the others: Redis
// has no rollback either). Their tree requests are not submitted one by one: EXEC submits them
// all as one multi-key request (string_tree.h, "Multi-key requests"), which applies them in key
// order, equal keys in command order, under its leaves' holds, so the transaction takes effect
// at one moment and no other client sees part of it. Its log records go to the connection's
// txn_records and are written as one MULTI ... EXEC block (commit_block), so a replay
// applies all of it or, cut off by a crash, none.
//
// WATCH takes each key's state (exists, deadline, the value's size and 64-bit hash) when its
// batch completes; EXEC then adds a request per watched key that compares it again in the first
// pass of a two-phase request (string_tree.h, multi_request::decide), under the same holds as
// the transaction's own keys, and if one changed nothing is applied and the reply is nil. A key
// rewritten with the same bytes and deadline counts as unchanged (Redis would abort).
//
// Not supported, refused at queue time (the transaction then fails at EXEC): commands that see
// the whole store or end a batch (KEYS, SCAN, DBSIZE, FLUSHALL, INFO, AUTH, HELLO, SHUTDOWN...),
// those that check keys before they write (RENAME, MSETNX, COPY: their checks would run before
// the commands queued ahead of them), and the server's commands with effects (CONFIG, CLIENT,
// MEMORY, BGREWRITEAOF).
#include <string>
#include <string_view>

#include "command_table.h"
#include "kv_server.h"

namespace server {
namespace {

/// Queued commands' argument bytes (plus 32 a argument) at most: Redis's
/// client-query-buffer-limit default; a client cannot grow the server without bound.
constexpr std::size_t max_queued_bytes = std::size_t{1} << 30;

void reset_transaction(connection& c) {
  c.in_multi = false;
  c.multi_failed = false;
  c.queued_args.clear();
  c.queued_nargs.clear();
  c.queued_bytes = 0;
}

/// DISCARD, EXEC and UNWATCH forget the watched keys.
void unwatch(connection& c) { c.watched.clear(); }

void cmd_multi(call& k) {
  connection& c = *k.conn;
  if (c.in_multi) return k.error("ERR MULTI calls can not be nested");
  reset_transaction(c);
  c.in_multi = true;
  k.reply().ok();
}

void cmd_discard(call& k) {
  connection& c = *k.conn;
  if (!c.in_multi) return k.error("ERR DISCARD without MULTI");
  reset_transaction(c);
  unwatch(c);
  k.reply().ok();
}

void cmd_exec(call& k) {
  connection& c = *k.conn;
  if (!c.in_multi) return k.error("ERR EXEC without MULTI");
  if (c.multi_failed) {
    reset_transaction(c);
    unwatch(c);
    return k.error("EXECABORT Transaction discarded because of previous errors.");
  }
  // The arguments stay where they are until the batch is complete (the requests point into
  // them); the batch's args get views of them.
  c.exec_args = std::move(c.queued_args);
  const std::vector<std::size_t> nargs = std::move(c.queued_nargs);
  reset_transaction(c);
  k.reply().array(nargs.size());
  c.txn_active = true;  // cleared when the batch is complete (kv_server::complete_batch)
  c.txn_records.clear();
  const std::size_t first_op = c.ops.size();
  // The watched keys' checks: requests of EXEC's own command (its reply is the header).
  c.exec_watched = std::move(c.watched);
  unwatch(c);
  add_watch_checks(k);
  std::size_t next = 0;
  for (const std::size_t n : nargs) {
    const std::size_t first_arg = c.args.size();
    for (std::size_t i = 0; i < n; ++i) c.args.emplace_back(c.exec_args[next++]);
    dispatch_queued(*k.srv, c, *k.ctx, first_arg, n);
  }
  submit_transaction(c, *k.ctx, first_op, c.exec_watched.empty() ? nullptr : &decide_watched);
}

void cmd_watch(call& k) {
  if (k.conn->in_multi) return k.error("ERR WATCH inside MULTI is not allowed");
  watch_keys(k);
}

void cmd_unwatch(call& k) {
  unwatch(*k.conn);
  k.reply().ok();
}

}  // namespace

void queue_command(call& k) {
  connection& c = *k.conn;
  // Also refused: the server's commands that change something at once (CONFIG, CLIENT,
  // MEMORY, BGREWRITEAOF...: not `fast`), which EXEC runs as it dispatches, so that a
  // transaction whose watched keys changed would not be undone by the nil reply.
  const bool server_side_effect = k.spec->first_key == 0 && (k.spec->flags & cmd_fast) == 0;
  if ((k.spec->flags & (cmd_whole_store | cmd_ends_batch | cmd_two_phase)) != 0 ||
      server_side_effect) {
    c.multi_failed = true;
    return k.error("ERR '" + std::string(k.spec->name) +
                   "' is not allowed in a transaction by tessera-kv-server");
  }
  std::size_t bytes = 0;
  for (const std::string_view a : k.args) bytes += a.size() + 32;
  if (c.queued_bytes + bytes > max_queued_bytes) {
    c.multi_failed = true;
    return k.error("ERR transaction discarded: its queued commands passed 1 GB");
  }
  c.queued_bytes += bytes;
  for (const std::string_view a : k.args) c.queued_args.emplace_back(a);
  c.queued_nargs.push_back(k.args.size());
  k.reply().simple("QUEUED");
}

const std::vector<command_spec>& transaction_commands() {
  static const std::vector<command_spec> table = {
      {"multi", 1, cmd_fast | cmd_txn_control, 0, 0, 0, &cmd_multi},
      {"exec", 1, cmd_whole_store | cmd_ends_batch | cmd_txn_control, 0, 0, 0, &cmd_exec},
      {"discard", 1, cmd_fast | cmd_txn_control, 0, 0, 0, &cmd_discard},
      {"watch", -2, cmd_fast | cmd_txn_control, 1, -1, 1, &cmd_watch},
      {"unwatch", 1, cmd_fast | cmd_txn_control, 0, 0, 0, &cmd_unwatch},
  };
  return table;
}

}  // namespace server
