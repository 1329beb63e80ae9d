#include "tests/common/tiny_llama.h"

#include <random>

#include "engine/ops/ops.h"
#include "models/llama/bench_model.h"

namespace loft::test {

llama::LlamaConfig tiny_llama_config() {
  return llama::LlamaConfig::from_json_text(R"({"hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "vocab_size": 300, "max_position_embeddings": 256})",
                                            "tiny-llama");
}

llama::LlamaConfig tiny_family_config(const std::string& type) {
  const std::string extra = type == "qwen3" ? R"(, "head_dim": 32)" : type == "mistral" ? R"(, "sliding_window": 8)" : "";
  return llama::LlamaConfig::from_json_text(
      R"({"model_type": ")" + type + R"(", "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300,
    "max_position_embeddings": 4096, "rope_theta": 1000000.0)" + extra + "}",
      type + "-tiny");
}

llama::LlamaWeights tiny_family_weights(const llama::LlamaConfig& c) {
  llama::LlamaWeights w = llama::random_llama_weights(c, DType::F32, Device::cpu(), 3);
  uint64_t seed = 11;
  for (llama::LlamaLayerWeights& L : w.layers) {
    for (Tensor& b : L.bias)
      if (b.defined()) ops::fill_random(b, seed++, 0.5f);
    for (Tensor* n : {&L.q_norm, &L.k_norm}) {
      if (!n->defined()) continue;
      ops::fill_random(*n, seed++, 0.2f);
      std::vector<float> v = n->to_float_vector();
      for (float& x : v) x += 1.0f;
      *n = Tensor::from_vector(v, n->shape());
    }
  }
  return w;
}

void randomize_adapters(llama::LlamaModel& model) {
  std::mt19937 init(9);
  std::normal_distribution<float> n(0.0f, 0.02f);
  for (Param* p : model.params()) {
    std::vector<float> v(size_t(p->value.numel()));
    for (float& x : v) x = n(init);
    p->value.copy_from(Tensor::from_vector(v, p->value.shape()));
  }
  model.refresh_copies();
}

}  // namespace loft::test
