// Tokenizer over a Hugging Face tokenizer.json with a BPE model, behaving as the `tokenizers`
// library does: added tokens are found first, the text between is normalized and pre-tokenized,
// each piece goes through the BPE model; decoding runs the file's decoder chain. Byte-level
// (Llama 3: Split regex + ByteLevel) and SentencePiece-style (Llama 2 as transformers converts
// it: Metaspace + byte_fallback) files both load. BOS/EOS follow transformers: tokenizer_config.json
// add_bos_token/add_eos_token when set, else the post-processor's template.
#pragma once
#include <filesystem>
#include <memory>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json.h"

namespace loft {

class BpeTokenizer final : public Tokenizer {
 public:
  // `config` is the folder's tokenizer_config.json as read (empty when there is none).
  BpeTokenizer(TokenizerJson tj, const TokenizerConfig& config);

  std::vector<int32_t> encode(std::string_view text) const override;
  // Special tokens are written out, as tokenizers decodes with skip_special_tokens=False.
  std::string decode(const std::vector<int32_t>& ids) const override;
  // A special token's text is its content, as decode() writes it.
  std::string piece(int32_t id) const override;
  std::unique_ptr<StreamDecoder> stream_decoder() const override;

  bool adds_bos() const override { return adds_bos_; }
  bool adds_eos() const override { return adds_eos_; }
  std::string kind() const override { return byte_level_ ? "bpe byte-level" : "bpe sentencepiece-style"; }
  std::vector<AddedToken> added_tokens() const override;

  int32_t vocab_size() const override { return vocab_size_; }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  int32_t unk_id() const override { return unk_id_; }
  int32_t pad_id() const override { return pad_id_; }
  // Any added token (special or not) spelled exactly.
  int32_t special_id(std::string_view piece) const override;

  // The parsed parts, for exporters that copy the vocabulary and merges (GGUF).
  const BpeModel& model() const { return *model_; }
  const AddedVocabulary& added_vocabulary() const { return *added_; }
  bool byte_level() const { return byte_level_; }

 private:
  friend class BpeStreamDecoder;
  // The token string of `id` (added content or model token); throws naming an id out of range,
  // nullptr for an id in range that no token has (tokenizers skips those).
  const std::string* token_of(int32_t id) const;
  int32_t id_of(const std::string& content) const;  // added token, else model; -1
  void encode_text(PreToken text, std::vector<int32_t>& ids) const;

  std::filesystem::path file_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  DecoderChain decoder_;
  std::unique_ptr<AddedVocabulary> added_;
  bool byte_level_ = false, adds_bos_ = false, adds_eos_ = false;
  int32_t vocab_size_ = 0, bos_id_ = -1, eos_id_ = -1, unk_id_ = -1, pad_id_ = -1;
};

// Loads `dir`/tokenizer.json with `dir`/tokenizer_config.json when present.
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::filesystem::path& dir);

}  // namespace loft
