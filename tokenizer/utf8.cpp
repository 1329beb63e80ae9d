#include "tokenizer/utf8.h"

namespace loft::utf8 {

namespace {

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Unicode 15 table 3-7: the lead byte fixes the length and the allowed range of the second byte;
// the narrowed ranges are exactly what excludes overlongs, surrogates and > U+10FFFF.
struct Lead {
  int length;
  unsigned char lo, hi;     // allowed second byte
  const char* below_lo;     // problem when the second byte is a continuation below lo
  const char* above_hi;     // ... or above hi
};

}  // namespace

CharCheck check_char(std::string_view bytes) {
  if (bytes.empty()) return {0, true, "empty input"};
  const auto b0 = static_cast<unsigned char>(bytes[0]);
  if (b0 < 0x80) return {1, false, nullptr};
  if (is_continuation(b0)) return {0, false, "unexpected continuation byte", 1};
  if (b0 == 0xC0 || b0 == 0xC1) return {0, false, "overlong encoding", 1};
  if (b0 >= 0xF5 && b0 <= 0xF7) return {0, false, "code point above U+10FFFF", 1};
  if (b0 >= 0xF8) return {0, false, "invalid lead byte", 1};

  constexpr const char* kOverlong = "overlong encoding";
  constexpr const char* kSurrogate = "surrogate code point";
  constexpr const char* kTooBig = "code point above U+10FFFF";
  Lead lead{2, 0x80, 0xBF, nullptr, nullptr};
  if (b0 >= 0xE0 && b0 <= 0xEF) lead = {3, 0x80, 0xBF, nullptr, nullptr};
  if (b0 == 0xE0) lead = {3, 0xA0, 0xBF, kOverlong, nullptr};
  if (b0 == 0xED) lead = {3, 0x80, 0x9F, nullptr, kSurrogate};
  if (b0 >= 0xF0) lead = {4, 0x80, 0xBF, nullptr, nullptr};
  if (b0 == 0xF0) lead = {4, 0x90, 0xBF, kOverlong, nullptr};
  if (b0 == 0xF4) lead = {4, 0x80, 0x8F, nullptr, kTooBig};

  for (int i = 1; i < lead.length; ++i) {
    if (size_t(i) >= bytes.size()) return {0, true, "truncated sequence", i};
    const auto b = static_cast<unsigned char>(bytes[size_t(i)]);
    if (!is_continuation(b)) return {0, false, "missing continuation byte", i};
    if (i == 1 && b < lead.lo) return {0, false, lead.below_lo, 1};
    if (i == 1 && b > lead.hi) return {0, false, lead.above_hi, 1};
  }
  return {lead.length, false, nullptr};
}

std::optional<Invalid> find_invalid(std::string_view text) {
  size_t offset = 0;
  while (offset < text.size()) {
    const CharCheck c = check_char(text.substr(offset));
    if (c.length == 0) return Invalid{offset, c.problem};
    offset += size_t(c.length);
  }
  return std::nullopt;
}

size_t append_decided(std::string_view bytes, bool at_end, bool per_subpart, std::string& out) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const CharCheck c = check_char(bytes.substr(pos));
    if (c.length > 0) {
      out.append(bytes.substr(pos, size_t(c.length)));
      pos += size_t(c.length);
    } else if (c.truncated && !at_end) {
      break;
    } else {
      out += kReplacementChar;
      pos += per_subpart ? size_t(c.subpart) : 1;
    }
  }
  return pos;
}

std::string lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  append_decided(bytes, /*at_end=*/true, /*per_subpart=*/true, out);
  return out;
}

char32_t decode_char(std::string_view s) {
  const auto b = [&](size_t i) { return char32_t(static_cast<unsigned char>(s[i])); };
  switch (char_length(static_cast<unsigned char>(s[0]))) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void append_char(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

}  // namespace loft::utf8
