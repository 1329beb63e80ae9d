#include "tests/common/llama3_checkpoint.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/io/safetensors_writer.h"
#include "engine/ops/ops.h"
#include "models/llama/bench_model.h"
#include "tests/common/test_util.h"

namespace loft::test {

namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw Error(cat("cannot write ", path.string()));
}

fs::path llama3_tokenizer_dir() { return data_path("tokenizers/llama3"); }

}  // namespace

std::string llama3_config_json(bool tied) {
  // As Llama 3.1 8B's config.json, at a size the CPU trains in seconds.
  const nlohmann::json j = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_act", "silu"},
      {"hidden_size", 64},
      {"intermediate_size", 128},
      {"num_hidden_layers", 2},
      {"num_attention_heads", 4},
      {"num_key_value_heads", 2},
      {"vocab_size", kLlama3Vocab},
      {"max_position_embeddings", 131072},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 500000.0},
      {"rope_scaling",
       {{"rope_type", "llama3"},
        {"factor", 8.0},
        {"low_freq_factor", 1.0},
        {"high_freq_factor", 4.0},
        {"original_max_position_embeddings", 8192}}},
      {"tie_word_embeddings", tied},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"bos_token_id", kBeginOfText},
      {"eos_token_id", {kEndOfText, kEomId, kEotId}},
      {"torch_dtype", "bfloat16"}};
  return j.dump(2) + "\n";
}

llama::LlamaConfig write_llama3_checkpoint(const fs::path& dir, const Llama3CheckpointOptions& o) {
  fs::create_directories(dir);
  const std::string config_text = llama3_config_json(o.tied);
  write_text(dir / "config.json", config_text);
  // Llama 3.1 8B Instruct's generation_config.json.
  write_text(dir / "generation_config.json",
             nlohmann::json{{"bos_token_id", kBeginOfText},
                            {"eos_token_id", {kEndOfText, kEomId, kEotId}},
                            {"do_sample", true},
                            {"temperature", 0.6},
                            {"top_p", 0.9}}
                     .dump(2) + "\n");
  const llama::LlamaConfig cfg = llama::LlamaConfig::from_json_text(config_text, (dir / "config.json").string());
  // The CPU makes F32 weights; stored as bf16, as Llama 3 ships.
  llama::LlamaWeights w = llama::random_llama_weights(cfg, DType::F32, Device::cpu(), o.seed);
  std::map<std::string, Tensor> tensors;
  for (const llama::WeightSlot& s : llama::weight_slots(cfg, w)) {
    if (s.shape.size() == 2) ops::scale(*s.dst, o.init_std / 0.02f);  // random_llama_weights' std is 0.02
    Tensor bf16 = Tensor::empty(s.shape, DType::BF16);
    ops::convert(*s.dst, bf16);
    tensors.emplace(s.name, std::move(bf16));
  }
  write_safetensors(dir / "model.safetensors", tensors);
  fs::copy_file(llama3_tokenizer_dir() / "tokenizer.json", dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  fs::copy_file(llama3_tokenizer_dir() / (o.instruct ? "tokenizer_config.instruct.json" : "tokenizer_config.json"),
                dir / "tokenizer_config.json", fs::copy_options::overwrite_existing);
  return cfg;
}

}  // namespace loft::test
