// The strict UTF-8 checker against an independent bit-level definition, exhaustively over all
// 1-3 byte inputs and every code point, plus the named problems and offsets.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "tokenizer/utf8.h"

namespace loft {
namespace {

// Reference: the length of the valid character starting `s`, or 0. Decodes by bit masks, then
// rejects by value (overlong / surrogate / too large), a different route from the checker's table.
int reference_length(const std::string& s) {
  const auto u = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i])); };
  if (s.empty()) return 0;
  int n;
  uint32_t cp;
  if (u(0) < 0x80) return 1;
  if ((u(0) >> 5) == 0x6) n = 2, cp = u(0) & 0x1F;
  else if ((u(0) >> 4) == 0xE) n = 3, cp = u(0) & 0x0F;
  else if ((u(0) >> 3) == 0x1E) n = 4, cp = u(0) & 0x07;
  else return 0;
  if (s.size() < size_t(n)) return 0;
  for (int i = 1; i < n; ++i) {
    if ((u(size_t(i)) >> 6) != 0x2) return 0;
    cp = (cp << 6) | (u(size_t(i)) & 0x3F);
  }
  const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_cp[n] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
  return n;
}

std::string encode_cp(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12)), s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18)), s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F)), s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

TEST(Utf8, EveryCodePointIsValidAndEverySurrogateIsNot) {
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    const std::string s = encode_cp(cp);
    const utf8::CharCheck c = utf8::check_char(s);
    if (cp >= 0xD800 && cp <= 0xDFFF) {
      ASSERT_EQ(c.length, 0) << "U+" << std::hex << cp;
      ASSERT_STREQ(c.problem, "surrogate code point");
    } else {
      ASSERT_EQ(c.length, int(s.size())) << "U+" << std::hex << cp;
      ASSERT_FALSE(utf8::find_invalid(s + "x" + s).has_value());
    }
  }
}

TEST(Utf8, AllShortInputsMatchTheReference) {
  // Every 1-, 2- and 3-byte string: the checker's first character agrees with the reference,
  // and a rejected full-length input is "truncated" only if some longer input would be valid.
  for (uint32_t v = 0; v < (1u << 24); ++v) {
    for (int len = 1; len <= 3; ++len) {
      if (len < 3 && (v >> (8 * len)) != 0) continue;
      std::string s;
      for (int i = len - 1; i >= 0; --i) s += char((v >> (8 * i)) & 0xFF);
      const utf8::CharCheck c = utf8::check_char(s);
      const int ref = reference_length(s);
      ASSERT_EQ(c.length, ref) << "bytes 0x" << std::hex << v << " len " << len;
      if (ref == 0) {
        ASSERT_NE(c.problem, nullptr);
      }
    }
  }
}

TEST(Utf8, RandomFourByteInputsMatchTheReference) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> lead(0xF0, 0xFF), any(0, 255), cont(0x80, 0xBF);
  for (int t = 0; t < 2000000; ++t) {
    std::string s(1, char(lead(rng)));
    for (int i = 0; i < 3; ++i) s += char(t % 3 == 0 ? any(rng) : cont(rng));
    ASSERT_EQ(utf8::check_char(s).length, reference_length(s)) << t;
  }
}

TEST(Utf8, TruncationIsToldApartFromInvalidPrefixes) {
  EXPECT_TRUE(utf8::check_char("\xE6\x9D").truncated);
  EXPECT_TRUE(utf8::check_char("\xF0\x9F\x99").truncated);
  EXPECT_TRUE(utf8::check_char("\xC3").truncated);
  EXPECT_FALSE(utf8::check_char("\xE0\x80").truncated);  // can only become an overlong
  EXPECT_FALSE(utf8::check_char("\xED\xA0").truncated);  // can only become a surrogate
  EXPECT_FALSE(utf8::check_char("\xF4\x90").truncated);  // can only exceed U+10FFFF
  EXPECT_FALSE(utf8::check_char("\xE6x").truncated);
}

struct BadCase {
  std::string text;
  size_t offset;
  const char* problem;
};

TEST(Utf8, FirstInvalidSequenceIsNamedWithItsOffset) {
  const BadCase cases[] = {
      {"abc\xFF", 3, "invalid lead byte"},
      {"ab\x80" "cd", 2, "unexpected continuation byte"},
      {"x\xC0\xAF", 1, "overlong encoding"},
      {"\xE0\x80\xAF", 0, "overlong encoding"},
      {"\xF0\x80\x80\xAF", 0, "overlong encoding"},
      {"ok \xED\xA0\x80", 3, "surrogate code point"},
      {"\xF4\x90\x80\x80", 0, "code point above U+10FFFF"},
      {"\xF5\x80\x80\x80", 0, "code point above U+10FFFF"},
      {"h\xC3\xA9llo\xE6\x9D", 6, "truncated sequence"},
      {"\xE6\x9Dx", 0, "missing continuation byte"},
      {"\xF8\x88\x80\x80\x80", 0, "invalid lead byte"},
      {"caf\xC3\xA9 \xF0\x9F\x99\x82 \xC3", 11, "truncated sequence"},
  };
  for (const BadCase& c : cases) {
    const auto bad = utf8::find_invalid(c.text);
    ASSERT_TRUE(bad.has_value()) << c.problem;
    EXPECT_EQ(bad->offset, c.offset) << c.problem;
    EXPECT_STREQ(bad->problem, c.problem);
  }
  EXPECT_FALSE(utf8::find_invalid("").has_value());
  EXPECT_FALSE(utf8::find_invalid(std::string("a\0b", 3)).has_value());
}

}  // namespace
}  // namespace loft
