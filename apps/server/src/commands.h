#pragma once
// server::dispatch — the command table: checks a request (arity, authentication, memory),
// answers it at once or turns its keys into tree requests, and assembles the reply once they
// are done (finalize). Reply texts and error prefixes are Redis 7's.
//
//   switch (server::dispatch(srv, c, ctx, first_arg, nargs)) { ... }   // from the serve flow
//   server::finalize(srv, c, c.cmds[i]);                                // appends to c.out

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <tessera/tessera.h>

#include "connection.h"

namespace server {

class kv_server;

enum class dispatch_outcome : std::uint8_t {
  next,        ///< taken into the batch: go on parsing
  end_after,   ///< taken, and the batch ends after it (a whole-store command, QUIT, SHUTDOWN)
  end_before,  ///< not taken: it starts the next batch (same key written, whole-store command)
};

/// Dispatches the request args[first_arg, first_arg + nargs) of `c`'s batch.
dispatch_outcome dispatch(kv_server& srv, connection& c, tessera::context& ctx,
                          std::size_t first_arg, std::size_t nargs);

/// Appends `cmd`'s reply to c.out (its tree requests are all done).
void finalize(kv_server& srv, connection& c, batch_command& cmd);

/// Number of commands in the table (COMMAND COUNT).
std::size_t command_count() noexcept;

}  // namespace server
