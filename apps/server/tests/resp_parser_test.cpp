// server::request_parser and server::reply_writer: framing, limits, Redis's error texts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "resp_parser.h"
#include "resp_writer.h"

namespace {

using server::parse_outcome;

struct parsed {
  server::parse_result r;
  std::vector<std::string> args;
};

parsed parse(std::string_view in, server::parse_limits l = {}, bool authenticated = true) {
  server::request_parser p(l);
  std::vector<std::string_view> args;
  parsed out{p.parse(in, args, authenticated), {}};
  for (auto a : args) out.args.emplace_back(a);
  return out;
}

TEST(resp_parser, multibulk_complete) {
  const auto p = parse("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
  EXPECT_EQ(p.r.outcome, parse_outcome::complete);
  EXPECT_EQ(p.r.consumed, 20u);
  EXPECT_EQ(p.args, (std::vector<std::string>{"GET", "k"}));
}

TEST(resp_parser, binary_safe_bulk) {
  const std::string in = std::string("*2\r\n$3\r\nSET\r\n$5\r\na\0\r\nb\r\n", 24);
  const auto p = parse(in);
  ASSERT_EQ(p.r.outcome, parse_outcome::complete);
  EXPECT_EQ(p.args[1], std::string("a\0\r\nb", 5));
}

TEST(resp_parser, every_prefix_needs_more) {
  const std::string in = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";
  for (std::size_t n = 1; n < in.size(); ++n) {
    EXPECT_EQ(parse(in.substr(0, n)).r.outcome, parse_outcome::need_more) << n;
  }
  EXPECT_EQ(parse(in).r.outcome, parse_outcome::complete);
}

TEST(resp_parser, pipelined_requests_parse_one_after_the_other) {
  const std::string in = "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nPING\r\n";
  server::request_parser p({});
  std::vector<std::string_view> args;
  std::size_t pos = 0;
  int n = 0;
  while (pos < in.size()) {
    const auto r = p.parse(std::string_view(in).substr(pos), args);
    ASSERT_EQ(r.outcome, parse_outcome::complete);
    pos += r.consumed;
    ++n;
  }
  EXPECT_EQ(n, 3);
  EXPECT_EQ(args.size(), 4u);
}

TEST(resp_parser, empty_requests_are_complete_without_arguments) {
  EXPECT_EQ(parse("*0\r\n").r.outcome, parse_outcome::complete);
  EXPECT_TRUE(parse("*0\r\n").args.empty());
  EXPECT_EQ(parse("*-1\r\n").r.outcome, parse_outcome::complete);
  EXPECT_EQ(parse("\r\n").r.consumed, 2u);
}

TEST(resp_parser, errors_carry_redis_texts) {
  EXPECT_EQ(parse("*x\r\n").r.error, "-ERR Protocol error: invalid multibulk length\r\n");
  EXPECT_EQ(parse("*1\r\n$x\r\n").r.error, "-ERR Protocol error: invalid bulk length\r\n");
  EXPECT_EQ(parse("*1\r\n$-5\r\n").r.error, "-ERR Protocol error: invalid bulk length\r\n");
  EXPECT_EQ(parse("*1\r\n+GET\r\n").r.error, "-ERR Protocol error: expected '$', got '+'\r\n");
  EXPECT_EQ(parse("*2000000\r\n").r.error, "-ERR Protocol error: invalid multibulk length\r\n");
  EXPECT_EQ(parse("*11\r\n", {}, false).r.error,
            "-ERR Protocol error: unauthenticated multibulk length\r\n");
  EXPECT_EQ(parse("SET \"a b\"x\r\n").r.error,
            "-ERR Protocol error: unbalanced quotes in request\r\n");
  EXPECT_EQ(parse(std::string(70000, 'a')).r.error,
            "-ERR Protocol error: too big inline request\r\n");
  EXPECT_EQ(parse("*" + std::string(70000, '1')).r.error,
            "-ERR Protocol error: too big mbulk count string\r\n");
  EXPECT_EQ(parse("*1\r\n$" + std::string(70000, '1')).r.error,
            "-ERR Protocol error: too big bulk count string\r\n");
}

TEST(resp_parser, bulk_limit_is_configurable) {
  server::parse_limits l;
  l.max_bulk_len = 10;
  EXPECT_EQ(parse("*1\r\n$10\r\n", l).r.outcome, parse_outcome::need_more);
  EXPECT_EQ(parse("*1\r\n$11\r\n", l).r.outcome, parse_outcome::protocol_error);
  // 512 MiB by default: the header of a larger bulk is refused before its bytes arrive.
  EXPECT_EQ(parse("*1\r\n$536870912\r\n").r.outcome, parse_outcome::need_more);
  EXPECT_EQ(parse("*1\r\n$536870913\r\n").r.outcome, parse_outcome::protocol_error);
}

TEST(resp_parser, inline_commands_split_as_redis_does) {
  const auto p = parse("set  \"a\\x41\\n\" 'it\\'s'   b\r\n");
  ASSERT_EQ(p.r.outcome, parse_outcome::complete);
  EXPECT_EQ(p.args, (std::vector<std::string>{"set", "aA\n", "it's", "b"}));
  EXPECT_EQ(parse("PING\n").args, (std::vector<std::string>{"PING"}));
  EXPECT_EQ(parse("PING").r.outcome, parse_outcome::need_more);
}

TEST(resp_parser, integers_as_string2ll) {
  long long v = 0;
  EXPECT_TRUE(server::parse_integer("-9223372036854775808", v));
  EXPECT_EQ(v, INT64_MIN);
  EXPECT_FALSE(server::parse_integer("9223372036854775808", v));
  EXPECT_FALSE(server::parse_integer("01", v));
  EXPECT_FALSE(server::parse_integer("+1", v));
  EXPECT_FALSE(server::parse_integer(" 1", v));
  EXPECT_FALSE(server::parse_integer("-0", v));
  EXPECT_TRUE(server::parse_integer("0", v));
  EXPECT_TRUE(server::parse_integer("9223372036854775807", v));
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_FALSE(server::parse_integer("-9223372036854775809", v));
  // 19 and 20 digits past the signed range, and past the unsigned one.
  EXPECT_FALSE(server::parse_integer("9999999999999999999", v));
  EXPECT_FALSE(server::parse_integer("18446744073709551615", v));
  EXPECT_FALSE(server::parse_integer("18446744073709551616", v));
  EXPECT_FALSE(server::parse_integer("-18446744073709551616", v));
  EXPECT_FALSE(server::parse_integer("99999999999999999999", v));
  EXPECT_FALSE(server::parse_integer("123456789012345678901", v));
  EXPECT_FALSE(server::parse_integer("12345x", v));
  EXPECT_TRUE(server::parse_integer("1234567890123456789", v));
  EXPECT_EQ(v, 1234567890123456789LL);
}

TEST(resp_writer, resp2_and_resp3) {
  std::string out;
  server::reply_writer w2(out, server::protocol::resp2);
  w2.null();
  w2.map(1);
  w2.integer(-5);
  w2.error("ERR a\r\nb");
  EXPECT_EQ(out, "$-1\r\n*2\r\n:-5\r\n-ERR a  b\r\n");
  out.clear();
  server::reply_writer w3(out, server::protocol::resp3);
  w3.null();
  w3.map(1);
  w3.set(2);
  w3.verbatim("hi");
  EXPECT_EQ(out, "_\r\n%1\r\n~2\r\n=6\r\ntxt:hi\r\n");
}

}  // namespace
