// The flags of a subcommand (common/flags.h) as tessera-bench's command_line parses them: every
// kind, both syntaxes, the boolean spellings, the last value winning, and what a wrong word
// says. (bench/CMakeLists.txt runs the whole program on bad command lines: bench.usage.*.)
#include "common/flags.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/timing.h"

namespace tessera::bench {
namespace {

std::vector<flag_definition> definitions() {
  return {int_flag("n", 30, "fib argument", 0, 50),
          uint_list_flag("workers", "1,2", "worker counts", 1, 1024),
          string_flag("json", "", "output", "FILE"),
          choice_flag("statistic", "median", {"median", "best"}, "statistic"),
          choice_list_flag("pattern", "all", {"chain", "tree", "roundrobin"}, "shapes"),
          bool_flag("pin", true, "pin workers"),
          bool_flag("stats", false, "statistics")};
}

struct outcome {
  flag_values values;
  std::string error;  ///< "" if the words were accepted
  bool help = false;
};

/// Parses `tessera-bench sub <words>` as main.cpp does.
outcome parse(const std::vector<std::string>& words) {
  command_line cli{"test", "tessera-bench"};
  const std::vector<flag_section> sections{{"Options", definitions()}};
  cli.add_subcommand("sub", "a subcommand", "", sections);
  std::vector<std::string> args{"sub"};
  args.insert(args.end(), words.begin(), words.end());
  parsed_command p = cli.parse(args);
  outcome out;
  switch (p.result) {
    case parse_result::run:
      EXPECT_EQ(p.subcommand, "sub");
      out.values = std::move(p.values);
      break;
    case parse_result::help:
      out.help = true;
      break;
    case parse_result::usage_error:
      out.error = p.text;
      break;
  }
  return out;
}

TEST(Flags, DefaultsWhenNothingIsGiven) {
  const outcome r = parse({});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.values.integer("n"), 30);
  EXPECT_EQ(r.values.uint_list("workers"), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(r.values.text("json"), "");
  EXPECT_EQ(r.values.text("statistic"), "median");
  EXPECT_EQ(r.values.list("pattern"), (std::vector<std::string>{"chain", "tree", "roundrobin"}));
  EXPECT_TRUE(r.values.boolean("pin"));
  EXPECT_FALSE(r.values.boolean("stats"));
  EXPECT_FALSE(r.values.given("n"));
  EXPECT_FALSE(r.values.given("pin"));
}

TEST(Flags, BothSyntaxesAndEveryKind) {
  const outcome r = parse({"--n", "+25", "--workers=4,1", "--json", "out.jsonl", "--statistic=best",
                           "--pattern", "tree,chain,tree"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.values.integer("n"), 25);
  EXPECT_EQ(r.values.uint_list("workers"), (std::vector<std::uint64_t>{4, 1}));  // as given
  EXPECT_EQ(r.values.text("json"), "out.jsonl");
  EXPECT_EQ(r.values.text("statistic"), "best");
  // In the order of the choices, once each.
  EXPECT_EQ(r.values.list("pattern"), (std::vector<std::string>{"chain", "tree"}));
  EXPECT_TRUE(r.values.given("n"));
  EXPECT_FALSE(r.values.given("stats"));
}

TEST(Flags, NegativeNumberIsAValue) {
  EXPECT_EQ(parse({"--n", "-1"}).error, "tessera-bench: --n: must be between 0 and 50, got '-1'");
}

TEST(Flags, TheLastValueWins) {
  const outcome r = parse({"--n", "3", "--n", "4", "--statistic", "best", "--statistic=median"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.values.integer("n"), 4);
  EXPECT_EQ(r.values.text("statistic"), "median");
}

TEST(Flags, BooleanSpellings) {
  struct spelling {
    std::vector<std::string> words;
    bool pin;
  };
  const std::vector<spelling> spellings{
      {{"--pin"}, true},
      {{"--no-pin"}, false},
      {{"--pin=no"}, false},
      {{"--pin", "no"}, false},
      {{"--pin", "yes"}, true},
      {{"--no-pin", "--pin"}, true},
      {{"--pin", "--no-pin"}, false},
      {{"--no-pin", "--stats", "--pin=no", "--stats", "no", "--pin", "yes"}, true},
      {{"--pin", "--n", "5"}, true},  // a flag after a bare boolean is not its value
  };
  for (const spelling& s : spellings) {
    const outcome r = parse(s.words);
    ASSERT_EQ(r.error, "") << s.words.front();
    EXPECT_EQ(r.values.boolean("pin"), s.pin) << testing::PrintToString(s.words);
    EXPECT_TRUE(r.values.given("pin"));
  }
  const outcome r = parse({"--no-pin", "--stats", "--pin=no", "--stats", "no", "--pin", "yes"});
  EXPECT_FALSE(r.values.boolean("stats"));
}

TEST(Flags, HelpAnywhere) {
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_TRUE(parse({"--n", "5", "-h"}).help);
}

TEST(Flags, WrongWordsSayWhatIsWrong) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--n", "x"}, "--n: expected an integer between 0 and 50, got 'x'"},
      {{"--n", "0x10"}, "--n: expected an integer between 0 and 50, got '0x10'"},
      {{"--n", "99999999999999999999"},
       "--n: beyond a 64-bit integer (must be between 0 and 50), got '99999999999999999999'"},
      {{"--n", "51"}, "--n: must be between 0 and 50, got '51'"},
      {{"--n", "x", "--n", "5"}, "--n: expected an integer between 0 and 50, got 'x'"},
      {{"--n"}, "--n: missing value"},
      {{"--n", "--workers", "1"}, "--n: missing value"},
      {{"--json="}, "--json: missing value"},
      {{"--workers", "0"},
       "--workers: expected a comma-separated list of integers between 1 and 1024, got '0'"},
      {{"--workers", "1,,2"},
       "--workers: expected a comma-separated list of integers between 1 and 1024, got '1,,2'"},
      {{"--workers", "1,2,1"}, "--workers: 1 is given twice in '1,2,1'"},
      {{"--statistic", "mean"}, "--statistic: expected one of median,best, got 'mean'"},
      {{"--pattern", "zigzag"},
       "--pattern: expected a comma-separated list of chain,tree,roundrobin (or all), "
       "got 'zigzag'"},
      {{"--pin=maybe"}, "--pin: expected yes or no, got 'maybe'"},
      {{"--pin", "maybe"}, "--pin: expected yes or no, got 'maybe'"},
      {{"--no-pin=yes"}, "--no-pin: takes no value (it means --pin=no)"},
      {{"--no-n"}, "--no-n: unknown flag (see --help)"},
      {{"--frobnicate", "1"}, "--frobnicate: unknown flag (see --help)"},
      {{"--frobnicate=1"}, "--frobnicate: unknown flag (see --help)"},
      {{"--no-pin", "yes"}, "yes: unexpected argument"},
      {{"25"}, "25: unexpected argument"},
  };
  for (const auto& [words, error] : cases)
    EXPECT_EQ(parse(words).error, "tessera-bench: " + error) << testing::PrintToString(words);
}

TEST(Flags, DefaultsAreCheckedLikeInput) {
  command_line cli{"test", "tessera-bench"};
  const std::vector<flag_section> bad_default{{"Options", {int_flag("n", 60, "fib", 0, 50)}}};
  EXPECT_THROW(cli.add_subcommand("sub", "a subcommand", "", bad_default), std::logic_error);
  const std::vector<flag_section> twice{{"Options", {int_flag("n", 1, "fib", 0, 50)}},
                                        {"More", {int_flag("n", 2, "fib", 0, 50)}}};
  EXPECT_THROW(cli.add_subcommand("other", "another", "", twice), std::logic_error);
}

TEST(Flags, AccessorsRefuseProgrammerErrors) {
  const outcome r = parse({});
  EXPECT_THROW((void)r.values.integer("nothing"), std::logic_error);
  EXPECT_THROW((void)r.values.text("n"), std::logic_error);
  EXPECT_FALSE(r.values.defined("nothing"));
}

}  // namespace
}  // namespace tessera::bench
