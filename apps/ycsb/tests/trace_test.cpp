// Tests of the trace reader and writer (ycsb/trace.h): plain and BasicDB line forms, comments,
// values, round trips through write_trace, files, and every kind of malformed line with its line
// number.
#include "ycsb/trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ycsb/generator.h"

namespace {

using ycsb::op_type;
using ycsb::operation;

std::vector<operation> parse(const std::string& text, std::string name = "trace") {
  std::istringstream in{text};
  return ycsb::read_trace(in, std::move(name));
}

operation op(op_type type, uint64_t key, uint32_t scan_length = 0) {
  operation o{.type = type, .scan_length = scan_length, .key = key, .value = 0};
  if (type == op_type::insert) o.value = ycsb::value_of(key);
  if (type == op_type::update || type == op_type::read_modify_write)
    o.value = ycsb::updated_value_of(key);
  return o;
}

TEST(Trace, ParsesThePlainForm) {
  const std::vector<operation> ops = parse(
      "# a comment\n"
      "INSERT 1\n"
      "\n"
      "   \t\n"
      "READ 2\n"
      "  # an indented comment\n"
      "UPDATE 3\r\n"
      "SCAN 4 10\n"
      "\tDELETE 5  \n"
      "RMW 6\n"
      "readmodifywrite 7\n"
      "read 18446744073709551615\n"
      "SCAN 0000008 0\n"
      "READ 9");  // no final newline
  const std::vector<operation> expected = {op(op_type::insert, 1),
                                           op(op_type::read, 2),
                                           op(op_type::update, 3),
                                           op(op_type::scan, 4, 10),
                                           op(op_type::remove, 5),
                                           op(op_type::read_modify_write, 6),
                                           op(op_type::read_modify_write, 7),
                                           op(op_type::read, 18446744073709551615ULL),
                                           op(op_type::scan, 8, 0),
                                           op(op_type::read, 9)};
  EXPECT_EQ(ops, expected);
  EXPECT_TRUE(parse("").empty());
  EXPECT_TRUE(parse("\n# only comments\n\n").empty());
}

TEST(Trace, ParsesTheBasicDbForm) {
  const std::vector<operation> ops = parse(
      "READ usertable user6284781860667377211 [ <all fields>]\n"
      "UPDATE usertable user12 [ field1=a]b[c=d field2=x ]\n"
      "INSERT usertable user0000042 [ field0=;:'\"]] ]\n"
      "SCAN usertable user6284781860667377211 55 [ <all fields>]\n"
      "DELETE usertable user7\n"
      "READ user99\n"
      "READ usertable 100 [ field3 field4 ]\n");
  const std::vector<operation> expected = {op(op_type::read, 6284781860667377211ULL),
                                           op(op_type::update, 12),
                                           op(op_type::insert, 42),
                                           op(op_type::scan, 6284781860667377211ULL, 55),
                                           op(op_type::remove, 7),
                                           op(op_type::read, 99),
                                           op(op_type::read, 100)};
  EXPECT_EQ(ops, expected);
}

TEST(Trace, RoundTripsGeneratedWorkloads) {
  for (const char w : {'a', 'd', 'e', 'f'}) {
    const ycsb::workload_generator gen{
        {.workload = w, .record_count = 500, .operation_count = 3000}};
    std::vector<operation> ops = gen.load_operations();
    const std::vector<operation> run = gen.run_operations();
    ops.insert(ops.end(), run.begin(), run.end());
    ops.push_back(op(op_type::remove, 77));
    std::ostringstream out;
    ycsb::write_trace(out, ops);
    EXPECT_EQ(parse(out.str()), ops) << "workload " << w;
  }
  std::ostringstream out;
  ycsb::write_trace(
      out, std::vector<operation>{op(op_type::scan, 5, 12), op(op_type::read_modify_write, 6)});
  EXPECT_EQ(out.str(), "SCAN 5 12\nRMW 6\n");
}

TEST(Trace, ReadsAFileAndReportsAMissingOne) {
  const std::string path =
      ::testing::TempDir() + "ycsb_trace_test_" + std::to_string(::getpid()) + ".txt";
  {
    std::ofstream file{path};
    file << "# header\nINSERT 10\nREAD usertable user10 [ <all fields>]\n";
  }
  EXPECT_EQ(ycsb::read_trace(path),
            (std::vector<operation>{op(op_type::insert, 10), op(op_type::read, 10)}));
  {
    std::ofstream file{path};
    file << "INSERT 10\n\nREAD ten\n";
  }
  try {
    (void)ycsb::read_trace(path);
    ADD_FAILURE() << "no trace_error";
  } catch (const ycsb::trace_error& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ":3: missing key after READ 'ten' (taken as the table name)");
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.line(), 3u);
  }
  std::remove(path.c_str());
  try {
    (void)ycsb::read_trace(path);
    ADD_FAILURE() << "no trace_error";
  } catch (const ycsb::trace_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": cannot open file", 0), 0u) << e.what();
    EXPECT_EQ(e.line(), 0u);
  }
}

struct malformed_case {
  const char* line;
  const char* reason;
};

TEST(Trace, MalformedLinesNameTheFileLineAndReason) {
  const malformed_case cases[] = {
      {"FROB 5", "unknown verb 'FROB' (expected INSERT, READ, UPDATE, SCAN, DELETE or RMW)"},
      {"5 READ", "unknown verb '5' (expected INSERT, READ, UPDATE, SCAN, DELETE or RMW)"},
      {"READ", "missing key after READ"},
      {"DELETE   ", "missing key after DELETE"},
      {"READ [ <all fields>]", "missing key after READ"},
      {"READ usertable", "missing key after READ 'usertable' (taken as the table name)"},
      {"READ usertable [ <all fields>]",
       "missing key after READ 'usertable' (taken as the table name)"},
      {"READ 12x", "key '12x' is not a 64-bit unsigned decimal"},
      {"READ user12x", "key 'user12x' is not a 64-bit unsigned decimal"},
      {"UPDATE -5", "key '-5' is not a 64-bit unsigned decimal"},
      {"UPDATE +5", "key '+5' is not a 64-bit unsigned decimal"},
      {"INSERT usertable userabc", "key 'userabc' is not a 64-bit unsigned decimal"},
      {"INSERT usertable 0x10", "key '0x10' is not a 64-bit unsigned decimal"},
      {"READ 18446744073709551616",
       "key '18446744073709551616' is out of the 64-bit unsigned range"},
      {"READ user99999999999999999999999",
       "key 'user99999999999999999999999' is out of the 64-bit unsigned range"},
      {"SCAN 5", "missing scan length after the key"},
      {"SCAN usertable user5 [ <all fields>]", "missing scan length after the key"},
      {"SCAN 5 ten", "scan length 'ten' is not a 32-bit unsigned decimal"},
      {"SCAN 5 -1", "scan length '-1' is not a 32-bit unsigned decimal"},
      {"SCAN 5 4294967296", "scan length '4294967296' is out of the 32-bit unsigned range"},
      {"READ 5 6", "trailing garbage '6'"},
      {"SCAN 5 6 7", "trailing garbage '7'"},
      {"UPDATE 5 field=1", "trailing garbage 'field=1'"},
      {"READ 5 # comment", "trailing garbage '# comment'"},
      {"READ usertable user5 junk [ x ]", "trailing garbage 'junk [ x ]'"},
      {"READ usertable user5 [ <all fields>",
       "unterminated field list '[ <all fields>' (no closing ']')"},
      {"READ 1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
       "trailing garbage 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...'"},
  };
  for (const malformed_case& c : cases) {
    SCOPED_TRACE(c.line);
    // Good lines, a blank line and a comment come first, so the bad line is line 5.
    const std::string text = std::string("INSERT 1\n\n# comment\nREAD 1\n") + c.line + "\nREAD 2\n";
    try {
      (void)parse(text, "bad.trace");
      ADD_FAILURE() << "no trace_error";
    } catch (const ycsb::trace_error& e) {
      EXPECT_EQ(std::string(e.what()), std::string("bad.trace:5: ") + c.reason);
      EXPECT_EQ(e.line(), 5u);
      EXPECT_EQ(e.file(), "bad.trace");
      EXPECT_EQ(e.reason(), c.reason);
    }
  }
}

TEST(Trace, ParseTraceLineOnItsOwn) {
  EXPECT_EQ(ycsb::parse_trace_line("", "x", 1), std::nullopt);
  EXPECT_EQ(ycsb::parse_trace_line("#READ 5", "x", 1), std::nullopt);
  EXPECT_EQ(ycsb::parse_trace_line("SCAN 3 4", "x", 1), op(op_type::scan, 3, 4));
  EXPECT_THROW((void)ycsb::parse_trace_line("SCAN 3", "x", 1), ycsb::trace_error);
}

}  // namespace
