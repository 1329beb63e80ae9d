// Strict UTF-8 decoding (RFC 3629): rejects overlong forms, surrogates, code points above
// U+10FFFF, stray continuation bytes and truncated sequences. SentencePiece's decoder applies the
// same rules to byte-fallback runs, so the stream decoder reuses this to match it exactly.
#pragma once
#include <cstddef>
#include <optional>
#include <string_view>

namespace loft::utf8 {

// The character at the start of some bytes: `length` bytes long when valid (1..4); otherwise
// `length` is 0, `truncated` says the bytes are a valid start cut short by their end, and
// `problem` names what is wrong.
struct CharCheck {
  int length = 0;
  bool truncated = false;
  const char* problem = nullptr;
};
CharCheck check_char(std::string_view bytes);

struct Invalid {
  size_t offset;        // byte offset of the first invalid sequence
  const char* problem;  // e.g. "overlong encoding"
};
// The first invalid sequence of `text`, or nothing when all of it is valid UTF-8.
std::optional<Invalid> find_invalid(std::string_view text);

// U+FFFD, the text SentencePiece gives an invalid byte.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

}  // namespace loft::utf8
