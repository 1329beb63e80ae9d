#include "tests/common/tiled_step.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/ops/ops.h"
#include "engine/peft/method.h"
#include "models/llama/bench_model.h"
#include "models/llama/model.h"
#include "tests/common/tiny_llama.h"

namespace loft::test {

namespace {

constexpr int64_t kRows = 2, kSeq = 1224;

// The tiny Llama with room for 1224 positions.
llama::LlamaConfig config() {
  llama::LlamaConfig c = tiny_llama_config();
  c.max_position_embeddings = 4096;
  return c;
}

// Rows [first, first + rows) of the batch.
ModelBatch batch(const llama::LlamaConfig& c, Device device, int64_t first, int64_t rows) {
  std::mt19937_64 tok(5);
  std::uniform_int_distribution<int32_t> id(0, int32_t(c.vocab_size - 1));
  std::vector<int32_t> ids(size_t(kRows * kSeq));
  for (int32_t& t : ids) t = id(tok);
  // Two documents in each row, so the attention's masks cross a tile boundary.
  std::vector<int32_t> doc_ids(ids.size(), 0);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t i = 700; i < kSeq; ++i) doc_ids[size_t(r * kSeq + i)] = 1;
  const auto part = [&](const std::vector<int32_t>& v) {
    return std::vector<int32_t>(v.begin() + first * kSeq, v.begin() + (first + rows) * kSeq);
  };
  return make_batch(part(ids), part(ids), part(doc_ids), rows, kSeq, device);
}

}  // namespace

TiledStep tiled_step(const std::string& method, int64_t tile, Device device, bool split_rows,
                     bool logits) {
  const llama::LlamaConfig c = config();
  MethodOptions m{method, {8, 16.0f}, parse_lora_targets("all"), 0};
  apply_method_invariants(m);
  std::mt19937_64 rng(1);
  const DType dt = device.is_cuda() ? DType::BF16 : DType::F32;
  llama::LlamaModel model(c, llama::random_llama_weights(c, dt, device, 3), make_linear_factory(m, rng));
  model.set_grad_checkpointing(true);
  model.set_token_tile(tile);
  randomize_adapters(model);
  TiledStep s;
  if (split_rows) {
    for (int64_t r = 0; r < kRows; ++r)
      s.loss += model.forward_backward(batch(c, device, r, 1), 1.0f).loss_sum;
  } else {
    s.loss = model.forward_backward(batch(c, device, 0, kRows), 1.0f).loss_sum;
  }
  for (Param* p : model.params()) s.grads.push_back(p->grad.to_float_vector());
  if (logits) s.logits = model.logits(batch(c, device, 0, kRows)).to_float_vector();
  return s;
}

double worst_gradient_off(const TiledStep& a, const TiledStep& b) {
  double worst = a.grads.size() == b.grads.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < a.grads.size() && i < b.grads.size(); ++i)
    worst = std::max(worst, rel_l2(a.grads[i], b.grads[i]));
  return worst;
}

}  // namespace loft::test
