// A random-init model of one of bench's shapes (models/llama/bench_model.h) trained by a method
// item as bench's --method takes it ("hot:lqs"), on every projection with r = `rank`, alpha 16:
// the same weights (weight_seed) and adapter init (init_seed) at every call, so that replicas and
// reruns start identical. With `shard`, each projection is drawn only when the model builds its
// layer and the backbone is sharded layer by layer as it is built (the same values either way).
// `num_layers` > 0 replaces the shape's layer count.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "models/llama/model.h"

namespace loft::test {

std::unique_ptr<llama::LlamaModel> method_model(const std::string& shape, const std::string& method,
                                                DType dtype, Device device, int rank = 8,
                                                uint64_t weight_seed = 3, uint64_t init_seed = 1,
                                                ShardGather* shard = nullptr, int num_layers = 0);

// `rows` rows of `seq` random token ids below `vocab` on the CPU, their own targets, the same for
// the same `seed`: the batch every replica of a test takes.
ModelBatch random_token_batch(int64_t vocab, int64_t rows, int64_t seq, uint64_t seed = 7);

}  // namespace loft::test
