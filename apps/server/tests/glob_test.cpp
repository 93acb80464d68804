// server::glob_match: Redis's KEYS / SCAN MATCH patterns.
#include <gtest/gtest.h>

#include "glob.h"

TEST(glob, patterns_as_redis) {
  using server::glob_match;
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("user:*", "user:42"));
  EXPECT_FALSE(glob_match("user:*", "use"));
  EXPECT_TRUE(glob_match("h?llo", "hello"));
  EXPECT_TRUE(glob_match("h[ae]llo", "hallo"));
  EXPECT_FALSE(glob_match("h[^e]llo", "hello"));
  EXPECT_TRUE(glob_match("h[a-c]llo", "hbllo"));
  EXPECT_TRUE(glob_match("h\\*llo", "h*llo"));
  EXPECT_FALSE(glob_match("h\\*llo", "hello"));
  EXPECT_TRUE(glob_match("MAX*", "maxmemory", true));
  EXPECT_FALSE(glob_match("a*a*a*a*a*a*a*b", std::string(60, 'a')));
}
