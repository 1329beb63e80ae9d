// GPT-2's byte-level alphabet (openai/gpt-2 encoder.py bytes_to_unicode): every byte maps to one
// printable character, so byte-level BPE vocabularies are plain text ("Ġ" is the space byte).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace loft::byte_level {

// The byte that maps to code point `cp`, or -1 when `cp` is not in the alphabet.
int byte_of(char32_t cp);
// Appends the mapped characters of every byte of `bytes` to `out`.
void encode(std::string_view bytes, std::string& out);

}  // namespace loft::byte_level
