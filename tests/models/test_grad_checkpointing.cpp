// Grad checkpointing recomputes a block's forward before its backward, and skips what no backward
// reads (the down projection's frozen product and the block output). That must change nothing:
// per method, one step with checkpointing gives the same loss and every adapter gradient bit for
// bit as one step that kept the activations (the CPU is deterministic, so equality is exact).
#include <gtest/gtest.h>

#include <random>

#include "engine/peft/method.h"
#include "models/llama/bench_model.h"
#include "models/llama/model.h"
#include "tests/common/tiny_llama.h"

namespace loft::llama {
namespace {

struct Step {
  double loss = 0;
  std::vector<std::vector<float>> grads;
};

Step one_step(const std::string& method, const std::string& targets, bool checkpointing) {
  const LlamaConfig c = test::tiny_llama_config();
  const Device cpu = Device::cpu();
  MethodOptions m{method, {8, 16.0f}, parse_lora_targets(targets), 0};
  apply_method_invariants(m);
  std::mt19937_64 rng(1);
  LlamaModel model(c, random_llama_weights(c, DType::F32, cpu, 3), make_linear_factory(m, rng));
  model.set_grad_checkpointing(checkpointing);
  test::randomize_adapters(model);
  std::mt19937_64 tok(5);
  std::uniform_int_distribution<int32_t> id(0, int32_t(c.vocab_size - 1));
  std::vector<int32_t> ids(2 * 33);
  for (int32_t& t : ids) t = id(tok);
  const ModelBatch b = make_batch(ids, ids, {}, 2, 33, cpu);
  Step s;
  s.loss = model.forward_backward(b, 1.0f).loss_sum;
  for (Param* p : model.params()) s.grads.push_back(p->grad.to_float_vector());
  return s;
}

TEST(GradCheckpointing, SameLossAndGradientsAsKeptActivations) {
  for (const std::string& method : method_names())
    for (const char* targets : {"all", "q_proj,v_proj"}) {  // the second leaves down_proj frozen
      SCOPED_TRACE(std::string(method) + " on " + targets);
      const Step kept = one_step(method, targets, false), gc = one_step(method, targets, true);
      EXPECT_EQ(gc.loss, kept.loss);
      ASSERT_EQ(gc.grads.size(), kept.grads.size());
      ASSERT_FALSE(kept.grads.empty());
      for (size_t i = 0; i < kept.grads.size(); ++i) EXPECT_EQ(gc.grads[i], kept.grads[i]) << i;
    }
}

}  // namespace
}  // namespace loft::llama
