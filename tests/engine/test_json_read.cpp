// The JSON depth pre-scan: brackets inside strings never count, whatever the escapes around them.
#include <gtest/gtest.h>

#include "../common/test_util.h"
#include "engine/io/json_read.h"

namespace loft {
namespace {

std::string opens(int n) { return std::string(size_t(n), '['); }

TEST(JsonDepth, BracketsInsideStringsDoNotCount) {
  std::string error;
  const std::string deep_string = "\"" + opens(1000) + "\"";
  EXPECT_TRUE(try_parse_json("[" + deep_string + "]", error).has_value()) << error;
  // Escaped quotes and backslashes: the string ends at the first quote after an even run of
  // backslashes, and only what follows it counts.
  EXPECT_TRUE(try_parse_json(R"(["\"[[[\\\"[[[", "\\"])", error).has_value()) << error;
  EXPECT_TRUE(try_parse_json("[\"\\\\\\\"" + opens(200) + "\"]", error).has_value()) << error;
  const std::string closed = "[\"\\\\\", " + opens(200);  // the string is a lone backslash
  EXPECT_FALSE(try_parse_json(closed, error));
  EXPECT_TRUE(test::contains(error, "nested deeper than 128 levels at byte 134")) << error;
  // An unterminated string is the parser's to describe, whatever it holds.
  EXPECT_FALSE(try_parse_json("[\"" + opens(200), error));
  EXPECT_TRUE(test::contains(error, "not valid JSON")) << error;
  // Depth counts across strings and keys.
  std::string nested;
  for (int i = 0; i < 129; ++i) nested += "{\"k\\\"[\": ";
  EXPECT_FALSE(try_parse_json(nested, error));
  EXPECT_TRUE(test::contains(error, "nested deeper than 128 levels at byte " + std::to_string(128 * 9))) << error;
}

}  // namespace
}  // namespace loft
