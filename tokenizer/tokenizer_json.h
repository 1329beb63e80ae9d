// Reads a Hugging Face tokenizer.json (and the tokenizer_config.json beside it) into the parts of
// a BPE pipeline: model, normalizer, pre-tokenizer, decoder, post-processor and added tokens.
// Every problem is a loft::Error naming the file and what is wrong or unsupported.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoders.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/pre_tokenizers.h"

namespace loft {

// Largest token id accepted in tokenizer.json (2^24 - 1, as config.json's vocab_size bound): the
// model's id -> token table is sized by the largest id, so an id of 2^31 would ask for 64 GB.
inline constexpr int32_t kMaxTokenId = (int32_t(1) << 24) - 1;

struct TokenizerJson {
  std::filesystem::path file;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Normalizer> normalizer;       // null when "normalizer": null
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // null when "pre_tokenizer": null
  DecoderChain decoder;
  // In tokenizers' order of addition; ids checked against what tokenizers would assign.
  std::vector<AddedTokenSpec> added;
  // The post-processor's TemplateProcessing "single" template: special token contents before and
  // after the sequence ($A). Unset when there is none (null, ByteLevel only).
  std::optional<std::vector<std::string>> template_prefix, template_suffix;
  bool byte_level = false;  // a ByteLevel pre-tokenizer: "bpe byte-level"
};

// Throws loft::Error naming `file` when it is missing, not JSON, or not a supported BPE tokenizer.
TokenizerJson read_tokenizer_json(const std::filesystem::path& file);
// The same from an already parsed document (the fuzz target's entry point).
TokenizerJson tokenizer_json_from(const nlohmann::json& root, const std::filesystem::path& file);

// What tokenizer_config.json says about special tokens (transformers' view of the folder).
struct TokenizerConfig {
  std::filesystem::path file;  // empty when the folder has none
  std::string tokenizer_class;
  std::optional<std::string> bos, eos, unk, pad;
  std::vector<std::string> extra_special;      // additional_special_tokens / extra_special_tokens
  std::optional<bool> add_bos, add_eos;        // set when the key is present
};

// Reads `file` when it exists (an empty config otherwise). Throws loft::Error naming it when it is
// not JSON or a field has the wrong type.
TokenizerConfig read_tokenizer_config(const std::filesystem::path& file);
TokenizerConfig tokenizer_config_from(const nlohmann::json& j, const std::filesystem::path& file);

}  // namespace loft
