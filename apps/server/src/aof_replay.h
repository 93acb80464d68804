#pragma once
// server::replay_record — one record of an append-only log applied to the tree at start-up, with
// Redis's semantics, for every write command the server has and the forms redis-server writes
// them in, so that a log written by redis-server loads as well as the server's own:
//
//   SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT n|KEEPTTL]    SETNX, SETEX, PSETEX, GETSET
//   MSET, DEL, UNLINK, GETDEL, INCR, DECR, INCRBY, DECRBY, APPEND (the deadline kept)
//   EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT key n [NX|XX|GT|LT], PERSIST, FLUSHALL, FLUSHDB
//   SELECT 0 (a no-op; another database is refused)
//
// MULTI and EXEC are the loader's (aof_load.cpp): a transaction is applied at its EXEC, one cut
// off by the end of the file is treated as a truncated tail. As in redis-server, no time passes
// during a replay: a key whose deadline passed while the server was down is still there for the
// records after (a PERSIST keeps it), and drop_expired() removes the expired ones after the
// whole log. Relative deadlines (EX, PX, EXPIRE, SETEX) count from the replay, as in
// redis-server; the server itself logs absolute ones.
//
//   std::string why;
//   if (replay_record(tree, args, why) == replay_outcome::refused) ... // `why` names it
//   ... every record ...
//   drop_expired(tree);
//
// Runs before any task does (string_tree::apply_exclusive); not thread-safe.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace server {

class string_tree;

enum class replay_outcome : std::uint8_t {
  applied,   ///< done (a SET NX on an existing key, for one, is done and changes nothing)
  no_effect, ///< an error reply in Redis too (INCR of a non-integer, an overflow): nothing changed
  refused,   ///< not a command the server replays, or malformed: `why` says what
};

replay_outcome replay_record(string_tree& tree, std::span<const std::string_view> args,
                             std::string& why);

/// After the replay: removes the keys whose deadline has passed; returns how many.
std::uint64_t drop_expired(string_tree& tree);

/// The command's name in capitals (at most 64 bytes).
std::string record_name(std::string_view arg0);

}  // namespace server
