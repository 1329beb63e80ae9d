// A few AdamW steps on random tokens (vocab 512, two rows of 64), so an adapter's B is far from
// zero and the adapter matters in a test that compares scores with and without it.
#pragma once
#include <random>
#include <vector>

#include "engine/optim/adamw.h"
#include "models/llama/model.h"
#include "tests/common/test_util.h"

namespace loft::test {

inline void train_a_little(llama::LlamaModel& model, uint32_t steps) {
  AdamW opt(model.params(), {});
  for (uint32_t step = 0; step < steps; ++step) {
    std::mt19937 rng(step);
    const Tensor ids = random_ids({128}, 512, rng);
    std::vector<int32_t> v(ids.ptr<int32_t>(), ids.ptr<int32_t>() + 128);
    const ModelBatch b = make_batch(v, v, {}, 2, 64, Device::cpu());
    model.forward_backward(b, 1.0f / float(b.target_count));
    opt.step(1e-2);
    model.after_step();
  }
}

}  // namespace loft::test
