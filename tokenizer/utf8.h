// Strict UTF-8 decoding (RFC 3629): rejects overlong forms, surrogates, code points above
// U+10FFFF, stray continuation bytes and truncated sequences. SentencePiece's decoder applies the
// same rules to byte-fallback runs, so the stream decoder reuses this to match it exactly.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace loft::utf8 {

// The character at the start of some bytes: `length` bytes long when valid (1..4); otherwise
// `length` is 0, `truncated` says the bytes are a valid start cut short by their end, and
// `problem` names what is wrong.
struct CharCheck {
  int length = 0;
  bool truncated = false;
  const char* problem = nullptr;
  // When invalid: the bytes of the maximal subpart (Unicode 15 §3.9: a valid start cut short, or
  // 1), which a lossy decoder replaces with one U+FFFD, as Rust's String::from_utf8_lossy does.
  int subpart = 0;
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

// `bytes` with each maximal invalid subpart replaced by one U+FFFD (Rust's from_utf8_lossy, which
// Hugging Face `tokenizers` uses for byte-level decoding).
std::string lossy(std::string_view bytes);

// Streaming form of a lossy decode: appends to `out` the text of the leading bytes already decided
// and returns how many bytes that used. A valid start cut short by the end of `bytes` waits for
// more unless `at_end`. An invalid sequence becomes one U+FFFD per maximal subpart
// (`per_subpart`, Rust) or per byte (SentencePiece).
size_t append_decided(std::string_view bytes, bool at_end, bool per_subpart, std::string& out);

// Byte length of the UTF-8 character whose lead byte is `lead` (1 for a stray byte). Only for text
// already known to be valid.
inline int char_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
// The code point of the valid character at the start of `s` (non-empty).
char32_t decode_char(std::string_view s);
// Appends the UTF-8 encoding of `cp` to `out`.
void append_char(std::string& out, char32_t cp);

}  // namespace loft::utf8
