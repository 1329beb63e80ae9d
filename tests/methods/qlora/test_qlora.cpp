// QLoRA: every frozen projection stored NF4-DQ and decoded per GEMM. The model equals the one
// built from the dequantized weights; the merged weight is deq(NF4(W)) + (α/r)·B·A; it trains.
#include "engine/io/safetensors_checkpoint.h"
#include "engine/optim/adamw.h"
#include "engine/peft/lora_linear.h"
#include "engine/peft/method.h"
#include "engine/quant/nf4.h"
#include "models/llama/loading.h"
#include "models/llama/weights.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

std::filesystem::path stories() { return test::data_path("models/stories260K-hf"); }

ModelBatch sample_batch(int64_t vocab) {
  std::mt19937 rng(5);
  const Tensor ids = test::random_ids({2 * 48}, int32_t(vocab), rng);
  std::vector<int32_t> v;
  for (int64_t x : ids.to_int_vector()) v.push_back(int32_t(x));
  return make_batch(v, v, {}, 2, 48, Device::cpu());
}

TEST(QLora, EqualsTheModelOfDequantizedWeights) {
  std::mt19937_64 rng1(3), rng2(3);
  MethodOptions q{"qlora", {8, 16.0f}, parse_lora_targets("all")};
  auto qmodel = llama::load_model(stories(), Device::cpu(), make_linear_factory(q, rng1));
  // Reference: dense LoRA on weights replaced by deq(NF4(W)), same adapter init (same seed).
  const auto cfg = llama::load_llama_config(stories());
  auto w = llama::load_llama_weights(SafetensorsCheckpoint::open(stories()), cfg, DType::F32, Device::cpu());
  for (auto& L : w.layers)
    for (Tensor* t : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) *t = dequantize_nf4(quantize_nf4(*t));
  MethodOptions d{"lora", {8, 16.0f}, parse_lora_targets("all")};
  llama::LlamaModel ref(cfg, std::move(w), make_linear_factory(d, rng2));
  // Give B a value so the adapter path counts.
  for (auto* m : {qmodel.get(), &ref})
    for (Param* p : m->params())
      if (p->name.ends_with("lora_B")) {
        std::vector<float> v(size_t(p->value.numel()));
        for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * float(int(i % 7) - 3);
        p->value.copy_from(Tensor::from_vector(v, p->value.shape()));
      }
  qmodel->after_step();
  ref.after_step();
  const ModelBatch b = sample_batch(cfg.vocab_size);
  EXPECT_LT(test::rel_error(qmodel->logits(b), ref.logits(b)), 1e-6);
  const LossSums s1 = qmodel->forward_backward(b, 1.0f / float(b.target_count));
  const LossSums s2 = ref.forward_backward(b, 1.0f / float(b.target_count));
  EXPECT_NEAR(s1.loss_sum, s2.loss_sum, 1e-6 * std::abs(s2.loss_sum));
  const auto pq = qmodel->params(), pr = ref.params();
  ASSERT_EQ(pq.size(), pr.size());
  for (size_t i = 0; i < pq.size(); ++i) EXPECT_LT(test::rel_error(pq[i]->grad, pr[i]->grad), 1e-5) << pq[i]->name;
}

TEST(QLora, MergedWeightIsDequantizedPlusAdapter) {
  std::mt19937_64 rng(1);
  MethodOptions q{"qlora", {4, 8.0f}, {"q_proj"}};
  auto model = llama::load_model(stories(), Device::cpu(), make_linear_factory(q, rng));
  auto* lora = dynamic_cast<LoraLinear*>(model->linears()[0].second);
  ASSERT_NE(lora, nullptr);
  std::vector<float> bv(size_t(lora->lora_b().value.numel()), 0.02f);
  lora->lora_b().value.copy_from(Tensor::from_vector(bv, lora->lora_b().value.shape()));
  const auto cfg = llama::load_llama_config(stories());
  const auto ckpt = SafetensorsCheckpoint::open(stories());
  const Tensor w = ckpt.tensor("model.layers.0.self_attn.q_proj.weight").clone();
  Tensor want = dequantize_nf4(quantize_nf4(w));
  ops::gemm(lora->lora_b().value, lora->lora_a().value, want, {.alpha = 2.0f, .beta = 1.0f});
  EXPECT_LT(test::rel_error(lora->merged_weight(), want), 1e-6);
}

TEST(QLora, TrainsOnTheCpu) {
  std::mt19937_64 rng(2);
  MethodOptions q{"qlora", {8, 16.0f}, parse_lora_targets("all")};
  auto model = llama::load_model(stories(), Device::cpu(), make_linear_factory(q, rng));
  AdamW opt(model->params(), {});
  const ModelBatch b = sample_batch(model->config().vocab_size);
  double first = 0, last = 0;
  for (int step = 0; step < 15; ++step) {
    const LossSums s = model->forward_backward(b, 1.0f / float(b.target_count));
    (step == 0 ? first : last) = s.loss_sum / double(s.tokens);
    opt.step(5e-3);
    model->after_step();
  }
  EXPECT_LT(last, first - 0.3) << first << " -> " << last;
}

}  // namespace
}  // namespace loft
