// The column cache's file format: round trip, and every kind of damage is a cache_error that
// names the file and the problem.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "join/column_file.h"

namespace {

namespace fs = std::filesystem;

class column_file_test : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("tessera-join-column-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  /// Expects opening `path` to throw a cache_error whose message contains `what` and the path.
  static void expect_error(const fs::path& path, const std::string& what) {
    try {
      const join::column_file f(path);
      FAIL() << "opened " << path << " without an error";
    } catch (const join::cache_error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  }

  fs::path m_dir;
};

TEST_F(column_file_test, round_trip) {
  const std::vector<std::int64_t> v{1, -2, 3, INT64_MIN, INT64_MAX, 0};
  join::write_column_file(m_dir / "a.col", v);
  const join::column_file f(m_dir / "a.col");
  ASSERT_EQ(f.size(), v.size());
  EXPECT_EQ(std::vector<std::int64_t>(f.values().begin(), f.values().end()), v);
  join::column_file moved = join::column_file(m_dir / "a.col");
  EXPECT_EQ(moved.values()[1], -2);
}

TEST_F(column_file_test, empty_column) {
  join::write_column_file(m_dir / "e.col", {});
  const join::column_file f(m_dir / "e.col");
  EXPECT_EQ(f.size(), 0U);
}

TEST_F(column_file_test, checksum_weighs_positions) {
  const std::vector<std::int64_t> a{1, 2};
  const std::vector<std::int64_t> b{2, 1};
  EXPECT_NE(join::column_checksum(a), join::column_checksum(b));
  EXPECT_EQ(join::column_checksum(a), 1U * 1 + 2U * 3);
}

TEST_F(column_file_test, missing_file) { expect_error(m_dir / "none.col", "missing"); }

TEST_F(column_file_test, truncated_values) {
  const std::vector<std::int64_t> v(100, 7);
  join::write_column_file(m_dir / "t.col", v);
  fs::resize_file(m_dir / "t.col", 64 + 99 * 8 + 3);
  expect_error(m_dir / "t.col", "truncated");
}

TEST_F(column_file_test, truncated_header) {
  join::write_column_file(m_dir / "h.col", std::vector<std::int64_t>(4, 1));
  fs::resize_file(m_dir / "h.col", 10);
  expect_error(m_dir / "h.col", "truncated");
}

TEST_F(column_file_test, bad_magic) {
  join::write_column_file(m_dir / "m.col", std::vector<std::int64_t>(4, 1));
  {
    std::fstream f(m_dir / "m.col", std::ios::in | std::ios::out | std::ios::binary);
    f.write("PARQUET!", 8);
  }
  expect_error(m_dir / "m.col", "bad magic");
}

TEST_F(column_file_test, changed_value) {
  join::write_column_file(m_dir / "c.col", std::vector<std::int64_t>(16, 5));
  {
    std::fstream f(m_dir / "c.col", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64 + 8 * 3);
    const std::int64_t other = 6;
    f.write(reinterpret_cast<const char*>(&other), sizeof other);
  }
  expect_error(m_dir / "c.col", "checksum");
}

}  // namespace
