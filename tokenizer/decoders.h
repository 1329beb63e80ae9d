// tokenizer.json decoders: token strings -> text, as tokenizers' Decoder::decode_chain runs them
// (ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence; none = tokens joined by a
// space), plus an incremental form for streaming and the text of a single token.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace loft {

struct DecoderStep {
  enum class Kind { byte_level, metaspace, replace, byte_fallback, fuse, strip } kind = Kind::fuse;
  std::shared_ptr<const Regex> pattern;  // replace
  std::string content;                   // replace: the replacement; metaspace: the ▁ character
  bool single_char_pattern = false;      // replace: the pattern is one literal character
  bool drop_first = false;               // metaspace: prepend_scheme is not "never"
  char32_t strip_char = 0;               // strip
  size_t start = 0, stop = 0;            // strip
};

// Incremental decoding: push() returns text made final by a token, finish() what is held back.
class TokenTextStream {
 public:
  virtual ~TokenTextStream() = default;
  virtual std::string push(std::string token) = 0;
  virtual std::string finish() = 0;
};

class DecoderChain {
 public:
  DecoderChain() = default;  // tokenizer.json "decoder": null
  explicit DecoderChain(std::vector<DecoderStep> steps) : present_(true), steps_(std::move(steps)) {}

  std::string decode(std::vector<std::string> tokens) const;
  // The text of `token` inside a decoded sequence, after other text (raw bytes for byte tokens).
  std::string piece(const std::string& token) const;
  // A fresh incremental decoder whose output, pushed token by token, equals decode() byte for
  // byte. Chains that cannot be decided token by token (e.g. ByteFallback after Fuse) hold every
  // token until finish().
  std::unique_ptr<TokenTextStream> stream() const;
  bool streamable() const;

 private:
  bool present_ = false;
  std::vector<DecoderStep> steps_;
};

}  // namespace loft
