#pragma once
// server::request_parser — the Redis protocol's request side (RESP multibulk and inline
// commands), incremental: it is handed the unparsed bytes of a connection, parses one request
// from their start and says whether it was complete, needs more bytes, or is malformed.
//
// Incremental by re-reading: a request that is not complete yet is parsed again from its start
// when more bytes arrive. Only its headers are re-read (a bulk's length says whether its bytes
// are there), so a 512 MiB value arriving in 64 KiB reads costs one header walk per read, not a
// copy. Pipelined requests are parsed one after the other from the same buffer.
//
// Limits and texts are Redis 7's (networking.c, processMultibulkBuffer / processInlineBuffer):
// a bulk longer than `max_bulk_len` (proto-max-bulk-len, 512 MiB), more than `max_multibulk`
// arguments (1024 * 1024; 10 before the client authenticated), a header or inline line longer
// than 64 KiB without its line end, a non-number where a length belongs, unbalanced quotes in an
// inline command. A protocol error cannot be resynchronised: the caller replies with the error
// and closes the connection, as Redis does.
//
//   server::request_parser p({});
//   std::vector<std::string_view> args;
//   server::parse_result r = p.parse("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", args);
//   // r.outcome == parse_outcome::complete, r.consumed == 22, args == {"GET", "k"}
//   // an empty line or "*0\r\n" is complete with no arguments: skip it

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace server {

enum class parse_outcome : std::uint8_t {
  complete,        ///< one request parsed: `consumed` bytes, the arguments appended to args
  need_more,       ///< the bytes end inside a request: read more and parse again from the start
  protocol_error,  ///< malformed: reply `error` (a full "-ERR ..." line) and close
};

struct parse_limits {
  std::size_t max_bulk_len = std::size_t{512} * 1024 * 1024;
  std::size_t max_multibulk = std::size_t{1024} * 1024;
  /// Redis's cap for a client that has not authenticated yet (requirepass set).
  std::size_t max_multibulk_unauthenticated = 10;
  /// PROTO_INLINE_MAX_SIZE: an inline command, or a '*' / '$' header line, without its end.
  std::size_t max_inline = std::size_t{64} * 1024;
};

struct parse_result {
  parse_outcome outcome = parse_outcome::need_more;
  std::size_t consumed = 0;  ///< complete: bytes of the request, from the start of the input
  std::string_view error;    ///< protocol_error: the reply line, "-ERR Protocol error: ...\r\n"
};

class request_parser {
 public:
  explicit request_parser(parse_limits limits) : m_limits(limits) {}

  /// Parses the request at the start of `in`. On `complete` appends its arguments to `args`:
  /// views into `in`, or, for an inline command with quotes or escapes, into strings this parser
  /// keeps until clear_owned(). On the other outcomes `args` is left as it was.
  parse_result parse(std::string_view in, std::vector<std::string_view>& args,
                     bool authenticated = true);

  /// Drops the strings that inline arguments with escapes were unquoted into.
  void clear_owned() noexcept { m_owned.clear(); }

  [[nodiscard]] const parse_limits& limits() const noexcept { return m_limits; }
  void set_limits(const parse_limits& limits) noexcept { m_limits = limits; }

 private:
  parse_result parse_multibulk(std::string_view in, std::vector<std::string_view>& args,
                               bool authenticated);
  parse_result parse_inline(std::string_view in, std::vector<std::string_view>& args);

  parse_limits m_limits;
  std::deque<std::string> m_owned;  // deque: a push never moves the strings views point into
};

/// Splits an inline command line as Redis's sdssplitargs does: blanks separate arguments,
/// "double quotes" take \n \r \t \b \a \\ \" and \xHH escapes, 'single quotes' take \'. A
/// closing quote must be followed by a blank or the end. Outcome: false on unbalanced quotes.
bool split_inline_args(std::string_view line, std::deque<std::string>& owned,
                       std::vector<std::string_view>& args);

/// Redis's string2ll: an optional '-', then digits without a leading zero (or just "0"), no
/// blanks, in range. Outcome: false if `s` is not such a number.
bool parse_integer(std::string_view s, long long& out) noexcept;

}  // namespace server
