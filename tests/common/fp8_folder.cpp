#include "tests/common/fp8_folder.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/io/safetensors_writer.h"

namespace loft::test {

namespace {

using nlohmann::json;

const char* kProjections[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                              "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                              "mlp.down_proj"};

Tensor random_codes(const Shape& shape, uint8_t max_code, std::mt19937& rng) {
  std::vector<uint8_t> b(size_t(shape_numel(shape)));
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& c : b) {
    do c = uint8_t(byte(rng));
    while ((c & 0x7f) > max_code);  // 0x7f is E4M3's NaN
  }
  return Tensor::from_host(b.data(), shape, DType::F8_E4M3);
}

Tensor random_as(const Shape& shape, DType dtype, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(size_t(shape_numel(shape)));
  for (float& x : v) x = dist(rng);
  if (dtype == DType::F32) return Tensor::from_vector(v, shape);
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = dtype == DType::BF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
  return Tensor::from_host(h.data(), shape, dtype);
}

json quantization_config(const Fp8FolderOptions& o) {
  if (o.layout == Fp8Layout::TransformersBlock)
    return {{"activation_scheme", "dynamic"}, {"dequantize", false},
            {"modules_to_not_convert", nullptr}, {"quant_method", "fp8"},
            {"scale_fmt", "float"}, {"weight_block_size", {o.block_rows, o.block_cols}}};
  const char* strategy = o.layout == Fp8Layout::CtTensor ? "tensor" : "channel";
  return {{"quant_method", "compressed-tensors"},
          {"format", "float-quantized"},
          {"quantization_status", "compressed"},
          {"ignore", {"lm_head"}},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}},
              {"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", strategy},
                           {"symmetric", true}, {"dynamic", false}}},
              {"input_activations",
               {{"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"dynamic", false}}}}}}}};
}

}  // namespace

std::vector<float> fp8_reference_values(const Tensor& codes, const Tensor& scales, int64_t rows,
                                        int64_t cols) {
  const std::vector<float> s = scales.to_float_vector();
  const int64_t out = codes.size(0), in = codes.size(1);
  if (rows == 0) rows = out;
  if (cols == 0) cols = in;
  int64_t grid_cols = 0;  // blocks per row, a partial one at the right edge included
  for (int64_t c = 0; c < in; c += cols) ++grid_cols;
  EXPECT_EQ(int64_t(s.size()), grid_cols * ((out + rows - 1) / rows)) << "scale count";
  std::vector<float> w(size_t(out * in));
  for (int64_t i = 0; i < out; ++i)
    for (int64_t j = 0; j < in; ++j)
      w[size_t(i * in + j)] =
          fp8_e4m3_to_f32(codes.ptr<uint8_t>()[i * in + j]) * s[size_t((i / rows) * grid_cols + j / cols)];
  return w;
}

std::vector<std::string> fp8_projection_names(int64_t layers) {
  std::vector<std::string> out;
  for (int64_t l = 0; l < layers; ++l)
    for (const char* p : kProjections) out.push_back(cat("model.layers.", l, ".", p, ".weight"));
  return out;
}

void Fp8Folder::write(const std::filesystem::path& dir) const {
  write_safetensors(dir / "model.safetensors", tensors);
  std::ofstream(dir / "config.json") << config;
}

Fp8Folder write_fp8_folder(const std::filesystem::path& dir, const Fp8FolderOptions& o) {
  std::mt19937 rng(o.seed);
  const int64_t head_dim = o.hidden / o.heads, q = o.heads * head_dim, kv = o.kv_heads * head_dim;
  const std::map<std::string, std::pair<int64_t, int64_t>> shapes{
      {"self_attn.q_proj", {q, o.hidden}},     {"self_attn.k_proj", {kv, o.hidden}},
      {"self_attn.v_proj", {kv, o.hidden}},    {"self_attn.o_proj", {o.hidden, q}},
      {"mlp.gate_proj", {o.ffn, o.hidden}},    {"mlp.up_proj", {o.ffn, o.hidden}},
      {"mlp.down_proj", {o.hidden, o.ffn}}};
  Fp8Folder f;
  auto& t = f.tensors;
  t["model.embed_tokens.weight"] = random_as({o.vocab, o.hidden}, DType::BF16, rng, -0.05f, 0.05f);
  t["lm_head.weight"] = random_as({o.vocab, o.hidden}, DType::BF16, rng, -0.05f, 0.05f);
  t["model.norm.weight"] = random_as({o.hidden}, DType::BF16, rng, 0.9f, 1.1f);
  for (int64_t l = 0; l < o.layers; ++l) {
    const std::string pre = cat("model.layers.", l, ".");
    t[pre + "input_layernorm.weight"] = random_as({o.hidden}, DType::BF16, rng, 0.9f, 1.1f);
    t[pre + "post_attention_layernorm.weight"] = random_as({o.hidden}, DType::BF16, rng, 0.9f, 1.1f);
    for (const char* p : kProjections) {
      const auto [out, in] = shapes.at(p);
      const std::string w = pre + p + ".";
      t[w + "weight"] = random_codes({out, in}, o.max_code, rng);
      switch (o.layout) {
        case Fp8Layout::TransformersBlock:
          t[w + "weight_scale_inv"] =
              random_as({(out + o.block_rows - 1) / o.block_rows, (in + o.block_cols - 1) / o.block_cols},
                        o.scale_dtype, rng, o.scale_lo, o.scale_hi);
          break;
        case Fp8Layout::CtTensor:
          t[w + "weight_scale"] = random_as(o.scalar_scale ? Shape{} : Shape{1}, o.scale_dtype,
                                            rng, o.scale_lo, o.scale_hi);
          t[w + "input_scale"] = random_as({1}, o.scale_dtype, rng, 0.01f, 0.02f);
          break;
        case Fp8Layout::CtChannel:
          t[w + "weight_scale"] = random_as({out, 1}, o.scale_dtype, rng, o.scale_lo, o.scale_hi);
          t[w + "input_scale"] = random_as({1}, o.scale_dtype, rng, 0.01f, 0.02f);
          break;
      }
    }
  }
  const json config{{"architectures", {"LlamaForCausalLM"}},
                    {"model_type", "llama"},
                    {"hidden_size", o.hidden},
                    {"intermediate_size", o.ffn},
                    {"num_hidden_layers", o.layers},
                    {"num_attention_heads", o.heads},
                    {"num_key_value_heads", o.kv_heads},
                    {"head_dim", head_dim},
                    {"vocab_size", o.vocab},
                    {"max_position_embeddings", 512},
                    {"rms_norm_eps", 1e-6},
                    {"tie_word_embeddings", false},
                    {"dtype", "bfloat16"},
                    {"quantization_config", quantization_config(o)}};
  f.config = config.dump(2);
  f.write(dir);
  return f;
}

}  // namespace loft::test
