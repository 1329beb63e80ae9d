// The tokenizer metadata llama.cpp's convert_hf_to_gguf.py writes for a Llama model folder, built
// from loft's own tokenizer readers (no Python, no re-parsing of the vocabulary):
//  - tokenizer.model present: tokenizer.ggml.model "llama" (SentencePiece): every piece, its score
//    and type (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte), padded to the
//    config's vocab_size with "[PADi]"; tokenizer_config.json's added_tokens_decoder overrides;
//  - else tokenizer.json, SentencePiece-style (byte fallback): "llama" as gguf-py's LlamaHfVocab
//    does (scores -1000, <0xXX> pieces BYTE, special ids CONTROL);
//  - else tokenizer.json, byte-level: "gpt2" with the merges and tokenizer.ggml.pre named by
//    llama.cpp's fingerprint of the tokenizer (sha256 of the ids of its probe text: Llama 3's is
//    "llama-bpe", or "smaug-bpe" when its tokenizer.json adds no BOS); added tokens are CONTROL
//    when special (or spelled <|...|>), else USER_DEFINED.
// Special ids, add_bos/add_eos and the chat template follow gguf-py's SpecialVocab: named tokens
// of tokenizer_config.json found among tokenizer.json's added tokens, then config.json's
// *_token_id; add_*_token written when tokenizer_config.json sets it or the post-processor adds
// the token (else llama.cpp's default applies); its chat_template (or chat_template.jinja).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "export/gguf/gguf_writer.h"
#include "tokenizer/tokenizer.h"

namespace loft::gguf {

enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct Vocab {
  std::string model;  // "llama" or "gpt2"
  std::string pre;    // "default", "llama-bpe", ...
  std::vector<std::string> tokens;
  std::vector<float> scores;         // "llama" only
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;   // "gpt2" only: "left right", spaces inside a part as U+0120
  std::optional<uint32_t> bos, eos, unk, pad;
  std::optional<bool> add_bos, add_eos;
  std::string chat_template;  // empty: none
};

// Reads the tokenizer of `model_dir` for a model of `vocab_size` tokens. Throws loft::Error naming
// the file when there is no tokenizer, or a byte-level tokenizer whose pre-tokenizer llama.cpp
// does not know.
Vocab read_vocab(const std::filesystem::path& model_dir, int64_t vocab_size);

// llama.cpp's pre-tokenizer fingerprint: sha256 of the Python list text of the ids (with BOS) of
// convert_hf_to_gguf.py's probe text.
std::string pre_tokenizer_hash(const std::vector<int32_t>& ids);
std::vector<int32_t> pre_tokenizer_probe_ids(const Tokenizer& tok);

// Writes the tokenizer.* keys.
void set_vocab_metadata(Writer& w, const Vocab& v);

}  // namespace loft::gguf
