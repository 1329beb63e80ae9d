// Text <-> token ids for Llama checkpoints, behind one interface: SentencePiece (`tokenizer.model`)
// and Hugging Face `tokenizer.json` BPE (byte-level as in Llama 3, or SentencePiece-style as
// transformers converts Llama 2 models).
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loft {

// Decodes ids pushed one at a time: the concatenation of every push() result and of finish()
// equals decode(all pushed ids), byte for byte.
class StreamDecoder {
 public:
  virtual ~StreamDecoder() = default;
  // Text made final by this id; empty while a byte-fallback character is still incomplete.
  // Throws loft::Error naming an id outside the vocabulary.
  virtual std::string push(int32_t id) = 0;
  // Text held back at the end (an incomplete UTF-8 character, as decode() renders it).
  virtual std::string finish() = 0;
};

// A token the tokenizer matches as a whole in text before its model runs (tokenizer.json's
// `added_tokens`; SentencePiece's control pieces).
struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = true;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Ids of `text` without BOS/EOS (callers add them as ids, never as literal text), as Hugging Face
  // encodes with add_special_tokens=False: added tokens spelled in the text (e.g. "<|eot_id|>")
  // become their ids. Throws loft::Error when text is not valid UTF-8, naming the byte offset.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Ids as transformers encodes with its default add_special_tokens=True: encode() plus the BOS
  // (and EOS) the post-processor / tokenizer_config.json add (see adds_bos()).
  std::vector<int32_t> encode_with_special(std::string_view text) const;
  // The text of `ids` as Hugging Face decodes with skip_special_tokens=False: a tokenizer.json's
  // special tokens are written out ("<|eot_id|>"); SentencePiece's control ids give no text.
  // Throws loft::Error naming the first id outside [0, vocab_size).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // decode() of `ids` without the special ones (AddedToken::special), as Hugging Face decodes with
  // skip_special_tokens=True (lm-eval's generations, chat output).
  std::string decode_skip_special(const std::vector<int32_t>& ids) const;
  // stream_decoder() that drops special added tokens (BOS, <|eot_id|>, ...) before decoding, so its
  // text equals decode_skip_special() of the pushed ids: what generation shows (lm-eval decodes
  // generations with skip_special_tokens=True).
  std::unique_ptr<StreamDecoder> stream_decoder_skip_special() const;
  // The text of one id as it appears inside a decoded sequence, after other text: SentencePiece's
  // control ids are empty (a tokenizer.json special token is its text, as decode() writes it), a
  // byte-fallback or byte-level id is its raw bytes (maybe part of a UTF-8 character).
  // Joining pieces can differ from decode() at the start of a sequence (SentencePiece drops the
  // leading space there) and on invalid byte runs; stream_decoder() reproduces decode() exactly.
  virtual std::string piece(int32_t id) const = 0;
  // A fresh incremental decoder for streaming generation (see StreamDecoder). It refers to this
  // tokenizer, which must outlive it.
  virtual std::unique_ptr<StreamDecoder> stream_decoder() const = 0;

  // Whether transformers' default encoding prepends BOS / appends EOS (tokenizer.json's
  // post-processor and tokenizer_config.json's add_bos_token/add_eos_token; for a folder without
  // tokenizer.json, BOS when the config has a bos_token_id).
  virtual bool adds_bos() const = 0;
  virtual bool adds_eos() const { return false; }
  // "sentencepiece", "bpe byte-level" or "bpe sentencepiece-style", for `loft info`.
  virtual std::string kind() const = 0;
  // Tokens matched whole in text (special or not), by id.
  virtual std::vector<AddedToken> added_tokens() const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 when the model has none
  virtual int32_t eos_id() const = 0;
  virtual int32_t unk_id() const = 0;
  virtual int32_t pad_id() const = 0;
  // Id of a special/control piece spelled exactly (e.g. "<|eot_id|>"), or -1.
  virtual int32_t special_id(std::string_view piece) const = 0;
};

// Loads the tokenizer of a Hugging Face model folder: tokenizer.json when present (as transformers
// prefers it, with the tokenizer_config.json beside it), else tokenizer.model (BOS prepended when
// config.json has a bos_token_id). Throws loft::Error naming the folder when neither is there.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& model_dir);
// Loads a SentencePiece model file directly.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& model_file);

}  // namespace loft
