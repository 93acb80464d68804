// server::replay_record — see aof_replay.h: a log's record applied with Redis's semantics.
#include "aof_replay.h"

#include <cctype>
#include <charconv>
#include <chrono>
#include <climits>

#include "resp_parser.h"
#include "string_tree.h"

namespace server {
namespace {

enum class replay_kind : std::uint8_t { set, del, expire, incr, append, setrange, read };

enum expire_cond : unsigned { cond_nx = 1, cond_xx = 2, cond_gt = 4, cond_lt = 8 };

struct replay_op {
  replay_kind kind = replay_kind::set;
  std::string_view value;
  std::int64_t deadline = 0;  ///< steady ms; 0: none
  long long by = 0;           ///< incr; setrange: the offset
  unsigned cond = 0;          ///< expire: expire_cond
  bool keep_ttl = false;
  bool nx = false;
  bool xx = false;
  bool no_effect = false;     ///< out: Redis would have answered an error
  bool found = false;         ///< read: out, the key is live (its value in `copy`)
  std::string copy;           ///< read: out
};

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A Unix-time deadline in ms as a steady-clock one (never 0: 0 means none).
std::int64_t to_steady(long long unix_ms) {
  const std::int64_t offset = unix_offset_ms();  // (the same as the deadline was written with)
  if (unix_ms <= offset) return 1;
  if (offset < 0 && unix_ms > LLONG_MAX + offset) return LLONG_MAX;
  return unix_ms - offset;
}

std::string upper_ascii(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return r;
}

std::string to_text(long long v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return {buf, r.ptr};
}

void apply_set(replay_op& r, std::string_view key, leaf_access& a) {
  const slot* e = a.find(key);
  if ((r.nx && e != nullptr) || (r.xx && e == nullptr)) return;
  a.put(key, r.value, r.deadline, r.keep_ttl);
}

void apply_expire(replay_op& r, std::string_view key, leaf_access& a) {
  slot* e = a.find(key);
  if (e == nullptr) return;
  const std::int64_t old = e->expire_ms;
  const std::int64_t d = r.deadline;
  // As EXPIRE's options in Redis (commands.cpp): no deadline counts as infinite for GT and LT.
  if (((r.cond & cond_nx) != 0 && old != 0) || ((r.cond & cond_xx) != 0 && old == 0) ||
      ((r.cond & cond_gt) != 0 && (old == 0 || d <= old)) ||
      ((r.cond & cond_lt) != 0 && old != 0 && d >= old)) {
    return;
  }
  a.set_expire(*e, d);  // one in the past too: the replay sees no time pass (aof_replay.h)
}

void apply_op(key_op& op, leaf_access& a) {
  replay_op& r = *static_cast<replay_op*>(op.user);
  switch (r.kind) {
    case replay_kind::set: return apply_set(r, op.key, a);
    case replay_kind::del: a.erase(op.key); return;
    case replay_kind::expire: return apply_expire(r, op.key, a);
    case replay_kind::incr: {
      const slot* e = a.find(op.key);
      long long v = 0;
      if ((e != nullptr && !parse_integer(e->value.view(), v)) ||
          (r.by < 0 && v < 0 && r.by < LLONG_MIN - v) ||
          (r.by > 0 && v > 0 && r.by > LLONG_MAX - v)) {
        r.no_effect = true;
        return;
      }
      a.put(op.key, to_text(v + r.by), 0, true);
      return;
    }
    case replay_kind::append: {
      const slot* e = a.find(op.key);
      std::string v = e != nullptr ? std::string(e->value.view()) : std::string();
      v.append(r.value);
      a.put(op.key, std::move(v), 0, true);
      return;
    }
    case replay_kind::read: {  // RENAME, COPY and MSETNX look before they write
      const slot* e = a.find(op.key);
      r.found = e != nullptr;
      if (e != nullptr) {
        r.copy.assign(e->value.view());
        r.deadline = e->expire_ms;
      }
      return;
    }
    case replay_kind::setrange: {  // redis-server logs SETRANGE as itself (the server: a SET)
      const slot* e = a.find(op.key);
      std::string v = e != nullptr ? std::string(e->value.view()) : std::string();
      const auto offset = static_cast<std::size_t>(r.by);
      if (v.size() < offset + r.value.size()) v.resize(offset + r.value.size(), '\0');
      v.replace(offset, r.value.size(), r.value);
      a.put(op.key, std::move(v), 0, true);
      return;
    }
  }
}

void apply_one(string_tree& tree, std::string_view key, replay_op& r) {
  key_op op;
  op.key = key;
  op.writes = true;
  op.apply = &apply_op;
  op.user = &r;
  tree.apply_exclusive(op, 0);  // time 0: nothing expires during the replay
}

/// Parses a time `v` in the unit of `opt` (EX, PX, EXAT, PXAT) into a steady deadline.
bool parse_deadline(std::string_view text, bool seconds, bool absolute, std::int64_t& out) {
  long long v = 0;
  if (!parse_integer(text, v) || v <= 0 || v > LLONG_MAX / 1000) return false;
  const long long ms = seconds ? v * 1000 : v;
  out = absolute ? to_steady(ms) : to_steady(unix_now_ms() + ms);
  return true;
}

}  // namespace

std::uint64_t drop_expired(string_tree& tree) {
  std::uint64_t dropped = 0;
  const std::int64_t now = steady_ms();
  for (leaf* l = tree.leaf_for(std::string_view()); l != nullptr; l = l->right) {
    leaf_access a(tree, *l, true, now);
    for (std::size_t i = l->slots.size(); i-- > 0;) {
      const slot& s = l->slots[i];
      if (s.expire_ms != 0 && s.expire_ms <= now) {
        a.erase(std::string(s.key));
        ++dropped;
      }
    }
  }
  return dropped;
}

std::string record_name(std::string_view arg0) { return upper_ascii(arg0.substr(0, 64)); }

replay_outcome replay_record(string_tree& tree, std::span<const std::string_view> args,
                             std::string& why) {
  const std::string name = record_name(args[0]);
  const std::size_t n = args.size();
  const auto bad = [&](const char* what) {
    why = std::string(what) + " in '" + name + "'";
    return replay_outcome::refused;
  };
  const auto one = [&](replay_op& r) {
    apply_one(tree, args[1], r);
    return r.no_effect ? replay_outcome::no_effect : replay_outcome::applied;
  };
  replay_op r;
  if (name == "SET") {
    if (n < 3) return bad("wrong number of arguments");
    r.value = args[2];
    for (std::size_t i = 3; i < n; ++i) {
      const std::string opt = upper_ascii(args[i]);
      if (opt == "NX") {
        r.nx = true;
      } else if (opt == "XX") {
        r.xx = true;
      } else if (opt == "GET") {
      } else if (opt == "KEEPTTL") {
        r.keep_ttl = true;
      } else if ((opt == "EX" || opt == "PX" || opt == "EXAT" || opt == "PXAT") && i + 1 < n) {
        if (!parse_deadline(args[++i], opt == "EX" || opt == "EXAT",
                            opt == "EXAT" || opt == "PXAT", r.deadline)) {
          return bad("a bad expire time");
        }
      } else {
        return bad("a syntax error");
      }
    }
    return one(r);
  }
  if (name == "SETNX" || name == "GETSET") {
    if (n != 3) return bad("wrong number of arguments");
    r.value = args[2];
    r.nx = name == "SETNX";
    return one(r);
  }
  if (name == "SETEX" || name == "PSETEX") {
    if (n != 4) return bad("wrong number of arguments");
    if (!parse_deadline(args[2], name == "SETEX", false, r.deadline)) {
      return bad("a bad expire time");
    }
    r.value = args[3];
    return one(r);
  }
  if (name == "MSET") {
    if (n < 3 || n % 2 == 0) return bad("wrong number of arguments");
    for (std::size_t i = 1; i + 1 < n; i += 2) {
      replay_op m;
      m.value = args[i + 1];
      apply_one(tree, args[i], m);
    }
    return replay_outcome::applied;
  }
  if (name == "DEL" || name == "UNLINK" || name == "GETDEL") {
    if (n < 2 || (name == "GETDEL" && n != 2)) return bad("wrong number of arguments");
    r.kind = replay_kind::del;
    for (std::size_t i = 1; i < n; ++i) apply_one(tree, args[i], r);
    return replay_outcome::applied;
  }
  if (name == "INCR" || name == "DECR" || name == "INCRBY" || name == "DECRBY") {
    const bool by = name == "INCRBY" || name == "DECRBY";
    if (n != (by ? 3U : 2U)) return bad("wrong number of arguments");
    r.kind = replay_kind::incr;
    r.by = 1;
    if (by && !parse_integer(args[2], r.by)) return bad("a bad increment");
    if (name[0] == 'D') {
      if (r.by == LLONG_MIN) return replay_outcome::no_effect;  // Redis: would overflow
      r.by = -r.by;
    }
    return one(r);
  }
  if (name == "APPEND") {
    if (n != 3) return bad("wrong number of arguments");
    r.kind = replay_kind::append;
    r.value = args[2];
    return one(r);
  }
  // RENAME, RENAMENX, COPY and MSETNX, as redis-server logs them (the server logs their effects).
  if (name == "RENAME" || name == "RENAMENX" || name == "COPY") {
    const bool copy = name == "COPY";
    bool replace = false;
    if (n < 3 || (!copy && n != 3)) return bad("wrong number of arguments");
    for (std::size_t i = 3; i < n; ++i) {
      const std::string opt = upper_ascii(args[i]);
      if (opt == "REPLACE") {
        replace = true;
      } else if (opt == "DB" && i + 1 < n && args[i + 1] == "0") {
        ++i;
      } else {
        return bad("an option other than REPLACE and DB 0");
      }
    }
    replay_op src;
    src.kind = replay_kind::read;
    apply_one(tree, args[1], src);
    if (!src.found || args[1] == args[2]) return replay_outcome::no_effect;
    replay_op dst;
    dst.kind = replay_kind::read;
    apply_one(tree, args[2], dst);
    if (dst.found && (name == "RENAMENX" || (copy && !replace))) return replay_outcome::no_effect;
    replay_op put;
    put.value = src.copy;
    put.deadline = src.deadline;
    apply_one(tree, args[2], put);
    if (!copy) {
      replay_op del;
      del.kind = replay_kind::del;
      apply_one(tree, args[1], del);
    }
    return replay_outcome::applied;
  }
  if (name == "MSETNX") {
    if (n < 3 || n % 2 == 0) return bad("wrong number of arguments");
    for (std::size_t i = 1; i + 1 < n; i += 2) {
      replay_op check;
      check.kind = replay_kind::read;
      apply_one(tree, args[i], check);
      if (check.found) return replay_outcome::no_effect;
    }
    for (std::size_t i = 1; i + 1 < n; i += 2) {
      replay_op m;
      m.value = args[i + 1];
      apply_one(tree, args[i], m);
    }
    return replay_outcome::applied;
  }
  if (name == "SETRANGE") {
    if (n != 4) return bad("wrong number of arguments");
    // Redis logs only a SETRANGE that wrote something, within proto-max-bulk-len (512 MB).
    if (!parse_integer(args[2], r.by) || r.by < 0 || r.by > (512LL << 20)) {
      return bad("a bad offset");
    }
    if (args[3].empty()) return replay_outcome::no_effect;
    r.kind = replay_kind::setrange;
    r.value = args[3];
    return one(r);
  }
  if (name == "PEXPIREAT" || name == "EXPIREAT" || name == "PEXPIRE" || name == "EXPIRE") {
    if (n < 3) return bad("wrong number of arguments");
    long long v = 0;
    if (!parse_integer(args[2], v) || v > LLONG_MAX / 1000 || v < LLONG_MIN / 1000) {
      return bad("a bad expire time");
    }
    if (name == "EXPIREAT" || name == "EXPIRE") v *= 1000;
    if (name == "PEXPIRE" || name == "EXPIRE") v += unix_now_ms();
    for (std::size_t i = 3; i < n; ++i) {
      const std::string opt = upper_ascii(args[i]);
      if (opt == "NX") {
        r.cond |= cond_nx;
      } else if (opt == "XX") {
        r.cond |= cond_xx;
      } else if (opt == "GT") {
        r.cond |= cond_gt;
      } else if (opt == "LT") {
        r.cond |= cond_lt;
      } else {
        return bad("an unsupported option");
      }
    }
    r.kind = replay_kind::expire;
    r.deadline = to_steady(v);
    return one(r);
  }
  if (name == "PERSIST") {
    if (n != 2) return bad("wrong number of arguments");
    r.kind = replay_kind::expire;  // deadline 0: none
    return one(r);
  }
  if (name == "FLUSHALL" || name == "FLUSHDB") {
    for (leaf* l = tree.leaf_for(std::string_view()); l != nullptr; l = l->right) {
      leaf_access a(tree, *l, true, 0);
      while (!l->slots.empty()) a.erase(std::string(l->slots.back().key));
    }
    return replay_outcome::applied;
  }
  if (name == "SELECT") {
    if (n != 2 || args[1] != "0") return bad("a database other than 0");
    return replay_outcome::applied;
  }
  why = "'" + name +
        "', which the server does not replay (it replays SET, SETNX, SETEX, PSETEX, GETSET, "
        "MSET, MSETNX, DEL, UNLINK, GETDEL, RENAME, RENAMENX, COPY, INCR, DECR, INCRBY, DECRBY, "
        "APPEND, SETRANGE, EXPIRE, PEXPIRE, "
        "EXPIREAT, PEXPIREAT, PERSIST, FLUSHALL, FLUSHDB, SELECT 0, MULTI and EXEC)";
  return replay_outcome::refused;
}

}  // namespace server
