#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace loft::byte_level {

namespace {

struct Tables {
  std::array<std::string, 256> chars;
  std::array<int16_t, 512> bytes;  // by code point; every mapped code point is below 0x144
  Tables() {
    bytes.fill(-1);
    // Printable Latin-1 bytes map to themselves; the others, in order, to U+0100, U+0101, ...
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? char32_t(b) : next++;
      utf8::append_char(chars[size_t(b)], cp);
      bytes[size_t(cp)] = int16_t(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

int byte_of(char32_t cp) { return cp < 512 ? tables().bytes[cp] : -1; }

void encode(std::string_view bytes, std::string& out) {
  const Tables& t = tables();
  for (const char c : bytes) out += t.chars[static_cast<unsigned char>(c)];
}

}  // namespace loft::byte_level
