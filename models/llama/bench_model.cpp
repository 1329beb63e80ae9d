#include "models/llama/bench_model.h"

#include <random>

#include "engine/ops/ops.h"

namespace loft::llama {

namespace {

struct NamedShape {
  const char* name;
  int64_t hidden, intermediate, layers, heads, kv_heads, vocab;
  // config.json keys of the family beyond Llama's (models/llama/family.cpp reads them as it reads
  // a checkpoint's), "" for a Llama (LlamaForCausalLM).
  const char* family_keys = "";
};
// As scripts/dev/peft_baseline.py's SHAPES; `tiny` keeps CPU runs to seconds. The cousins are the
// public configs of Qwen2.5-7B, Qwen3-8B and Mistral-7B-v0.3; llama-70b is Llama-2-70B's, for
// --shard-backbone over several GPUs (no baseline: PEFT does not fit it on one).
constexpr NamedShape kShapes[] = {
    {"llama-7b", 4096, 11008, 32, 32, 32, 32000},
    {"llama-13b", 5120, 13824, 40, 40, 40, 32000},
    {"llama-70b", 8192, 28672, 80, 64, 8, 32000},
    {"llama3-8b", 4096, 14336, 32, 32, 8, 128256},
    {"tinyllama-1.1b", 2048, 5632, 22, 32, 4, 32000},
    {"qwen2.5-7b", 3584, 18944, 28, 28, 4, 152064, R"("architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "rope_theta": 1000000.0)"},
    {"qwen3-8b", 4096, 12288, 36, 32, 8, 151936,
     R"("architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128, "rope_theta": 1000000.0)"},
    {"mistral-7b", 4096, 14336, 32, 32, 8, 32768,
     R"("architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": null,
         "rope_theta": 1000000.0)"},
    {"tiny", 64, 172, 2, 8, 4, 512},
};

constexpr float kInitStd = 0.02f;

Tensor ones(const Shape& shape, DType dtype, Device device) {
  const size_t n = size_t(shape_numel(shape));
  if (dtype == DType::F32) return Tensor::from_vector(std::vector<float>(n, 1.0f), shape, device);
  const std::vector<uint16_t> bits(n, f32_to_bf16(1.0f));
  return Tensor::from_host(bits.data(), shape, DType::BF16, device);
}

}  // namespace

std::vector<std::string> bench_shape_names() {
  std::vector<std::string> out;
  for (const NamedShape& s : kShapes) out.emplace_back(s.name);
  return out;
}

std::optional<LlamaConfig> bench_shape_config(const std::string& name) {
  for (const NamedShape& s : kShapes) {
    if (name != s.name) continue;
    const std::string family = *s.family_keys ? s.family_keys : R"("architectures": ["LlamaForCausalLM"])";
    return LlamaConfig::from_json_text(
        cat("{", family, R"(, "hidden_size": )", s.hidden,
            R"(, "intermediate_size": )", s.intermediate, R"(, "num_hidden_layers": )", s.layers,
            R"(, "num_attention_heads": )", s.heads, R"(, "num_key_value_heads": )", s.kv_heads,
            R"(, "vocab_size": )", s.vocab, R"(, "max_position_embeddings": 4096})"),
        cat("bench shape ", s.name));
  }
  return std::nullopt;
}

LlamaWeights random_llama_weights(const LlamaConfig& cfg, DType dtype, Device device,
                                  uint64_t seed, bool projections_drawn) {
  LOFT_CHECK(dtype == DType::F32 || dtype == DType::BF16, "random_llama_weights: dtype ",
             dtype_name(dtype), " requested; F32 or BF16 only");
  LlamaWeights w;
  std::mt19937_64 seeds(seed);
  for (const WeightSlot& s : weight_slots(cfg, w)) {
    if (s.shape.size() == 1) {  // RMSNorm weights (and a family's biases: ones too)
      *s.dst = ones(s.shape, dtype, device);
      continue;
    }
    const uint64_t own = seeds();
    if (projections_drawn && s.draw) {
      *s.draw = [shape = s.shape, dtype, device, own] {
        Tensor t = Tensor::empty(shape, dtype, device);
        ops::fill_random(t, own, kInitStd);
        return t;
      };
      continue;
    }
    *s.dst = Tensor::empty(s.shape, dtype, device);
    ops::fill_random(*s.dst, own, kInitStd);
    if (s.dst == &w.embed && embedding_in_host_memory(cfg, device)) {
      // Drawn where every other matrix is (the same values as ever), then moved to host memory
      // before anything else is allocated; its GPU block goes back to the driver.
      *s.dst = s.dst->to(Device::cpu());
      release_cached_memory(device);
    }
  }
  return w;
}

int64_t llama_parameter_count(const LlamaConfig& cfg) {
  LlamaWeights none;
  int64_t n = 0;
  for (const WeightSlot& s : weight_slots(cfg, none)) n += shape_numel(s.shape);
  return n;
}

}  // namespace loft::llama
