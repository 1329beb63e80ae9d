// The Llama-family properties through the model, on small random models (no reference needed):
// Mistral's window narrows the attention exactly as a direct masked softmax does, in training,
// prefill and KV-cache decoding; the bias is added after every method's product; Qwen3's per-head
// norm sits between the projection and RoPE; and grad checkpointing and token tiles stay exact
// for every family.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/ops/ops.h"
#include "engine/ops/rope_freq.h"
#include "engine/peft/method.h"
#include "models/llama/bench_model.h"
#include "models/llama/decode.h"
#include "models/llama/memory_estimate.h"
#include "models/llama/model.h"
#include "models/llama/sliding_window.h"
#include "tests/common/every_method.h"
#include "tests/common/test_util.h"
#include "tests/common/tiny_llama.h"

namespace loft::llama {
namespace {

const Device kCpu = Device::cpu();
constexpr int64_t kWindow = 8;

LlamaConfig family(const std::string& type) { return test::tiny_family_config(type); }
LlamaWeights family_weights(const LlamaConfig& c) { return test::tiny_family_weights(c); }

std::unique_ptr<LlamaModel> family_model(const LlamaConfig& c, const std::string& method = "lora",
                                         LlamaWeights* weights = nullptr) {
  MethodOptions m{method, {8, 16.0f}, parse_lora_targets("all"), 0};
  apply_method_invariants(m);
  std::mt19937_64 rng(1);
  auto model = std::make_unique<LlamaModel>(c, weights ? std::move(*weights) : family_weights(c),
                                            make_linear_factory(m, rng));
  test::randomize_adapters(*model);
  return model;
}

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed = 5) {
  std::mt19937_64 tok(seed);
  std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& t : ids) t = id(tok);
  return ids;
}

TEST(SlidingWindow, DocStartNarrowsToTheLastWKeys) {
  // Rows of 6, window 3; the second row holds two documents (the second from position 4).
  std::vector<int32_t> ds = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4};
  apply_sliding_window(ds, 6, 3);
  EXPECT_EQ(ds, (std::vector<int32_t>{0, 0, 0, 1, 2, 3, 0, 0, 0, 1, 4, 4}));
  std::vector<int32_t> same = {0, 0, 0, 0};
  apply_sliding_window(same, 4, 4);  // no row longer than the window: nothing narrows
  apply_sliding_window(same, 4, 0);  // no window
  EXPECT_EQ(same, (std::vector<int32_t>{0, 0, 0, 0}));
  const Tensor t = Tensor::from_vector(std::vector<int32_t>{0, 0, 0, 0, 0}, {5});
  EXPECT_EQ(apply_sliding_window(t, 5, 2).to_int_vector(), (std::vector<int64_t>{0, 0, 1, 2, 3}));
}

// Query t sees keys t − W < j <= t (transformers' sliding_window_overlay), written out directly:
// the whole model's logits with that attention must equal the model's own windowed ones.
TEST(SlidingWindow, ModelEqualsADirectMaskedSoftmax) {
  const LlamaConfig c = family("mistral");
  auto model = family_model(c);
  const int64_t T = 29;
  const std::vector<int32_t> ids = random_ids(T, c.vocab_size);
  std::vector<int32_t> pos(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) pos[size_t(i)] = int32_t(i);
  const LlamaModel::Attend direct = [&](int, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out) {
    const int64_t hq = q.size(1), hkv = k.size(1), D = q.size(2), group = hq / hkv;
    const float scale = 1.0f / std::sqrt(float(D));
    const float *Q = q.ptr<float>(), *K = k.ptr<float>(), *V = v.ptr<float>();
    float* O = out.ptr<float>();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t kh = h / group;
        std::vector<double> s;
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          const bool seen = j <= t && j > t - kWindow;
          double x = -INFINITY;
          if (seen) {
            x = 0;
            for (int64_t e = 0; e < D; ++e) x += double(Q[(t * hq + h) * D + e]) * K[(j * hkv + kh) * D + e];
            x *= scale;
          }
          s.push_back(x);
          m = std::max(m, x);
        }
        for (double& x : s) sum += (x = std::exp(x - m));
        for (int64_t e = 0; e < D; ++e) {
          double o = 0;
          for (int64_t j = 0; j < T; ++j) o += s[size_t(j)] / sum * V[(j * hkv + kh) * D + e];
          O[(t * hq + h) * D + e] = float(o);
        }
      }
  };
  const Tensor want = model->head_logits(model->forward_hidden(
      Tensor::from_vector(ids, {T}), Tensor::from_vector(pos, {T}), direct));
  const ModelBatch b = make_batch(ids, ids, {}, 1, T, kCpu);
  const Tensor got = model->logits(b);
  EXPECT_LT(test::rel_error(got, want), 1e-5);
  // The window matters here: without it the logits are another model's.
  LlamaConfig unwindowed = c;
  unwindowed.sliding_window = 0;
  auto full = family_model(unwindowed);
  EXPECT_GT(test::rel_error(full->logits(b), want), 1e-3);
}

// Generation through the KV cache honours the window: a prefill, a multi-token continuation and
// token-by-token decoding past the window give the full forward's logits for every position.
TEST(SlidingWindow, DecodingThroughTheCacheEqualsTheForward) {
  const LlamaConfig c = family("mistral");
  auto model = family_model(c);
  const int64_t T = 30;
  const std::vector<int32_t> ids = random_ids(T, c.vocab_size, 8);
  const Tensor full = model->logits(make_batch(ids, ids, {}, 1, T, kCpu));
  const std::vector<float> want = full.to_float_vector();
  KvCache cache = KvCache::for_model(*model, 1, 64);
  auto rows_of = [&](int64_t first, int64_t n) {
    return std::vector<float>(want.begin() + first * c.vocab_size, want.begin() + (first + n) * c.vocab_size);
  };
  // Prefill of 11 tokens (longer than the window), then 9 tokens at once, then one at a time.
  Feed prefill{0, {ids.begin(), ids.begin() + 11}, {}};
  for (int64_t r = 0; r < 11; ++r) prefill.rows.push_back(r);
  EXPECT_LT(test::rel_error(decode_step(*model, cache, {prefill}).to_float_vector(), rows_of(0, 11)), 1e-5);
  Feed more{0, {ids.begin() + 11, ids.begin() + 20}, {}};
  for (int64_t r = 0; r < 9; ++r) more.rows.push_back(r);
  EXPECT_LT(test::rel_error(decode_step(*model, cache, {more}).to_float_vector(), rows_of(11, 9)), 1e-5);
  for (int64_t t = 20; t < T; ++t)
    EXPECT_LT(test::rel_error(decode_step(*model, cache, {Feed::last(0, {ids[size_t(t)]})}).to_float_vector(),
                              rows_of(t, 1)),
              1e-5)
        << "position " << t;
}

TEST(SlidingWindow, CachedAttentionRejectsANegativeWindow) {
  const DType f32 = DType::F32;
  Tensor q = Tensor::zeros({1, 1, 4}, f32), kc = Tensor::zeros({1, 4, 1, 4}, f32), vc = Tensor::zeros({1, 4, 1, 4}, f32);
  Tensor out = Tensor::zeros({1, 1, 4}, f32);
  const Tensor slot = Tensor::from_vector(std::vector<int32_t>{0}, {1}), pos = slot;
  EXPECT_THROW(ops::cached_attention(q, kc, vc, slot, pos, 1.0f, out, nullptr, -1), Error);
}

// q, k and v of layer 0 as the attention receives them, for tokens `ids` at positions `pos`.
std::array<std::vector<float>, 3> layer0_qkv(LlamaModel& model, const std::vector<int32_t>& ids,
                                             const std::vector<int32_t>& pos) {
  std::array<std::vector<float>, 3> got;
  const LlamaModel::Attend grab = [&](int layer, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out) {
    if (layer == 0) got = {q.to_float_vector(), k.to_float_vector(), v.to_float_vector()};
    out.zero_();
  };
  const int64_t n = int64_t(ids.size());
  model.forward_hidden(Tensor::from_vector(ids, {n}), Tensor::from_vector(pos, {n}), grab);
  return got;
}

class FamilyBias : public ::testing::TestWithParam<std::string> {};

// At position 0 RoPE is the identity, so q, k and v reach the attention as the projections leave
// them: with Qwen2's biases they are the same model's without biases plus the bias, for every
// method (the bias is added after the method's product, frozen GEMM and adapter alike).
TEST_P(FamilyBias, AddedAfterEveryMethodsProduct) {
  const LlamaConfig c = family("qwen2");
  LlamaWeights with = family_weights(c), without = family_weights(c);
  std::array<std::vector<float>, 3> bias;
  for (Proj p : {Proj::Q, Proj::K, Proj::V}) {
    bias[size_t(p)] = with.layers[0].bias[size_t(p)].to_float_vector();
    for (LlamaLayerWeights& L : without.layers) L.bias[size_t(p)].zero_();
  }
  auto biased = family_model(c, GetParam(), &with), plain = family_model(c, GetParam(), &without);
  const auto a = layer0_qkv(*biased, {17}, {0}), b = layer0_qkv(*plain, {17}, {0});
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(a[i].size(), bias[i].size());
    double worst = 0;
    for (size_t e = 0; e < a[i].size(); ++e) worst = std::max(worst, std::abs(double(a[i][e]) - b[i][e] - bias[i][e]));
    EXPECT_LT(worst, 1e-5) << "q, k, v"[i * 3];
  }
}

INSTANTIATE_TEST_SUITE_P(Methods, FamilyBias, test::every_method(), test::method_test_name);

// Qwen3: q = RoPE(per-head RMSNorm(q_proj(x))), the norm over each head's head_dim values with
// q_norm's weights, before the rotation (they do not commute: position 3 tells them apart).
TEST(QkNorm, EachHeadNormedBeforeRope) {
  const LlamaConfig c = family("qwen3");
  LlamaWeights w = family_weights(c);
  const Tensor q_norm = w.layers[0].q_norm, k_norm = w.layers[0].k_norm;
  const Tensor embed = w.embed, attn_norm = w.layers[0].attn_norm;
  const Tensor wq = w.layers[0].q.clone(), wk = w.layers[0].k.clone();
  auto model = family_model(c, "lora", &w);
  for (Param* p : model->params()) p->value.zero_();  // the adapters add nothing: the base alone
  model->refresh_copies();
  const int32_t id = 41, position = 3;
  const auto got = layer0_qkv(*model, {id}, {position});

  const int64_t H = c.hidden_size, D = c.head_dim;
  Tensor x = Tensor::empty({1, H}, DType::F32), h1 = Tensor::empty({1, H}, DType::F32);
  ops::embedding(embed, Tensor::from_vector(std::vector<int32_t>{id}, {1}), x);
  ops::rmsnorm(x, attn_norm, float(c.rms_norm_eps), h1);
  const Tensor inv = Tensor::from_vector(rope_inv_freq(int(D), c.rope_theta, c.rope_scaling), {D / 2});
  const Tensor at = Tensor::from_vector(std::vector<int32_t>{position}, {1});
  for (auto [wt, norm, heads, i] : {std::tuple{wq, q_norm, c.num_heads, 0}, std::tuple{wk, k_norm, c.num_kv_heads, 1}}) {
    Tensor proj = Tensor::empty({1, heads * D}, DType::F32), normed = Tensor::empty({heads, D}, DType::F32);
    ops::gemm(h1, wt, proj, {.trans_b = true});
    ops::rmsnorm(proj.view({heads, D}), norm, float(c.rms_norm_eps), normed);
    Tensor rotated = normed.view({1, heads, D});
    ops::rope(rotated, at, inv);
    EXPECT_LT(test::rel_error(got[size_t(i)], rotated.to_float_vector()), 1e-6) << "qk"[i];
  }
}

struct Step {
  double loss = 0;
  std::vector<std::vector<float>> grads;
};

Step one_step(const LlamaConfig& c, const std::string& method, bool checkpointing, int64_t seq,
              int64_t tile = 0) {
  auto model = family_model(c, method);
  model->set_grad_checkpointing(checkpointing);
  model->set_token_tile(tile);
  const std::vector<int32_t> ids = random_ids(2 * seq, c.vocab_size);
  std::vector<int32_t> docs(ids.size(), 0);  // two documents in the second row
  for (int64_t i = seq + seq / 2; i < 2 * seq; ++i) docs[size_t(i)] = 1;
  const ModelBatch b = make_batch(ids, ids, docs, 2, seq, kCpu);
  Step s;
  s.loss = model->forward_backward(b, 1.0f).loss_sum;
  for (Param* p : model->params()) s.grads.push_back(p->grad.to_float_vector());
  return s;
}

void expect_same(const Step& a, const Step& b) {
  EXPECT_EQ(a.loss, b.loss);
  ASSERT_EQ(a.grads.size(), b.grads.size());
  ASSERT_FALSE(a.grads.empty());
  for (size_t i = 0; i < a.grads.size(); ++i) EXPECT_EQ(a.grads[i], b.grads[i]) << i;
}

// Checkpointing recomputes the bias, the q/k norms and the window as the kept forward ran them.
TEST(FamilyModel, GradCheckpointingIsExactForEveryFamilyAndMethod) {
  for (const char* type : {"qwen2", "qwen3", "mistral"})
    for (const std::string& method : method_names()) {
      SCOPED_TRACE(std::string(type) + " " + method);
      const LlamaConfig c = family(type);
      expect_same(one_step(c, method, true, 33), one_step(c, method, false, 33));
    }
}

// Token tiles (LlamaModel::set_token_tile) cut the rows, never the attention: bit for bit (LoRA,
// whose numerics are per token).
TEST(FamilyModel, TokenTilesAreExact) {
  for (const char* type : {"qwen2", "qwen3", "mistral"}) {
    SCOPED_TRACE(type);
    const LlamaConfig c = family(type);
    const int64_t seq = ops::kGemmRowBlock + 200;
    expect_same(one_step(c, "lora", true, seq, ops::kGemmRowBlock), one_step(c, "lora", true, seq, 0));
  }
}

// The estimate counts the family's extra tensors: the biases and q/k norm weights among the frozen
// weights, q and k before their norms among the activations.
TEST(FamilyModel, MemoryEstimateCountsBiasAndNorms) {
  MemoryEstimateOptions o;
  o.gpu = false;
  o.batch = 2;
  o.seq = 64;
  const MethodOptions lora{"lora", {8, 16.0f}, parse_lora_targets("all"), 0};
  LlamaConfig qwen2 = family("qwen2"), plain = qwen2;
  plain.bias = {};
  const MethodMemory a = estimate_method_memory(qwen2, o, lora), b = estimate_method_memory(plain, o, lora);
  EXPECT_EQ(a.frozen_weights - b.frozen_weights, 4 * qwen2.num_layers * (qwen2.q_dim() + 2 * qwen2.kv_dim()));
  LlamaConfig qwen3 = family("qwen3"), no_norm = qwen3;
  no_norm.qk_norm = false;
  const MethodMemory n = estimate_method_memory(qwen3, o, lora), m = estimate_method_memory(no_norm, o, lora);
  EXPECT_EQ(n.frozen_weights - m.frozen_weights, 4 * qwen3.num_layers * 2 * qwen3.head_dim);
  const int64_t per_token = 4 * (qwen3.q_dim() + qwen3.kv_dim()) + 4 * (qwen3.num_heads + qwen3.num_kv_heads);
  EXPECT_EQ(n.activations - m.activations, o.batch * o.seq * qwen3.num_layers * per_token);
}

}  // namespace
}  // namespace loft::llama
