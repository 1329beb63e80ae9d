#include "tests/common/method_model.h"

#include <random>

#include "app/method_flags.h"
#include "engine/peft/method.h"
#include "models/llama/bench_model.h"

namespace loft::test {

std::unique_ptr<llama::LlamaModel> method_model(const std::string& shape, const std::string& method,
                                                DType dtype, Device device, int rank,
                                                uint64_t weight_seed, uint64_t init_seed,
                                                ShardGather* shard, int num_layers) {
  llama::LlamaConfig c = *llama::bench_shape_config(shape);
  if (num_layers > 0) c.num_layers = num_layers;
  MethodOptions m{"", {rank, 16.0f}, parse_lora_targets("all"), 0};
  m.method = method.substr(0, method.find(':'));
  app::apply_method_variants(method, m);
  apply_method_invariants(m);
  std::mt19937_64 init(init_seed);
  return std::make_unique<llama::LlamaModel>(
      c, llama::random_llama_weights(c, dtype, device, weight_seed, /*projections_drawn=*/shard != nullptr),
      make_linear_factory(m, init), shard);
}

ModelBatch random_token_batch(int64_t vocab, int64_t rows, int64_t seq, uint64_t seed) {
  std::mt19937_64 tok(seed);
  std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
  std::vector<int32_t> ids(size_t(rows * seq));
  for (int32_t& t : ids) t = id(tok);
  return make_batch(ids, ids, {}, rows, seq, Device::cpu());
}

}  // namespace loft::test
