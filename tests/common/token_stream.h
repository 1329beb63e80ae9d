// A BatchSource of fixed random micro-batches for trainer tests: micro-batch k is 2 rows of 17
// tokens of the tiny Llama's vocabulary (seeded by k), with k % 3 leading targets masked so the
// micro-batches' target counts differ; `limit` micro-batches in all. Its position is k, so a
// resume continues exactly.
#pragma once
#include "engine/train/trainer.h"

namespace loft::test {

class TokenStream : public BatchSource {
 public:
  explicit TokenStream(Device device = Device::cpu(), int64_t limit = 1000)
      : device_(device), limit_(limit) {}
  std::optional<ModelBatch> next() override;
  nlohmann::json state() const override { return k_; }
  void restore(const nlohmann::json& s) override { k_ = s.get<int64_t>(); }

 private:
  Device device_;
  int64_t k_ = 0, limit_;
};

}  // namespace loft::test
