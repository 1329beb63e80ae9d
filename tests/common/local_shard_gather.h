// ShardGather (engine/parallel/sharded_backbone.h) for replicas of one process on the CPU, in
// tests: each rank's shares are kept as they are made, and a gather copies every rank's share of
// the layer (frozen codes never change, so no rank needs to wait for another; CPU ops run as they
// are called, so there is nothing to join).
#pragma once
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/parallel/sharded_backbone.h"

namespace loft::test {

class LocalShards {
 public:
  explicit LocalShards(int world) {
    for (int r = 0; r < world; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r, world));
  }
  ShardGather& rank(int r) { return *ranks_.at(size_t(r)); }
  int gathers() const { return gathers_; }  // every rank's, so far

 private:
  class Rank final : public ShardGather {
   public:
    Rank(LocalShards& all, int rank, int world) : all_(all), rank_(rank), world_(world) {}
    int rank() const override { return rank_; }
    int world_size() const override { return world_; }
    void share(int layer, const Tensor& local) override { all_.shares_[{rank_, layer}] = local; }
    void gather(int layer, const Tensor& local, Tensor& full, int slot) override {
      (void)slot;
      LOFT_CHECK(full.nbytes() == size_t(world_) * local.nbytes(), "LocalShards: ", full.str(),
                 " for ", world_, " shares of ", local.str());
      for (int r = 0; r < world_; ++r) {
        const auto it = all_.shares_.find({r, layer});
        LOFT_CHECK(it != all_.shares_.end(), "LocalShards: rank ", r, " has no share of layer ", layer);
        full.slice(int64_t(r) * local.numel(), local.numel()).copy_from(it->second);
      }
      ++all_.gathers_;
    }
    void join(int slot) override { (void)slot; }

   private:
    LocalShards& all_;
    int rank_, world_;
  };
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::map<std::pair<int, int>, Tensor> shares_;
  int gathers_ = 0;
};

}  // namespace loft::test
