// Text <-> token ids for Llama checkpoints. The first implementation wraps SentencePiece
// (`tokenizer.model`); Llama 3's `tokenizer.json` BPE comes later behind the same interface.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loft {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Ids of `text` without BOS/EOS (callers add them as ids, never as literal text). Throws
  // loft::Error when text is not valid UTF-8, naming the byte offset.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // The text of one id as it appears inside a decoded sequence (for streaming generation).
  virtual std::string piece(int32_t id) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 when the model has none
  virtual int32_t eos_id() const = 0;
  virtual int32_t unk_id() const = 0;
  virtual int32_t pad_id() const = 0;
  // Id of a special/control piece spelled exactly (e.g. "<|eot_id|>"), or -1.
  virtual int32_t special_id(std::string_view piece) const = 0;
};

// Loads the tokenizer of a Hugging Face model folder (tokenizer.model). Throws loft::Error naming
// the folder when no supported tokenizer file is there (and saying so when only tokenizer.json is).
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& model_dir);
// Loads a SentencePiece model file directly.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& model_file);

}  // namespace loft
