// tokenizer.json normalizers: rewrite a piece of text before pre-tokenization (and the content of
// added tokens marked "normalized"). Supported: NFC (Qwen), Prepend, Replace (String or Regex
// pattern) and Sequence; tokenizer_json.cpp rejects the others by name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/pre_token.h"
#include "tokenizer/regex.h"

namespace loft {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(PreToken& t) const = 0;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(PreToken& t) const override;

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(PreToken& t) const override;

 private:
  Regex pattern_;
  std::string content_;
};

// Unicode canonical composition (tokenizers' NFC), through utf8proc: Qwen's tokenizer.json
// composes "e" + U+0301 into "é" before byte-level BPE sees it.
class NfcNormalizer final : public Normalizer {
 public:
  void normalize(PreToken& t) const override;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(PreToken& t) const override {
    for (const auto& p : parts_) p->normalize(t);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

// Replaces every match of `pattern` in `t` with `content` (NormalizedString::replace), keeping
// PreToken::zero_prefix right. Shared by the Replace normalizer and Metaspace.
void replace_matches(PreToken& t, const Regex& pattern, const std::string& content);

}  // namespace loft
