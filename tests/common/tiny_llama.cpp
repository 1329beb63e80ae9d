#include "tests/common/tiny_llama.h"

namespace loft::test {

llama::LlamaConfig tiny_llama_config() {
  return llama::LlamaConfig::from_json_text(R"({"hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "vocab_size": 300, "max_position_embeddings": 256})",
                                            "tiny-llama");
}

}  // namespace loft::test
