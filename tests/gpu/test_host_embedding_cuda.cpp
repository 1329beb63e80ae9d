// The input embedding table kept in host memory on a GPU (embedding_in_host_memory): the batch's
// rows gathered on the host and uploaded must train exactly as the on-GPU lookup did (a gather is
// a copy): same loss and every adapter gradient bit for bit. Prints the time of a step each way.
#include <chrono>
#include <cstdio>
#include <random>

#include "engine/device/memory.h"
#include "engine/peft/method.h"
#include "models/llama/bench_model.h"
#include "models/llama/model.h"
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

struct Step {
  double loss = 0;
  std::vector<std::vector<float>> grads;
  double us = 0;
};

Step one_step(const llama::LlamaConfig& cfg, bool table_on_gpu, const ModelBatch& b) {
  llama::LlamaWeights w = llama::random_llama_weights(cfg, DType::BF16, kGpu, 7);
  EXPECT_TRUE(w.embed.device().is_cpu());  // untied on a GPU: host memory
  if (table_on_gpu) w.embed = w.embed.to(kGpu);
  MethodOptions m;
  m.targets = parse_lora_targets("all");
  std::mt19937_64 rng(3);
  llama::LlamaModel model(cfg, std::move(w), make_linear_factory(m, rng));
  model.set_grad_checkpointing(true);
  Step s;
  model.forward_backward(b, 1.0f);  // warm-up: kernel choices, allocator
  for (Param* p : model.params()) p->grad.zero_();
  synchronize(kGpu);
  const auto start = std::chrono::steady_clock::now();
  s.loss = model.forward_backward(b, 1.0f).loss_sum;
  synchronize(kGpu);
  s.us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  for (Param* p : model.params()) s.grads.push_back(p->grad.to_float_vector());
  return s;
}

TEST(HostEmbeddingCuda, TrainsBitForBitAsTheGpuTable) {
  LOFT_REQUIRE_GPU();
  // An awkward token count on the tiny shape; a real one on TinyLlama (32000 × 2048 table).
  for (auto [shape, seq] : {std::pair<const char*, int64_t>{"tiny", 129}, {"tinyllama-1.1b", 512}}) {
    const llama::LlamaConfig cfg = *llama::bench_shape_config(shape);
    ASSERT_FALSE(cfg.tie_word_embeddings);
    const int64_t rows = 2;
    std::mt19937 rng(11);
    const Tensor ids = random_ids({rows * seq}, int32_t(cfg.vocab_size), rng);
    std::vector<int32_t> v;
    for (int64_t id : ids.to_int_vector()) v.push_back(int32_t(id));
    const ModelBatch b = make_batch(v, v, {}, rows, seq, kGpu);
    const Step host = one_step(cfg, false, b), gpu = one_step(cfg, true, b);
    std::printf("%s %lldx%lld: forward_backward %.0f us (table on the host) vs %.0f us (on the GPU)\n",
                shape, (long long)rows, (long long)seq, host.us, gpu.us);
    EXPECT_EQ(host.loss, gpu.loss) << shape;
    ASSERT_EQ(host.grads.size(), gpu.grads.size());
    for (size_t i = 0; i < host.grads.size(); ++i) EXPECT_EQ(host.grads[i], gpu.grads[i]) << shape << " param " << i;
  }
}

}  // namespace
}  // namespace loft::test
