// tokenizer.json `added_tokens`, found in text before the model runs, as tokenizers'
// AddedVocabulary does: leftmost-longest matching over all tokens at once, first the tokens with
// normalized=false in the raw text, then those with normalized=true in each normalized stretch
// between; single_word keeps only matches not inside a word, lstrip/rstrip widen a match over
// the whitespace beside it. Special tokens are found too (tokenizers' encode_special_tokens=false).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe_model.h"
#include "tokenizer/regex.h"

namespace loft {

struct AddedTokenSpec {
  int32_t id = -1;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

class AddedVocabulary {
 public:
  // `match_text` is each token's text as matched: its content, normalized when it is normalized.
  AddedVocabulary(std::vector<AddedTokenSpec> tokens, const std::vector<std::string>& match_text);

  // A stretch of `text`: an added token's id, or -1 for text between tokens.
  struct Span {
    size_t start, end;
    int32_t id;
  };
  // Splits `text` at the tokens of one set (normalized=true ones or the others), as
  // AddedVocabulary::find_matches does. Appends to `out`; an empty text gives nothing.
  void split(std::string_view text, bool normalized_set, std::vector<Span>& out) const;

  const std::vector<AddedTokenSpec>& tokens() const { return tokens_; }
  const AddedTokenSpec* by_id(int32_t id) const;
  int32_t id(std::string_view content) const;  // -1 when no added token has this content

 private:
  struct Trie {
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> next;  // sorted by byte
      int32_t token = -1;                                    // index into tokens_ ending here
    };
    std::vector<Node> nodes{Node{}};
    bool first[256] = {};
    void add(std::string_view s, int32_t token);
    // The longest token starting at `pos`: (index, end), or index -1.
    std::pair<int32_t, size_t> longest_at(std::string_view text, size_t pos) const;
  };

  std::vector<AddedTokenSpec> tokens_;
  Trie raw_, normalized_;
  StringMap<int32_t> by_content_;
  std::vector<int32_t> index_by_id_;
  std::unique_ptr<Regex> word_char_;  // \w, for single_word
};

}  // namespace loft
