// A randomised mutation fuzzer for server::request_parser, in the suite: valid requests
// (multibulk and inline, pipelined) are generated, mutated (bytes flipped, inserted, deleted,
// lengths changed, segments duplicated, cut) and parsed whole and in pieces. Checked: no crash
// or sanitizer report, `consumed` within the input, arguments inside the input or the parser's
// own strings, and the incremental contract: a prefix of the input never disagrees with the
// whole (a prefix that is complete or malformed is so with the same result in the whole).
//
// Requests per run: 1 M under AddressSanitizer (the bar), 200 k in other builds, 40 k
// under ThreadSanitizer (single-threaded code: TSan adds time and nothing to find);
// SERVER_FUZZ_REQUESTS overrides. Every file in tests/corpus (inputs that found bugs, and
// edge cases) is replayed the same way.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "resp_parser.h"

#ifndef SERVER_CORPUS_DIR
#define SERVER_CORPUS_DIR "corpus"
#endif

#if defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t default_requests = 1'000'000;
#elif defined(__SANITIZE_THREAD__)
constexpr std::uint64_t default_requests = 40'000;
#else
constexpr std::uint64_t default_requests = 200'000;
#endif

namespace {

using server::parse_outcome;

std::uint64_t requests_to_run() {
  if (const char* e = std::getenv("SERVER_FUZZ_REQUESTS")) return std::strtoull(e, nullptr, 10);
  return default_requests;
}

std::string random_arg(std::mt19937_64& rng) {
  static const char* words[] = {"SET", "GET", "PING", "MSET", "key", "", "value", "\"q\"", "a b",
                                "-1", "0", "9223372036854775807", "\r\n", "*", "$"};
  if (rng() % 3 == 0) return words[rng() % std::size(words)];
  std::string s(rng() % 40, '\0');
  for (char& c : s) c = static_cast<char>(rng() % 256);
  return s;
}

std::string make_request(std::mt19937_64& rng) {
  const std::size_t n = 1 + rng() % 5;
  std::string r;
  if (rng() % 4 == 0) {  // inline
    for (std::size_t i = 0; i < n; ++i) {
      std::string a = random_arg(rng);
      for (char& c : a) {
        if (c == '\n' || c == '\r') c = 'x';
      }
      r += (i ? " " : "") + (rng() % 3 == 0 ? "\"" + a + "\"" : a);
    }
    return r + "\r\n";
  }
  r = "*" + std::to_string(n) + "\r\n";
  for (std::size_t i = 0; i < n; ++i) {
    const std::string a = random_arg(rng);
    r += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  }
  return r;
}

void mutate(std::string& s, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const std::size_t at = s.empty() ? 0 : rng() % s.size();
    switch (rng() % 8) {
      case 0:
        if (!s.empty()) s[at] = static_cast<char>(rng() % 256);
        break;
      case 1: s.insert(at, 1, static_cast<char>(rng() % 256)); break;
      case 2:
        if (!s.empty()) s.erase(at, 1 + rng() % 4);
        break;
      case 3: {  // a digit: lengths and counts change
        if (!s.empty()) s[at] = static_cast<char>('0' + rng() % 10);
        break;
      }
      case 4: {  // a special byte
        static const char special[] = {'*', '$', '\r', '\n', '-', '"', '\'', '\\', ' ', '\0'};
        if (!s.empty()) s[at] = special[rng() % std::size(special)];
        break;
      }
      case 5: s.resize(at); break;
      case 6: {  // duplicate a segment
        const std::size_t len = std::min<std::size_t>(s.size() - std::min(at, s.size()), 16);
        s.insert(at, s.substr(at, len));
        break;
      }
      default: {  // a huge or negative length
        static const char* lens[] = {"-1", "2147483648", "536870913", "99999999999999999999",
                                     "-9223372036854775808", "1048577"};
        s.insert(at, lens[rng() % std::size(lens)]);
        break;
      }
    }
  }
}

/// Parses `in` as a connection would (request after request) and checks the invariants; also
/// parses a random prefix and checks that it agrees with the whole.
void check_input(const std::string& in, std::mt19937_64& rng) {
  server::request_parser whole({});
  std::vector<std::string_view> args;
  std::size_t pos = 0;
  struct step {
    parse_outcome outcome;
    std::size_t consumed;
    std::size_t nargs;
  };
  std::vector<step> steps;
  const bool authenticated = rng() % 8 != 0;
  while (pos < in.size()) {
    const std::string_view rest = std::string_view(in).substr(pos);
    const std::size_t before = args.size();
    const auto r = whole.parse(rest, args, authenticated);
    steps.push_back({r.outcome, r.consumed, args.size() - before});
    if (r.outcome == parse_outcome::complete) {
      ASSERT_GT(r.consumed, 0u);
      ASSERT_LE(r.consumed, rest.size());
      for (std::size_t i = before; i < args.size(); ++i) {
        // Inside the input, or unquoted into the parser's strings (then no longer than the line).
        if (args[i].data() >= in.data() && args[i].data() <= in.data() + in.size()) {
          ASSERT_LE(args[i].data() + args[i].size(), in.data() + in.size());
        } else {
          ASSERT_LE(args[i].size(), r.consumed);
        }
      }
      pos += r.consumed;
      continue;
    }
    if (r.outcome == parse_outcome::protocol_error) {
      ASSERT_FALSE(r.error.empty());
      ASSERT_EQ(r.error.substr(0, 20), "-ERR Protocol error:");
      ASSERT_EQ(r.error.substr(r.error.size() - 2), "\r\n");
    }
    break;
  }
  // A prefix agrees with the whole: the same complete steps while they fit, then need_more or
  // the same error.
  const std::size_t cut = in.empty() ? 0 : rng() % (in.size() + 1);
  server::request_parser part({});
  std::vector<std::string_view> pargs;
  pos = 0;
  for (const step& s : steps) {
    const auto r =
        part.parse(std::string_view(in.data(), cut).substr(pos), pargs, authenticated);
    if (r.outcome == parse_outcome::need_more) break;
    ASSERT_EQ(r.outcome, s.outcome);
    if (r.outcome == parse_outcome::complete) {
      ASSERT_EQ(r.consumed, s.consumed);
      pos += r.consumed;
      continue;
    }
    break;
  }
}

TEST(resp_fuzz, mutated_requests) {
  std::mt19937_64 rng(0x7e55e7a);
  const std::uint64_t total = requests_to_run();
  std::uint64_t done = 0;
  while (done < total) {
    std::string in;
    const std::size_t pipeline = 1 + rng() % 3;
    for (std::size_t i = 0; i < pipeline; ++i) in += make_request(rng);
    mutate(in, rng);
    check_input(in, rng);
    if (HasFatalFailure()) {
      std::ostringstream name;
      name << "/tmp/resp_fuzz_failure_" << done << ".bin";
      std::ofstream(name.str(), std::ios::binary) << in;
      FAIL() << "failing input written to " << name.str() << " (add it to tests/corpus)";
    }
    done += pipeline;
  }
  RecordProperty("requests", static_cast<int>(done));
}

TEST(resp_fuzz, corpus_regressions) {
  std::mt19937_64 rng(1);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(SERVER_CORPUS_DIR)) {
    std::ifstream f(e.path(), std::ios::binary);
    const std::string in((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (int i = 0; i < 16; ++i) check_input(in, rng);
    ++files;
  }
  EXPECT_GT(files, 0) << "no corpus in " << SERVER_CORPUS_DIR;
}

}  // namespace
