// A stretch of text between added tokens as it moves through a tokenizer.json pipeline
// (tokenizers' Split of a PreTokenizedString): normalizers rewrite it, pre-tokenizers cut it into
// smaller ones, and the model turns each final one into ids.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace loft {

struct PreToken {
  std::string text;
  // Whether it starts at offset 0 of the original text (tokenizers' offsets_original().0 == 0):
  // Metaspace's prepend_scheme "first" adds "▁" only there, so not after a leading added token.
  bool at_origin = false;
  // With at_origin: how many leading bytes of `text` map back to original offset 0 (inserted text
  // and the first character); a piece cut off at a later byte no longer starts at the origin.
  uint32_t zero_prefix = 0;
};

using PreTokens = std::vector<PreToken>;

// A fresh piece of original text at original offset `offset`.
PreToken make_pre_token(std::string text, size_t offset);
// Bytes [start, end) of `t` as a piece of its own.
PreToken slice(const PreToken& t, size_t start, size_t end);
// Inserts `s` in front of a non-empty `t`, as NormalizedString::prepend aligns it (to the first
// character's original offset).
void prepend(PreToken& t, const std::string& s);

}  // namespace loft
