// Tokenizer over a SentencePiece model (`tokenizer.model` of Llama 1/2 and TinyStories models),
// backed by libsentencepiece. Text is validated as strict UTF-8 before encoding.
#pragma once
#include <sentencepiece_processor.h>

#include <filesystem>
#include <memory>

#include "tokenizer/tokenizer.h"

namespace loft {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Throws loft::Error naming the file when it is missing or not a SentencePiece model.
  explicit SentencePieceTokenizer(const std::filesystem::path& model_file);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string piece(int32_t id) const override;
  std::unique_ptr<StreamDecoder> stream_decoder() const override;

  // Llama 2's LlamaTokenizer default: add_bos_token=True, add_eos_token=False; load_tokenizer()
  // turns it off for a folder whose config.json has no bos_token_id.
  bool adds_bos() const override { return adds_bos_ && bos_id_ >= 0; }
  void set_adds_bos(bool adds) { adds_bos_ = adds; }
  std::string kind() const override { return "sentencepiece"; }
  // The control and unknown pieces (<unk>, <s>, </s>, ...).
  std::vector<AddedToken> added_tokens() const override;

  int32_t vocab_size() const override { return vocab_size_; }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  int32_t unk_id() const override { return unk_id_; }
  int32_t pad_id() const override { return pad_id_; }
  int32_t special_id(std::string_view piece) const override;
  // The loaded model, for exporters that copy its pieces, scores and piece types (GGUF).
  const sentencepiece::SentencePieceProcessor& processor() const { return sp_; }

 private:
  friend class SentencePieceStreamDecoder;
  enum class Kind : uint8_t { kText, kControl, kUnknown, kByte };

  // Throws loft::Error naming `id` when it is outside the vocabulary.
  void check_id(int32_t id) const;
  // The text of a non-byte id as decode() renders it; `at_start` says no text precedes it, so a
  // leading "▁" may be dropped. Sets `*dropped_space` when that drop ends the leading run.
  std::string text_of(int32_t id, bool at_start, bool* dropped_space) const;
  void probe_leading_space_rules();

  std::filesystem::path file_;
  sentencepiece::SentencePieceProcessor sp_;
  std::vector<Kind> kind_;           // per id
  std::vector<unsigned char> byte_;  // per id: the byte of a byte-fallback piece
  std::string unk_surface_;          // what decode() shows for the <unk> id
  int32_t vocab_size_ = 0, bos_id_ = -1, eos_id_ = -1, unk_id_ = -1, pad_id_ = -1;
  // decode() drops the leading "▁" of the first text piece (add_dummy_prefix or
  // remove_extra_whitespaces); with remove_extra_whitespaces it keeps dropping while the text is
  // still empty, so a lone "▁" piece does not end the leading run.
  bool drops_leading_space_ = true, drops_while_empty_ = false;
  bool adds_bos_ = true;
};

}  // namespace loft
