#include "tests/common/token_stream.h"

#include <random>

#include "tests/common/tiny_llama.h"

namespace loft::test {

std::optional<ModelBatch> TokenStream::next() {
  if (k_ == limit_) return std::nullopt;
  const llama::LlamaConfig c = tiny_llama_config();
  std::mt19937_64 tok(uint64_t(500 + k_));
  std::uniform_int_distribution<int32_t> id(0, int32_t(c.vocab_size - 1));
  std::vector<int32_t> ids(2 * 17);
  for (int32_t& t : ids) t = id(tok);
  std::vector<int32_t> targets = ids;
  for (int64_t i = 0; i < k_ % 3; ++i) targets[size_t(i)] = -100;
  ++k_;
  return make_batch(ids, targets, {}, 2, 17, device_);
}

}  // namespace loft::test
