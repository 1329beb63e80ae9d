// The files beside the weights that make an exported folder a model people load: config.json (the
// base's, with quantization_config set for an FP8 export or removed, dtype bfloat16),
// generation_config.json (the adapter's when finetune wrote one: it holds the trained template's
// stop ids; else the base's), and the tokenizer files with the chat template as the base has them.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

namespace loft::exporter {

// The tokenizer and chat-template files copied when present: tokenizer.json, tokenizer.model,
// tokenizer_config.json, special_tokens_map.json, added_tokens.json, chat_template.jinja,
// chat_template.json.
const std::vector<std::string>& tokenizer_files();

// Writes config.json, generation_config.json and the tokenizer files into `out`.
// `quantization_config`: the object to set, or nullopt to write the model unquantized.
void write_model_metadata(const std::filesystem::path& model_dir,
                          const std::filesystem::path& adapter_dir, const std::filesystem::path& out,
                          const std::optional<nlohmann::json>& quantization_config);

// generation_config.json from the adapter (else the base) into `out`, when either has one.
void copy_generation_config(const std::filesystem::path& model_dir,
                            const std::filesystem::path& adapter_dir,
                            const std::filesystem::path& out);

}  // namespace loft::exporter
