// server::dispatch — see commands.h. The key commands (the string type and the keyspace) are
// here; the connection and server commands in server_commands.cpp.
#include "commands.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "command_table.h"
#include "glob.h"
#include "kv_server.h"

namespace server {
namespace {

// ---- helpers ---------------------------------------------------------------------------------

op_slot& slot_of(key_op& op) { return *static_cast<op_slot*>(op.user); }

reply_writer writer(op_slot& s) { return reply_writer(s.out, s.conn->proto); }

void count_hit(op_slot& s, bool hit) {
  auto& st = s.conn->srv->stats();
  (hit ? st.keyspace_hits : st.keyspace_misses).fetch_add(1, std::memory_order_relaxed);
}

/// Adds a tree request for `key` to the running command and submits it.
op_slot& add_op(call& k, std::string_view key, bool writes, void (*apply)(key_op&, leaf_access&),
                std::string_view arg = {}) {
  connection& c = *k.conn;
  op_slot& s = c.ops.emplace_back();
  s.conn = &c;
  s.op.key = key;
  s.op.writes = writes;
  s.op.apply = apply;
  s.op.on_done = &op_done_last;
  s.op.settle = &op_settle;
  s.op.user = &s;
  s.op.arg = arg;
  ++k.cmd->nops;
  return s;
}

/// Adds the running command's requests to the batch's group, submitted together when the batch
/// is parsed (kv_server::run_batch, string_tree::submit_group). The batch's requests are
/// independent of one another (dispatch), so their order does not matter.
void submit(call& k) {
  connection& c = *k.conn;
  if (c.txn_active) return;  // EXEC submits the transaction's requests together (transaction.cpp)
  // relaxed: the flow's own count (1) keeps `pending` above 0 until the flow's acq_rel
  // decrement, which publishes the slots to the task that finishes the batch.
  c.pending.fetch_add(static_cast<int>(k.cmd->nops), std::memory_order_relaxed);
  for (std::size_t i = 0; i < k.cmd->nops; ++i) {
    c.group.push_back(&c.ops[k.cmd->first_op + i].op);
  }
}

/// op_slot::flags of a request of a multi-key command that runs alone (one key): it logs its
/// own record, as a single-key command does.
constexpr unsigned op_logs_itself = 1;

void multi_done(void* user, tessera::context& ctx) {
  op_done_count(*static_cast<connection*>(user), ctx);
}

/// Submits the requests c.ops[first, first + n) as one multi-key request `r` (string_tree.h;
/// its on_done and user are set here), counted in the batch's pending requests. `block`: where
/// their log records go instead of the log (op_slot::block), or nullptr.
void submit_as_one(connection& c, tessera::context& ctx, std::size_t first, std::size_t n,
                   multi_request r, std::string* block) {
  // The request copies the list (string_tree::submit_multi): a few keys' pointers are made on
  // the stack, more in a vector.
  std::array<key_op*, 16> few{};
  std::vector<key_op*> many;
  std::span<key_op*> ops(few.data(), std::min(n, few.size()));
  if (n > few.size()) {
    many.resize(n);
    ops = std::span<key_op*>(many);
  }
  for (std::size_t i = 0; i < n; ++i) {
    op_slot& s = c.ops[first + i];
    if (block != nullptr) s.block = block;
    ops[i] = &s.op;
  }
  c.pending.fetch_add(1, std::memory_order_relaxed);  // see submit()
  r.on_done = &multi_done;
  r.user = &c;
  c.srv->tree().submit_multi(r, ops, ctx);
}

/// Submits the running command's requests as one multi-key request (string_tree.h): it takes
/// effect at one moment, whichever leaves its keys lie in; `commit` writes its log record. A
/// command on one key is one request, atomic as it is (it logs itself).
void submit_multi(call& k, bool writes, void (*commit)(std::span<key_op* const>)) {
  connection& c = *k.conn;
  if (c.txn_active) {
    // Part of EXEC's one request: each key's write logs its own record there, in the order the
    // writes took effect (a transaction's commands may write one key several times).
    for (std::size_t i = 0; i < k.cmd->nops; ++i) {
      c.ops[k.cmd->first_op + i].flags |= op_logs_itself;
    }
    return;
  }
  if (k.cmd->nops == 1) {
    c.ops[k.cmd->first_op].flags |= op_logs_itself;
    return submit(k);
  }
  submit_as_one(c, *k.ctx, k.cmd->first_op, k.cmd->nops,
                multi_request{.writes = writes, .commit = commit}, nullptr);
}

bool parse_ll(std::string_view s, long long& v) { return parse_integer(s, v); }

std::string to_text(long long v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  (void)ec;
  return std::string(buf, end);
}

// ---- the log (aof.h): each write's effect, from apply() under the leaf's latch ---------------

aof_log* log_of(const op_slot& s) { return s.conn->srv->aof(); }

/// A steady-clock deadline as Unix ms, the form the log keeps (replays are deterministic).
std::string_view unix_text(std::int64_t steady_deadline, char (&buf)[24]) {
  const auto r = std::to_chars(buf, buf + sizeof(buf), steady_deadline + unix_offset_ms());
  return {buf, static_cast<std::size_t>(r.ptr - buf)};
}

/// Logs a write's record: `assignment`, or `delta` where the log allows one
/// (aof_log::append_delta). In a transaction the assignment goes to the transaction's block
/// instead (commit_block writes the block in one piece).
void record(op_slot& s, aof_log& log, std::span<const std::string_view> assignment,
            std::span<const std::string_view> delta = {}) {
  if (s.block != nullptr) {
    encode_command(*s.block, assignment);
    return;
  }
  s.lsn = delta.empty() ? log.append(assignment) : log.append_delta(delta, assignment);
}

/// SET key value [PXAT t]: the slot as the write left it; or `delta` (a record relative to the
/// value before, e.g. APPEND key suffix) where the log allows one (aof_log::append_delta).
void log_value(op_slot& s, const slot& e, std::span<const std::string_view> delta = {}) {
  aof_log* log = log_of(s);
  if (log == nullptr) return;
  char when[24];
  const std::string_view set[] = {"SET", e.key, e.value.view(), "PXAT",
                                  e.expire_ms != 0 ? unix_text(e.expire_ms, when) : ""};
  record(s, *log, std::span<const std::string_view>(set, e.expire_ms != 0 ? 5 : 3), delta);
}

void log_del(op_slot& s, std::string_view key) {
  aof_log* log = log_of(s);
  if (log == nullptr) return;
  const std::string_view del[] = {"DEL", key};
  record(s, *log, del);
}

/// PEXPIREAT key t, or PERSIST key: the slot's deadline as the write left it.
void log_deadline(op_slot& s, const slot& e) {
  aof_log* log = log_of(s);
  if (log == nullptr) return;
  if (e.expire_ms != 0) {
    char when[24];
    const std::string_view at[] = {"PEXPIREAT", e.key, unix_text(e.expire_ms, when)};
    record(s, *log, at);
  } else {
    const std::string_view persist[] = {"PERSIST", e.key};
    record(s, *log, persist);
  }
}

// ---- GET, SET and friends --------------------------------------------------------------------

enum set_flags : unsigned { set_nx = 1, set_xx = 2, set_get = 4, set_keepttl = 8 };

void apply_get(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  const slot* e = a.find(op.key);
  count_hit(s, e != nullptr);
  if (e != nullptr) {
    writer(s).bulk(e->value.view());
  } else {
    writer(s).null();
  }
}

void apply_set(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  const slot* e = a.find(op.key);
  if (((s.flags & set_nx) != 0 && e != nullptr) || ((s.flags & set_xx) != 0 && e == nullptr)) {
    if ((s.flags & set_get) != 0 && e != nullptr) {
      writer(s).bulk(e->value.view());
    } else {
      writer(s).null();
    }
    return;
  }
  if ((s.flags & set_get) != 0) {
    if (e != nullptr) {
      writer(s).bulk(e->value.view());
    } else {
      writer(s).null();
    }
  } else {
    writer(s).ok();
  }
  if (s.expire != 0 && s.expire <= a.now_ms()) {
    // EXAT / PXAT in the past: the key is gone at once (stored, it would linger, counted by
    // DBSIZE, until the sweep or a writer found it).
    if (e != nullptr) {
      a.erase(op.key);
      log_del(s, op.key);
    }
    return;
  }
  log_value(s, a.put(op.key, op.arg, s.expire, (s.flags & set_keepttl) != 0));
}

/// Whether `opt` (upper case) is one of the options that give a deadline: EX, PX, EXAT, PXAT.
bool is_deadline_option(std::string_view opt) {
  return opt == "EX" || opt == "PX" || opt == "EXAT" || opt == "PXAT";
}

enum class deadline_check : std::uint8_t { ok, not_integer, out_of_range };

/// The steady deadline (>= 1) that the option `kind` (EX, PX, EXAT, PXAT) with `text` gives, as
/// Redis's getExpireMillisecondsOrReply decides it; a time in the past is 1 (expired at once).
deadline_check deadline_of(std::string_view kind, std::string_view text, std::int64_t& out) {
  long long v = 0;
  if (!parse_ll(text, v)) return deadline_check::not_integer;
  const bool seconds = kind == "EX" || kind == "EXAT";
  if (v <= 0 || (seconds && v > LLONG_MAX / 1000)) return deadline_check::out_of_range;
  const long long ms = seconds ? v * 1000 : v;
  if (kind == "EX" || kind == "PX") {
    const std::int64_t now = steady_ms();
    if (ms > LLONG_MAX - now) return deadline_check::out_of_range;
    out = now + ms;
  } else {
    out = ms - unix_offset_ms();
    if (out <= 0) out = 1;
  }
  return deadline_check::ok;
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL], parsed as Redis 7.0 does:
/// every option first (one deadline kind, which may repeat: the last counts), then the time.
void cmd_set(call& k) {
  unsigned flags = 0;
  std::string kind;
  std::string_view time;
  for (std::size_t i = 3; i < k.args.size(); ++i) {
    const std::string opt = upper(k.args[i]);
    const bool last = i + 1 == k.args.size();
    if (opt == "NX" && (flags & set_xx) == 0) {
      flags |= set_nx;
    } else if (opt == "XX" && (flags & set_nx) == 0) {
      flags |= set_xx;
    } else if (opt == "GET") {
      flags |= set_get;
    } else if (opt == "KEEPTTL" && kind.empty()) {
      flags |= set_keepttl;
    } else if (is_deadline_option(opt) && !last && (kind.empty() || kind == opt) &&
               (flags & set_keepttl) == 0) {
      kind = opt;
      time = k.args[++i];
    } else {
      return k.error(err_syntax);
    }
  }
  std::int64_t expire = 0;
  if (!kind.empty()) {
    switch (deadline_of(kind, time, expire)) {
      case deadline_check::ok: break;
      case deadline_check::not_integer: return k.error(err_not_integer);
      case deadline_check::out_of_range:
        return k.error("ERR invalid expire time in 'set' command");
    }
  }
  op_slot& s = add_op(k, k.args[1], true, &apply_set, k.args[2]);
  s.flags = flags;
  s.expire = expire;
  submit(k);
}

void cmd_get(call& k) {
  add_op(k, k.args[1], false, &apply_get);
  submit(k);
}

/// SETEX key seconds value, PSETEX key milliseconds value: SET key value EX|PX.
void set_expiring(call& k, long long unit_ms) {
  long long v = 0;
  if (!parse_ll(k.args[2], v)) return k.error(err_not_integer);
  const std::int64_t now = steady_ms();
  if (v <= 0 || v > LLONG_MAX / unit_ms || v * unit_ms > LLONG_MAX - now) {
    return k.error("ERR invalid expire time in '" + lower(k.args[0]) + "' command");
  }
  op_slot& s = add_op(k, k.args[1], true, &apply_set, k.args[3]);
  s.flags = 0;
  s.expire = now + v * unit_ms;
  submit(k);
}

void cmd_setex(call& k) { set_expiring(k, 1000); }
void cmd_psetex(call& k) { set_expiring(k, 1); }

enum getex_flags : unsigned {
  getex_expire = 1,
  getex_persist = 2,
  getex_not_integer = 4,  ///< the time is not a number: an error, for a key that exists
  getex_bad_time = 8,     ///< the time is out of range: an error, for a key that exists
};

void apply_getex(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  slot* e = a.find(op.key);
  count_hit(s, e != nullptr);
  if (e == nullptr) {
    writer(s).null();
    return;
  }
  if ((s.flags & getex_not_integer) != 0) return writer(s).error(err_not_integer);
  if ((s.flags & getex_bad_time) != 0) {
    return writer(s).error("ERR invalid expire time in 'getex' command");
  }
  writer(s).bulk(e->value.view());  // copied: the key may go below
  if ((s.flags & getex_expire) != 0) {
    if (s.expire <= a.now_ms()) {  // a deadline in the past deletes the key, as in Redis
      a.erase(op.key);
      log_del(s, op.key);
    } else {
      a.set_expire(*e, s.expire);
      log_deadline(s, *e);
    }
  } else if ((s.flags & getex_persist) != 0 && e->expire_ms != 0) {
    a.set_expire(*e, 0);
    log_deadline(s, *e);
  }
}

/// GETEX key [EX s | PX ms | EXAT unix-s | PXAT unix-ms | PERSIST], as Redis 7.0 runs it: the
/// options first (one kind, which may repeat: the last counts), then the key (a missing key is
/// answered nil whatever the time says), then the time.
void cmd_getex(call& k) {
  std::string kind;
  std::string_view time;
  for (std::size_t i = 2; i < k.args.size(); ++i) {
    const std::string opt = upper(k.args[i]);
    const bool last = i + 1 == k.args.size();
    if (!kind.empty() && opt != kind) return k.error(err_syntax);
    if (opt == "PERSIST") {
      kind = opt;
    } else if (is_deadline_option(opt) && !last) {
      kind = opt;
      time = k.args[++i];
    } else {
      return k.error(err_syntax);
    }
  }
  unsigned flags = kind.empty() ? 0U : kind == "PERSIST" ? getex_persist : getex_expire;
  std::int64_t expire = 0;
  if (flags == getex_expire) {
    switch (deadline_of(kind, time, expire)) {
      case deadline_check::ok: break;
      case deadline_check::not_integer: flags |= getex_not_integer; break;
      case deadline_check::out_of_range: flags |= getex_bad_time; break;
    }
  }
  op_slot& s = add_op(k, k.args[1], flags != 0, &apply_getex);
  s.flags = flags;
  s.expire = expire;
  submit(k);
}

void apply_setnx(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  if (a.find(op.key) != nullptr) {
    writer(s).integer(0);
    return;
  }
  log_value(s, a.put(op.key, op.arg, 0, false));
  writer(s).integer(1);
}

void cmd_setnx(call& k) {
  add_op(k, k.args[1], true, &apply_setnx, k.args[2]);
  submit(k);
}

void apply_getset(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  const slot* e = a.find(op.key);
  if (e != nullptr) {
    writer(s).bulk(e->value.view());
  } else {
    writer(s).null();
  }
  log_value(s, a.put(op.key, op.arg, 0, false));
}

void cmd_getset(call& k) {
  add_op(k, k.args[1], true, &apply_getset, k.args[2]);
  submit(k);
}

void apply_getdel(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  const slot* e = a.find(op.key);
  count_hit(s, e != nullptr);
  if (e == nullptr) {
    writer(s).null();
    return;
  }
  writer(s).bulk(e->value.view());
  a.erase(op.key);
  log_del(s, op.key);
}

void cmd_getdel(call& k) {
  add_op(k, k.args[1], true, &apply_getdel);
  submit(k);
}

void cmd_mget(call& k) {
  // One GET per key, as one request; the replies form the array in order.
  for (std::size_t i = 1; i < k.args.size(); ++i) add_op(k, k.args[i], false, &apply_get);
  k.cmd_reply_kind(reply_kind::array_of_parts);
  submit_multi(k, false, nullptr);
}

void apply_mset_one(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  const slot& e = a.put(op.key, op.arg, 0, false);
  if ((s.flags & op_logs_itself) != 0) log_value(s, e);
}

/// MSET's one record, every key and value (in key order), once all are written.
void commit_mset(std::span<key_op* const> ops) {
  op_slot& first = slot_of(*ops[0]);
  aof_log* log = log_of(first);
  if (log == nullptr) return;
  std::vector<std::string_view> args;
  args.reserve(1 + 2 * ops.size());
  args.emplace_back("MSET");
  for (const key_op* op : ops) {
    args.push_back(op->key);
    args.push_back(op->arg);
  }
  first.lsn = log->append(args);
}

void cmd_mset(call& k) {
  if (k.args.size() % 2 == 0) return k.arity_error();
  // One request per pair given: the tree applies them in key order, equal keys in the order
  // given (string_tree::submit_multi's sort is stable), so the last value given for a key stays
  // (MSET a 1 a 2 leaves a = 2), and the log's record lists them in that order.
  for (std::size_t i = 1; i < k.args.size(); i += 2) {
    add_op(k, k.args[i], true, &apply_mset_one, k.args[i + 1]);
  }
  k.cmd_reply_kind(reply_kind::ok);
  submit_multi(k, true, &commit_mset);
}

void apply_del_one(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  s.result = a.erase(op.key) ? 1 : 0;
  if (s.result != 0 && (s.flags & op_logs_itself) != 0) log_del(s, op.key);
}

/// DEL's one record: the keys it removed (none: no record).
void commit_del(std::span<key_op* const> ops) {
  op_slot& first = slot_of(*ops[0]);
  aof_log* log = log_of(first);
  if (log == nullptr) return;
  std::vector<std::string_view> args;
  args.emplace_back("DEL");
  for (key_op* op : ops) {
    if (slot_of(*op).result != 0) args.push_back(op->key);
  }
  if (args.size() > 1) first.lsn = log->append(args);
}

void cmd_del(call& k) {
  for (std::size_t i = 1; i < k.args.size(); ++i) add_op(k, k.args[i], true, &apply_del_one);
  k.cmd_reply_kind(reply_kind::sum);
  submit_multi(k, true, &commit_del);
}

void apply_exists_one(key_op& op, leaf_access& a) {
  slot_of(op).result = a.find(op.key) != nullptr ? 1 : 0;
}

void cmd_exists(call& k) {
  for (std::size_t i = 1; i < k.args.size(); ++i) add_op(k, k.args[i], false, &apply_exists_one);
  k.cmd_reply_kind(reply_kind::sum);
  submit_multi(k, false, nullptr);
}

void apply_memory_usage(key_op& op, leaf_access& a) {
  const slot* e = a.find(op.key);
  if (e == nullptr) return writer(slot_of(op)).null();
  // As used_memory counts a key (leaf_access::put): its bytes, its value's, the slot's share.
  writer(slot_of(op)).integer(static_cast<long long>(e->key.size() + e->value.size()) +
                              string_tree::slot_overhead);
}

void apply_type(key_op& op, leaf_access& a) {
  writer(slot_of(op)).simple(a.find(op.key) != nullptr ? "string" : "none");  // the one type
}

void cmd_type(call& k) {
  add_op(k, k.args[1], false, &apply_type);
  submit(k);
}

// ---- INCR family, APPEND, STRLEN ----------------------------------------------------------

void apply_incrby(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  const slot* e = a.find(op.key);
  long long v = 0;
  if (e != nullptr && !parse_integer(e->value.view(), v)) {
    writer(s).error(err_not_integer);
    return;
  }
  const long long by = op.number;
  if ((by < 0 && v < 0 && by < LLONG_MIN - v) || (by > 0 && v > 0 && by > LLONG_MAX - v)) {
    writer(s).error("ERR increment or decrement would overflow");
    return;
  }
  v += by;
  log_value(s, a.put(op.key, to_text(v), 0, true));
  writer(s).integer(v);
}

void incr_by(call& k, long long by) {
  op_slot& s = add_op(k, k.args[1], true, &apply_incrby);
  s.op.number = by;
  submit(k);
}

void cmd_incr(call& k) { incr_by(k, 1); }
void cmd_decr(call& k) { incr_by(k, -1); }

void cmd_incrby(call& k) {
  long long by = 0;
  if (!parse_ll(k.args[2], by)) return k.error(err_not_integer);
  incr_by(k, by);
}

void cmd_decrby(call& k) {
  long long by = 0;
  if (!parse_ll(k.args[2], by)) return k.error(err_not_integer);
  if (by == LLONG_MIN) return k.error("ERR decrement would overflow");
  incr_by(k, -by);
}

/// Redis's MAX_LONG_DOUBLE_CHARS: the longest float text it reads or writes, plus one.
constexpr std::size_t max_float_chars = std::size_t{5} * 1024;

/// Redis's string2ld: the whole text a finite or infinite number (no NaN), no leading space.
bool parse_long_double(std::string_view text, long double& v) {
  if (text.empty() || text.size() >= max_float_chars ||
      std::isspace(static_cast<unsigned char>(text[0])) != 0) {
    return false;
  }
  const std::string z(text);  // strtold needs the terminator
  char* end = nullptr;
  errno = 0;
  v = std::strtold(z.c_str(), &end);
  if (end != z.c_str() + z.size() || std::isnan(v)) return false;
  if (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || v == 0.0L)) return false;
  return true;
}

/// As Redis writes a float it computed (ld2string, LD_STR_HUMAN): %.17Lf, trailing zeros and
/// point dropped, "-0" as "0".
std::string float_text(long double v) {
  std::array<char, max_float_chars> buf{};
  int n = std::snprintf(buf.data(), buf.size(), "%.17Lf", v);
  if (n <= 0 || static_cast<std::size_t>(n) >= buf.size()) return "0";
  if (std::memchr(buf.data(), '.', static_cast<std::size_t>(n)) != nullptr) {
    while (buf[static_cast<std::size_t>(n) - 1] == '0') --n;
    if (buf[static_cast<std::size_t>(n) - 1] == '.') --n;
  }
  if (n == 2 && buf[0] == '-' && buf[1] == '0') return "0";
  return std::string(buf.data(), static_cast<std::size_t>(n));
}

void apply_incrbyfloat(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  const slot* e = a.find(op.key);
  long double v = 0;
  long double by = 0;
  if ((e != nullptr && !parse_long_double(e->value.view(), v)) ||
      !parse_long_double(op.arg, by)) {
    writer(s).error("ERR value is not a valid float");
    return;
  }
  v += by;
  if (std::isnan(v) || std::isinf(v)) {
    writer(s).error("ERR increment would produce NaN or Infinity");
    return;
  }
  const slot& now = a.put(op.key, float_text(v), 0, true);
  log_value(s, now);
  writer(s).bulk(now.value.view());
}

void cmd_incrbyfloat(call& k) {
  long double by = 0;
  if (!parse_long_double(k.args[2], by)) return k.error("ERR value is not a valid float");
  add_op(k, k.args[1], true, &apply_incrbyfloat, k.args[2]);
  submit(k);
}

void apply_append(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  const slot* e = a.find(op.key);
  std::string v = e != nullptr ? std::string(e->value.view()) : std::string();
  if (v.size() + op.arg.size() > s.conn->parser.limits().max_bulk_len) {
    writer(s).error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    return;
  }
  const bool existed = e != nullptr;
  v.append(op.arg);
  const auto len = static_cast<long long>(v.size());
  // A live key's record is the suffix alone, so many appends to one key grow the log by what
  // was appended; the replay appends to the same value and keeps its deadline. A new key (or
  // one whose value had expired) is logged as the SET it amounts to.
  const std::string_view delta[] = {"APPEND", op.key, op.arg};
  log_value(s, a.put(op.key, std::move(v), 0, true),
            existed ? std::span<const std::string_view>(delta) : std::span<const std::string_view>());
  writer(s).integer(len);
}

void cmd_append(call& k) {
  add_op(k, k.args[1], true, &apply_append, k.args[2]);
  submit(k);
}

void apply_strlen(key_op& op, leaf_access& a) {
  const slot* e = a.find(op.key);
  writer(slot_of(op)).integer(e != nullptr ? static_cast<long long>(e->value.view().size()) : 0);
}

void cmd_strlen(call& k) {
  add_op(k, k.args[1], false, &apply_strlen);
  submit(k);
}

void apply_getrange(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  const slot* e = a.find(op.key);
  const std::string_view v = e != nullptr ? e->value.view() : std::string_view();
  const auto len = static_cast<long long>(v.size());
  long long start = op.number;
  long long end = s.expire;  // (the end index; GETRANGE has no deadline)
  // Redis's getrangeCommand, step by step: negative indexes count from the end.
  if (start < 0 && end < 0 && start > end) return writer(s).bulk({});
  if (start < 0) start += len;
  if (end < 0) end += len;
  start = std::max(start, 0LL);
  end = std::max(end, 0LL);
  if (end >= len) end = len - 1;
  if (start > end || len == 0) return writer(s).bulk({});
  writer(s).bulk(
      v.substr(static_cast<std::size_t>(start), static_cast<std::size_t>(end - start + 1)));
}

/// GETRANGE key start end (and its old name SUBSTR)
void cmd_getrange(call& k) {
  long long start = 0;
  long long end = 0;
  if (!parse_ll(k.args[2], start) || !parse_ll(k.args[3], end)) return k.error(err_not_integer);
  op_slot& s = add_op(k, k.args[1], false, &apply_getrange);
  s.op.number = start;
  s.expire = end;
  submit(k);
}

void apply_setrange(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  const slot* e = a.find(op.key);
  const auto offset = static_cast<std::size_t>(op.number);
  if (op.arg.empty()) {  // nothing written, nothing created: the length as it is
    writer(s).integer(e != nullptr ? static_cast<long long>(e->value.view().size()) : 0);
    return;
  }
  if (offset + op.arg.size() > s.conn->parser.limits().max_bulk_len) {
    writer(s).error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    return;
  }
  std::string v = e != nullptr ? std::string(e->value.view()) : std::string();
  if (v.size() < offset + op.arg.size()) v.resize(offset + op.arg.size(), '\0');
  v.replace(offset, op.arg.size(), op.arg);
  const auto len = static_cast<long long>(v.size());
  log_value(s, a.put(op.key, std::move(v), 0, true));
  writer(s).integer(len);
}

/// SETRANGE key offset value: zero bytes pad the value up to `offset`; the deadline stays.
void cmd_setrange(call& k) {
  long long offset = 0;
  if (!parse_ll(k.args[2], offset)) return k.error(err_not_integer);
  if (offset < 0) return k.error("ERR offset is out of range");
  op_slot& s = add_op(k, k.args[1], true, &apply_setrange, k.args[3]);
  s.op.number = offset;
  submit(k);
}

// ---- expiry ---------------------------------------------------------------------------------

enum expire_flags : unsigned { exp_nx = 1, exp_xx = 2, exp_gt = 4, exp_lt = 8 };

void apply_expire(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  slot* e = a.find(op.key);
  if (e == nullptr) {
    writer(s).integer(0);
    return;
  }
  const std::int64_t old = e->expire_ms;
  const std::int64_t now = a.now_ms();
  // An absent deadline counts as infinite for GT / LT, as in Redis.
  if (((s.flags & exp_nx) != 0 && old != 0) || ((s.flags & exp_xx) != 0 && old == 0) ||
      ((s.flags & exp_gt) != 0 && (old == 0 || s.expire <= old)) ||
      ((s.flags & exp_lt) != 0 && old != 0 && s.expire >= old)) {
    writer(s).integer(0);
    return;
  }
  if (s.expire <= now) {
    a.erase(op.key);  // a deadline in the past deletes the key
    log_del(s, op.key);
  } else {
    a.set_expire(*e, s.expire);
    log_deadline(s, *e);
  }
  writer(s).integer(1);
}

/// EXPIRE and PEXPIRE (a time from now), EXPIREAT and PEXPIREAT (a Unix time), in units of
/// `unit_ms`, with NX | XX | GT | LT.
void expire_in(call& k, long long unit_ms, bool absolute = false) {
  // The options first, then the time, as Redis 7.0 parses them.
  unsigned flags = 0;
  for (std::size_t i = 3; i < k.args.size(); ++i) {
    const std::string opt = upper(k.args[i]);
    if (opt == "NX") {
      flags |= exp_nx;
    } else if (opt == "XX") {
      flags |= exp_xx;
    } else if (opt == "GT") {
      flags |= exp_gt;
    } else if (opt == "LT") {
      flags |= exp_lt;
    } else {
      return k.error("ERR Unsupported option " + std::string(k.args[i]));
    }
  }
  if ((flags & exp_nx) != 0 && (flags & (exp_xx | exp_gt | exp_lt)) != 0) {
    return k.error("ERR NX and XX, GT or LT options at the same time are not compatible");
  }
  if ((flags & exp_gt) != 0 && (flags & exp_lt) != 0) {
    return k.error("ERR GT and LT options at the same time are not compatible");
  }
  long long v = 0;
  if (!parse_ll(k.args[2], v)) return k.error(err_not_integer);
  const std::int64_t now = steady_ms();
  // A Unix time `at` is the steady deadline at - offset.
  const std::int64_t offset = absolute ? unix_offset_ms() : 0;
  if ((unit_ms > 1 && (v > LLONG_MAX / unit_ms || v < LLONG_MIN / unit_ms)) ||
      (!absolute && v > 0 && v * unit_ms > LLONG_MAX - now) ||
      (absolute && offset < 0 && v * unit_ms > LLONG_MAX + offset)) {
    return k.error("ERR invalid expire time in '" + lower(k.args[0]) + "' command");
  }
  op_slot& s = add_op(k, k.args[1], true, &apply_expire);
  s.flags = flags;
  const long long at = v * unit_ms;
  if (absolute) {
    s.expire = at <= now + offset ? now - 1 : at - offset;  // now or before: the key goes
  } else {
    s.expire = at <= 0 ? now - 1 : now + at;
  }
  if (s.expire == 0) s.expire = -1;
  submit(k);
}

void cmd_expire(call& k) { expire_in(k, 1000); }
void cmd_pexpire(call& k) { expire_in(k, 1); }
void cmd_expireat(call& k) { expire_in(k, 1000, true); }
void cmd_pexpireat(call& k) { expire_in(k, 1, true); }

enum deadline_flags : unsigned {
  deadline_ms = 1,        ///< PTTL, PEXPIRETIME: in ms, else in seconds
  deadline_absolute = 2,  ///< EXPIRETIME, PEXPIRETIME: as a Unix time, else the time left
};

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 no key, -1 no deadline, else the deadline.
void apply_deadline(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  const slot* e = a.find(op.key);
  if (e == nullptr) {
    writer(s).integer(-2);
  } else if (e->expire_ms == 0) {
    writer(s).integer(-1);
  } else if ((s.flags & deadline_absolute) != 0) {
    const std::int64_t at = e->expire_ms + unix_offset_ms();
    writer(s).integer((s.flags & deadline_ms) != 0 ? at : at / 1000);
  } else {
    const std::int64_t left = std::max<std::int64_t>(e->expire_ms - a.now_ms(), 0);
    writer(s).integer((s.flags & deadline_ms) != 0 ? left : (left + 500) / 1000);
  }
}

void deadline_of_key(call& k, unsigned flags) {
  add_op(k, k.args[1], false, &apply_deadline).flags = flags;
  submit(k);
}

void cmd_ttl(call& k) { deadline_of_key(k, 0); }
void cmd_pttl(call& k) { deadline_of_key(k, deadline_ms); }
void cmd_expiretime(call& k) { deadline_of_key(k, deadline_absolute); }
void cmd_pexpiretime(call& k) { deadline_of_key(k, deadline_absolute | deadline_ms); }

void apply_persist(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  slot* e = a.find(op.key);
  if (e == nullptr || e->expire_ms == 0) {
    writer(s).integer(0);
    return;
  }
  a.set_expire(*e, 0);
  log_deadline(s, *e);
  writer(s).integer(1);
}

void cmd_persist(call& k) {
  add_op(k, k.args[1], true, &apply_persist);
  submit(k);
}

// ---- MSETNX, RENAME, RENAMENX, COPY: every key checked before any is written ---------------

/// Submits the running command's requests as one two-phase request (string_tree.h,
/// multi_request::decide), its records written as one block (commit_block). Not inside a
/// transaction: queue_command refuses such commands (cmd_two_phase).
void submit_two_phase(call& k, bool (*decide)(std::span<key_op* const>)) {
  connection& c = *k.conn;
  submit_as_one(c, *k.ctx, k.cmd->first_op, k.cmd->nops,
                multi_request{.writes = true, .commit = &commit_block, .decide = decide},
                &c.ops[k.cmd->first_op].records);
}

/// MSETNX: all keys absent, or nothing is written; the reply (a sum) is 1 or 0.
bool decide_msetnx(std::span<key_op* const> ops) {
  bool any = false;
  for (key_op* op : ops) any = any || slot_of(*op).result != 0;
  for (key_op* op : ops) slot_of(*op).result = 0;
  if (any) return false;
  slot_of(*ops[0]).result = 1;
  return true;
}

void apply_msetnx_one(key_op& op, leaf_access& a) {
  log_value(slot_of(op), a.put(op.key, op.arg, 0, false));
}

void cmd_msetnx(call& k) {
  if (k.args.size() % 2 == 0) return k.arity_error();
  for (std::size_t i = 1; i < k.args.size(); i += 2) {
    add_op(k, k.args[i], true, &apply_msetnx_one, k.args[i + 1]).op.check = &apply_exists_one;
  }
  k.cmd_reply_kind(reply_kind::sum);
  submit_two_phase(k, &decide_msetnx);
}

enum rename_flags : unsigned {
  rename_source = 1,   ///< the source's request (else the destination's)
  rename_nx = 2,       ///< RENAMENX: not onto an existing key
  rename_copy = 4,     ///< COPY: the source stays
  rename_replace = 8,  ///< COPY ... REPLACE
};

/// The source's value and deadline, to the request's stash and expire.
void check_source(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  const slot* e = a.find(op.key);
  s.result = e != nullptr ? 1 : 0;
  if (e != nullptr) {
    s.stash.assign(e->value.view());
    s.expire = e->expire_ms;
  }
}

/// RENAME, RENAMENX, COPY, as Redis 7.0 decides them; the reply is the source request's part.
bool decide_rename(std::span<key_op* const> ops) {
  op_slot* src = nullptr;
  op_slot* dst = nullptr;
  for (key_op* op : ops) ((slot_of(*op).flags & rename_source) != 0 ? src : dst) = &slot_of(*op);
  const unsigned f = src->flags;
  const bool copy = (f & rename_copy) != 0;
  if (src->result == 0) {
    if (copy) {
      writer(*src).integer(0);
    } else {
      writer(*src).error("ERR no such key");
    }
    return false;
  }
  if (dst == nullptr) {  // RENAME / RENAMENX of a key onto itself
    if ((f & rename_nx) != 0) {
      writer(*src).integer(0);
    } else {
      writer(*src).ok();
    }
    return false;
  }
  if (dst->result != 0 && ((f & rename_nx) != 0 || (copy && (f & rename_replace) == 0))) {
    writer(*src).integer(0);
    return false;
  }
  dst->stash = std::move(src->stash);
  dst->expire = src->expire;
  if ((f & (rename_nx | rename_copy)) != 0) {
    writer(*src).integer(1);
  } else {
    writer(*src).ok();
  }
  return true;
}

void apply_rename_source(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  if ((s.flags & rename_copy) != 0) return;  // COPY keeps it
  a.erase(op.key);
  log_del(s, op.key);
}

void apply_rename_destination(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  log_value(s, a.put(op.key, std::move(s.stash), s.expire, false));
}

void rename_like(call& k, unsigned flags) {
  const bool same = k.args[1] == k.args[2];
  if (same && (flags & rename_copy) != 0) {
    return k.error("ERR source and destination objects are the same");
  }
  op_slot& src = add_op(k, k.args[1], true, &apply_rename_source);
  src.op.check = &check_source;
  src.flags = flags | rename_source;
  if (!same) {
    op_slot& dst = add_op(k, k.args[2], true, &apply_rename_destination);
    dst.op.check = &apply_exists_one;
    dst.flags = flags;
  }
  k.cmd_reply_kind(reply_kind::first_part);
  submit_two_phase(k, &decide_rename);
}

void cmd_rename(call& k) { rename_like(k, 0); }
void cmd_renamenx(call& k) { rename_like(k, rename_nx); }

/// COPY source destination [DB 0] [REPLACE] (one database: DB other than 0 is refused).
void cmd_copy(call& k) {
  unsigned flags = rename_copy;
  for (std::size_t i = 3; i < k.args.size(); ++i) {
    const std::string opt = upper(k.args[i]);
    if (opt == "REPLACE") {
      flags |= rename_replace;
    } else if (opt == "DB" && i + 1 < k.args.size()) {
      long long db = 0;
      if (!parse_ll(k.args[++i], db)) return k.error(err_not_integer);
      if (db != 0) return k.error("ERR DB index is out of range");
    } else {
      return k.error(err_syntax);
    }
  }
  rename_like(k, flags);
}

// ---- the whole keyspace: KEYS, SCAN, FLUSHALL ---------------------------------------------

void walk_done(leaf_walk& w, tessera::context& ctx) {
  auto& st = *static_cast<walk_state*>(w.user);
  op_done_count(*st.conn, ctx);
}

walk_step visit_keys(leaf_walk& w, leaf_access& a, leaf& l) {
  auto& st = *static_cast<walk_state*>(w.user);
  for (const slot& s : l.slots) {
    if (s.key < w.from) continue;
    if (s.expire_ms != 0 && s.expire_ms <= a.now_ms()) continue;
    if (st.count != 0 && st.examined == st.count) {
      st.next_cursor = s.key;
      return walk_step::stop;
    }
    ++st.examined;
    if (!st.has_pattern || glob_match(st.pattern, s.key)) st.keys.push_back(s.key);
  }
  return walk_step::next_leaf;
}

walk_step visit_flush(leaf_walk& w, leaf_access& a, leaf& l) {
  auto& st = *static_cast<walk_state*>(w.user);
  aof_log* log = st.conn->srv->aof();
  if (log != nullptr && !l.slots.empty()) {
    // One DEL of the leaf's keys: exact under concurrent writers to leaves not yet flushed.
    std::vector<std::string_view> args;
    args.reserve(l.slots.size() + 1);
    args.emplace_back("DEL");
    for (const slot& s : l.slots) args.emplace_back(s.key);
    st.lsn = log->append(args);
  }
  while (!l.slots.empty()) {
    a.erase(l.slots.back().key);
    ++st.removed;
  }
  return walk_step::next_leaf;
}

walk_state& start_walk(call& k, bool writes, walk_step (*visit)(leaf_walk&, leaf_access&, leaf&),
                       std::string from) {
  connection& c = *k.conn;
  c.walk = std::make_unique<walk_state>();
  walk_state& st = *c.walk;
  st.conn = &c;
  st.walk.from = std::move(from);
  st.walk.writes = writes;
  st.walk.visit = visit;
  st.walk.on_done = &walk_done;
  st.walk.user = &st;
  return st;
}

void run_walk(call& k) {
  k.conn->pending.fetch_add(1, std::memory_order_relaxed);  // see submit()
  k.srv->tree().walk(k.conn->walk->walk, *k.ctx);
}

void cmd_keys(call& k) {
  walk_state& st = start_walk(k, false, &visit_keys, std::string());
  st.pattern = std::string(k.args[1]);
  st.has_pattern = st.pattern != "*";
  k.cmd_reply_kind(reply_kind::walk_keys);
  run_walk(k);
}

/// SCAN's cursor is the key to go on from, written as a decimal number (clients such as
/// redis-py read cursors as integers): "1" then three digits per byte. "0" starts and ends.
std::string encode_cursor(std::string_view key) {
  std::string r = "1";
  for (const char ch : key) {
    const auto b = static_cast<unsigned char>(ch);
    r += static_cast<char>('0' + b / 100);
    r += static_cast<char>('0' + b / 10 % 10);
    r += static_cast<char>('0' + b % 10);
  }
  return r;
}

bool decode_cursor(std::string_view text, std::string& key) {
  key.clear();
  if (text == "0") return true;
  if (text.empty() || text[0] != '1' || (text.size() - 1) % 3 != 0) return false;
  for (std::size_t i = 1; i < text.size(); i += 3) {
    int v = 0;
    for (std::size_t j = i; j < i + 3; ++j) {
      if (!std::isdigit(static_cast<unsigned char>(text[j]))) return false;
      v = v * 10 + (text[j] - '0');
    }
    if (v > 255) return false;
    key += static_cast<char>(v);
  }
  return true;
}

void cmd_scan(call& k) {
  std::string from;
  if (!decode_cursor(k.args[1], from)) return k.error("ERR invalid cursor");
  std::string pattern;
  bool has_pattern = false;
  long long count = 10;
  bool other_type = false;
  for (std::size_t i = 2; i < k.args.size(); i += 2) {
    const std::string opt = upper(k.args[i]);
    if (i + 1 >= k.args.size()) return k.error(err_syntax);
    if (opt == "MATCH") {
      pattern = std::string(k.args[i + 1]);
      has_pattern = pattern != "*";
    } else if (opt == "COUNT") {
      if (!parse_ll(k.args[i + 1], count)) return k.error(err_not_integer);
      if (count < 1) return k.error(err_syntax);
    } else if (opt == "TYPE") {
      other_type = lower(k.args[i + 1]) != "string";
    } else {
      return k.error(err_syntax);
    }
  }
  walk_state& st = start_walk(k, false, &visit_keys, std::move(from));
  st.pattern = std::move(pattern);
  st.has_pattern = has_pattern;
  st.count = static_cast<std::size_t>(count);
  if (other_type) {
    st.has_pattern = true;
    st.pattern = std::string("[]");  // matches nothing: every key is a string
  }
  k.cmd_reply_kind(reply_kind::walk_scan);
  run_walk(k);
}

void cmd_flushall(call& k) {
  if (k.args.size() > 2) return k.error(err_syntax);
  if (k.args.size() == 2) {
    const std::string mode = upper(k.args[1]);
    if (mode != "ASYNC" && mode != "SYNC") return k.error(err_syntax);
  }
  start_walk(k, true, &visit_flush, std::string());
  k.cmd_reply_kind(reply_kind::ok);
  run_walk(k);
}

void cmd_dbsize(call& k) {
  k.reply().integer(k.srv->tree().counters().keys.load(std::memory_order_relaxed));
}

}  // namespace

// ---- shared with server_commands.cpp ---------------------------------------------------------

std::string upper(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return r;
}

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}

void op_done_count(connection& c, tessera::context& ctx) {
  // acq_rel: the last decrement sees every task's writes to the batch (connection.h).
  if (c.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) c.srv->batch_done(c, ctx);
}

namespace {

/// Sets `s`'s reply part to the error for a failed request (outcome not applied).
void failed_reply(op_slot& s, op_outcome o) {
  s.out.clear();
  writer(s).error(o == op_outcome::out_of_memory ? err_out_of_memory : err_request_failed);
}

/// op_settle of a request whose apply threw: its reply part is the error (finalize: a command
/// made of one request answers with it alone), then the count as for any request. Apart, so that
/// op_settle's common path stays a leaf function (a tail call here).
[[gnu::cold, gnu::noinline]] bool settle_failed(key_op& op) {
  failed_reply(slot_of(op), op.outcome);
  connection& c = *slot_of(op).conn;
  return c.pending.fetch_sub(1, std::memory_order_acq_rel) == 1;
}

}  // namespace

void commit_block(std::span<key_op* const> ops) {
  op_slot& first = slot_of(*ops[0]);
  // An apply that threw: every op's outcome is the failure (string_tree.h), and the commands
  // whose replies are their requests' parts answer with the error.
  for (key_op* op : ops) {
    if (op->outcome != op_outcome::applied) failed_reply(slot_of(*op), op->outcome);
  }
  aof_log* log = first.conn->srv->aof();
  std::string* records = first.block;
  if (log == nullptr || records == nullptr || records->empty()) return;
  std::string block;
  block.reserve(records->size() + 32);
  block.append("*1\r\n$5\r\nMULTI\r\n");
  block.append(*records);
  block.append("*1\r\n$4\r\nEXEC\r\n");
  first.lsn = log->append_encoded(block);
  records->clear();
}

void submit_transaction(connection& c, tessera::context& ctx, std::size_t first_op,
                        bool (*decide)(std::span<key_op* const>)) {
  const std::size_t n = c.ops.size() - first_op;
  if (n == 0) return;
  bool writes = false;
  for (std::size_t i = 0; i < n; ++i) writes = writes || c.ops[first_op + i].op.writes;
  submit_as_one(c, ctx, first_op, n,
                multi_request{.writes = writes, .commit = &commit_block, .decide = decide},
                &c.txn_records);
}

bool op_settle(key_op& op) {
  if (op.outcome != op_outcome::applied) [[unlikely]] return settle_failed(op);
  connection& c = *slot_of(op).conn;
  // acq_rel: as op_done_count. Under the leaf's latch: a request that is not the batch's last
  // is finished here, without a second run of its task; the last finishes the batch after the
  // latch is released (op_done_last).
  return c.pending.fetch_sub(1, std::memory_order_acq_rel) == 1;
}

void op_done_last(key_op& op, tessera::context& ctx) {
  connection& c = *slot_of(op).conn;
  c.srv->batch_done(c, ctx);
}

const std::vector<command_spec>& key_commands() {
  static const std::vector<command_spec> table = {
      {"get", 2, cmd_readonly | cmd_fast, 1, 1, 1, &cmd_get},
      {"set", -3, cmd_write | cmd_denyoom, 1, 1, 1, &cmd_set},
      {"setnx", 3, cmd_write | cmd_denyoom | cmd_fast, 1, 1, 1, &cmd_setnx},
      {"getset", 3, cmd_write | cmd_denyoom | cmd_fast, 1, 1, 1, &cmd_getset},
      {"getdel", 2, cmd_write | cmd_fast, 1, 1, 1, &cmd_getdel},
      {"getex", -2, cmd_write | cmd_fast, 1, 1, 1, &cmd_getex},
      {"setex", 4, cmd_write | cmd_denyoom, 1, 1, 1, &cmd_setex},
      {"psetex", 4, cmd_write | cmd_denyoom, 1, 1, 1, &cmd_psetex},
      {"mget", -2, cmd_readonly | cmd_fast, 1, -1, 1, &cmd_mget},
      {"mset", -3, cmd_write | cmd_denyoom, 1, -1, 2, &cmd_mset},
      {"msetnx", -3, cmd_write | cmd_denyoom | cmd_two_phase, 1, -1, 2, &cmd_msetnx},
      {"rename", 3, cmd_write | cmd_two_phase, 1, 2, 1, &cmd_rename},
      {"renamenx", 3, cmd_write | cmd_fast | cmd_two_phase, 1, 2, 1, &cmd_renamenx},
      {"copy", -3, cmd_write | cmd_denyoom | cmd_two_phase, 1, 2, 1, &cmd_copy},
      {"del", -2, cmd_write, 1, -1, 1, &cmd_del},
      {"unlink", -2, cmd_write | cmd_fast, 1, -1, 1, &cmd_del},
      {"exists", -2, cmd_readonly | cmd_fast, 1, -1, 1, &cmd_exists},
      {"touch", -2, cmd_readonly | cmd_fast, 1, -1, 1, &cmd_exists},
      {"type", 2, cmd_readonly | cmd_fast, 1, 1, 1, &cmd_type},
      {"incr", 2, cmd_write | cmd_denyoom | cmd_fast, 1, 1, 1, &cmd_incr},
      {"decr", 2, cmd_write | cmd_denyoom | cmd_fast, 1, 1, 1, &cmd_decr},
      {"incrby", 3, cmd_write | cmd_denyoom | cmd_fast, 1, 1, 1, &cmd_incrby},
      {"decrby", 3, cmd_write | cmd_denyoom | cmd_fast, 1, 1, 1, &cmd_decrby},
      {"append", 3, cmd_write | cmd_denyoom, 1, 1, 1, &cmd_append},
      {"strlen", 2, cmd_readonly | cmd_fast, 1, 1, 1, &cmd_strlen},
      {"incrbyfloat", 3, cmd_write | cmd_denyoom | cmd_fast, 1, 1, 1, &cmd_incrbyfloat},
      {"getrange", 4, cmd_readonly, 1, 1, 1, &cmd_getrange},
      {"substr", 4, cmd_readonly, 1, 1, 1, &cmd_getrange},
      {"setrange", 4, cmd_write | cmd_denyoom, 1, 1, 1, &cmd_setrange},
      {"expire", -3, cmd_write | cmd_fast, 1, 1, 1, &cmd_expire},
      {"pexpire", -3, cmd_write | cmd_fast, 1, 1, 1, &cmd_pexpire},
      {"expireat", -3, cmd_write | cmd_fast, 1, 1, 1, &cmd_expireat},
      {"pexpireat", -3, cmd_write | cmd_fast, 1, 1, 1, &cmd_pexpireat},
      {"ttl", 2, cmd_readonly | cmd_fast, 1, 1, 1, &cmd_ttl},
      {"pttl", 2, cmd_readonly | cmd_fast, 1, 1, 1, &cmd_pttl},
      {"expiretime", 2, cmd_readonly | cmd_fast, 1, 1, 1, &cmd_expiretime},
      {"pexpiretime", 2, cmd_readonly | cmd_fast, 1, 1, 1, &cmd_pexpiretime},
      {"persist", 2, cmd_write | cmd_fast, 1, 1, 1, &cmd_persist},
      {"keys", 2, cmd_readonly | cmd_whole_store, 0, 0, 0, &cmd_keys},
      {"scan", -2, cmd_readonly | cmd_whole_store, 0, 0, 0, &cmd_scan},
      {"dbsize", 1, cmd_readonly | cmd_fast | cmd_whole_store, 0, 0, 0, &cmd_dbsize},
      {"flushdb", -1, cmd_write | cmd_whole_store, 0, 0, 0, &cmd_flushall},
      {"flushall", -1, cmd_write | cmd_whole_store, 0, 0, 0, &cmd_flushall},
  };
  return table;
}

std::string encode_scan_cursor(std::string_view key) { return encode_cursor(key); }

namespace {

/// A key's state as WATCH compares it: exists, deadline, and the value's size and hash (a
/// value rewritten with the same bytes and deadline counts as unchanged).
void snapshot(op_slot& s, const slot* e) {
  s.result = e != nullptr ? 1 : 0;
  s.expire = e != nullptr ? e->expire_ms : 0;
  const std::string_view v = e != nullptr ? e->value.view() : std::string_view();
  s.op.number = static_cast<std::int64_t>(std::hash<std::string_view>{}(v));
  s.op.index = v.size();
}

void apply_watch(key_op& op, leaf_access& a) { snapshot(slot_of(op), a.find(op.key)); }

void apply_watch_check(key_op& /*op*/, leaf_access& /*a*/) {}  // checked in the first pass

void check_watched(key_op& op, leaf_access& a) {
  op_slot& s = slot_of(op);
  const connection::watched_key& w = s.conn->exec_watched[op.index];
  const slot* e = a.find(op.key);
  const std::string_view v = e != nullptr ? e->value.view() : std::string_view();
  const bool same = (e != nullptr) == w.exists && (e == nullptr || e->expire_ms == w.expire_ms) &&
                    v.size() == w.value_size &&
                    std::hash<std::string_view>{}(v) == w.value_hash;
  s.result = same ? 0 : 1;
}

}  // namespace

void watch_keys(call& k) {
  for (std::size_t i = 1; i < k.args.size(); ++i) add_op(k, k.args[i], false, &apply_watch);
  k.cmd_reply_kind(reply_kind::watch);
  submit_multi(k, false, nullptr);
}

void add_watch_checks(call& k) {
  connection& c = *k.conn;
  for (std::size_t i = 0; i < c.exec_watched.size(); ++i) {
    op_slot& s = add_op(k, c.exec_watched[i].key, false, &apply_watch_check);
    s.op.check = &check_watched;
    s.op.index = i;
  }
}

bool decide_watched(std::span<key_op* const> ops) {
  bool changed = false;
  for (key_op* op : ops) {
    if (op->apply == &apply_watch_check) {
      changed = changed || slot_of(*op).result != 0;
    }
  }
  if (changed) slot_of(*ops[0]).conn->txn_aborted = true;
  return !changed;
}

void memory_usage(call& k) {
  // MEMORY USAGE key [SAMPLES count]: the count is checked as Redis does, and not needed (a
  // value is one string).
  for (std::size_t i = 3; i < k.args.size(); i += 2) {
    if (upper(k.args[i]) != "SAMPLES" || i + 1 == k.args.size()) return k.error(err_syntax);
    long long samples = 0;
    if (!parse_ll(k.args[i + 1], samples)) return k.error(err_not_integer);
    if (samples < 0) return k.error(err_syntax);
  }
  add_op(k, k.args[2], false, &apply_memory_usage);
  submit(k);
}

}  // namespace server
