#include "tests/common/tiny_llama.h"

#include <random>

namespace loft::test {

llama::LlamaConfig tiny_llama_config() {
  return llama::LlamaConfig::from_json_text(R"({"hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "vocab_size": 300, "max_position_embeddings": 256})",
                                            "tiny-llama");
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
