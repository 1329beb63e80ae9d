// What a model folder says about generating text, gathered in one place: generation_config.json
// (eos_token_id one id or a list, bos/pad ids, sampling defaults), config.json's eos_token_id(s)
// and the tokenizer's EOS. The union of their end ids is what stops generation; nothing is
// invented (Llama 3 Instruct's <|eot_id|> stops only where one of them lists it).
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace loft::llama {

// generation_config.json as transformers writes it; fields it does not hold stay empty.
struct GenerationConfig {
  std::optional<int64_t> bos_token_id, pad_token_id;
  std::vector<int64_t> eos_token_ids;
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k, max_new_tokens;
  std::optional<bool> do_sample;

  // Parses and checks ranges; `source` names the file in errors ("DIR/generation_config.json:
  // field top_p ...").
  static GenerationConfig from_json_text(const std::string& text, const std::string& source);
  // transformers' spelling; a single eos id is written as a number, several as a list.
  nlohmann::json to_json() const;
};

// One id that stops generation and the first place that names it.
struct StopId {
  int32_t id = -1;
  std::string from;  // "generation_config.json", "config.json", "tokenizer", "chat template llama3"
};

struct GenerationSettings {
  std::optional<GenerationConfig> file;  // generation_config.json, when the folder has one
  std::vector<StopId> stops;             // without duplicates, in the order of load_generation_settings

  std::vector<int32_t> stop_ids() const;
  // Adds `id` unless it is already a stop id (a trained end-of-turn token, say).
  void add_stop(int32_t id, std::string from);
  // generation_config.json for what decodes later (the adapter folder): the folder's own fields,
  // with eos_token_id = every stop id.
  nlohmann::json to_generation_config_json() const;
};

// Reads MODEL_DIR/generation_config.json and MODEL_DIR/config.json where present and takes the
// tokenizer's EOS. Stop ids come in that order: generation_config.json's eos_token_id(s), then
// config.json's, then the tokenizer's EOS. Every id (bos/pad/eos) must lie inside the vocabulary
// (the tokenizer's, and config.json's vocab_size when given); throws loft::Error naming the file
// and the field otherwise, or for a file that does not parse.
GenerationSettings load_generation_settings(const std::filesystem::path& model_dir, const Tokenizer& tok);

// Adds the eos_token_id(s) of ADAPTER_DIR/generation_config.json (what finetune wrote: the model's
// stop ids and the end-of-turn token the adapter was trained to emit); nothing when the adapter
// has no such file (one PEFT made). Throws loft::Error naming the file for an id outside
// [0, vocab) or a file that does not parse.
void add_adapter_stops(GenerationSettings& settings, const std::filesystem::path& adapter_dir, int64_t vocab);

}  // namespace loft::llama
