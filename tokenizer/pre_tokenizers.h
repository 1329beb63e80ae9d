// tokenizer.json pre-tokenizers: cut the text between added tokens into the pieces the BPE model
// encodes one by one. Supported: Split (Regex or String pattern, every delimiter behaviour,
// invert), ByteLevel (GPT-2's alphabet, add_prefix_space, use_regex), Metaspace (▁, prepend_scheme
// always/first/never, split) and Sequence; tokenizer_json.cpp rejects the others by name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/pre_token.h"
#include "tokenizer/regex.h"

namespace loft {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by what this pre-tokenizer makes of them; empty pieces are dropped.
  virtual void pre_tokenize(PreTokens& pieces) const = 0;
};

// What a Split does with the delimiters its pattern matches (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Regex pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(PreTokens& pieces) const override;

 private:
  Regex pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex);
  void pre_tokenize(PreTokens& pieces) const override;

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> gpt2_;  // GPT-2's pattern, when use_regex
};

enum class PrependScheme { always, first, never };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split);
  void pre_tokenize(PreTokens& pieces) const override;

 private:
  std::string replacement_;  // one character, UTF-8
  PrependScheme scheme_;
  bool split_;
  Regex space_, replacement_re_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(PreTokens& pieces) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

// Cuts `t` into pieces at the matches of `pattern` (inverted: at the non-matches) as
// NormalizedString::split does, appending the non-empty pieces to `out`.
void split_pre_token(const PreToken& t, const Regex& pattern, SplitBehavior behavior, bool invert, PreTokens& out);

}  // namespace loft
