// ShardGather (engine/parallel/sharded_backbone.h) for replicas on the CPU that run in threads,
// one per rank, in tests: every gather is a collective, as NCCL's all-gather is. Rank r's k-th
// gather of a layer waits until every rank has brought its share to its own k-th gather of that
// layer, so shares that change between gathers (FALQON's row update writes them) are seen as each
// rank held them at that point. A rank left waiting 60 s throws naming the layer (ranks whose
// gathers do not match would otherwise hang the test).
// The ranks take turns: each computes only while it holds the turn (take_turn .. give_turn
// around its work), which a gather gives up while it waits. Replicas on one CPU share the
// device's scratch buffers (FALQON's transpose scratch), as replicas on one GPU would, so only
// one may compute at a time; on GPUs each rank has its own.
#pragma once
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/parallel/sharded_backbone.h"

namespace loft::test {

class ThreadShards {
 public:
  explicit ThreadShards(int world) {
    for (int r = 0; r < world; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r, world));
  }
  ShardGather& rank(int r) { return *ranks_.at(size_t(r)); }
  void take_turn() { turn_.lock(); }
  void give_turn() { turn_.unlock(); }

 private:
  struct Round {
    std::vector<Tensor> shares;  // copies, as each rank brought them
    int arrived = 0, left = 0;
  };

  class Rank final : public ShardGather {
   public:
    Rank(ThreadShards& all, int rank, int world) : all_(all), rank_(rank), world_(world) {}
    int rank() const override { return rank_; }
    int world_size() const override { return world_; }
    void gather(int layer, const Tensor& local, Tensor& full, int slot) override {
      (void)slot;
      LOFT_CHECK(full.nbytes() == size_t(world_) * local.nbytes(), "ThreadShards: ", full.str(),
                 " for ", world_, " shares of ", local.str());
      const std::pair<int, int64_t> key{layer, count_[layer]++};
      all_.give_turn();  // the others run on to their own gather of the layer
      struct Retake {
        ThreadShards& all;
        ~Retake() { all.take_turn(); }
      } retake{all_};
      std::unique_lock<std::mutex> lk(all_.mu_);
      Round& round = all_.rounds_[key];  // map nodes stay put until erased
      if (round.shares.empty()) round.shares.resize(size_t(world_));
      round.shares[size_t(rank_)] = local.clone();
      ++round.arrived;
      all_.cv_.notify_all();
      if (!all_.cv_.wait_for(lk, std::chrono::seconds(60), [&] { return round.arrived == world_; }))
        throw Error(cat("ThreadShards: rank ", rank_, " waited 60 s for the other ranks' gather ",
                        key.second, " of layer ", layer));
      for (int r = 0; r < world_; ++r)
        full.slice(int64_t(r) * local.numel(), local.numel()).copy_from(round.shares[size_t(r)]);
      if (++round.left == world_) all_.rounds_.erase(key);
    }
    void join(int slot) override { (void)slot; }

   private:
    ThreadShards& all_;
    int rank_, world_;
    std::map<int, int64_t> count_;  // gathers of each layer so far
  };

  std::vector<std::unique_ptr<Rank>> ranks_;
  std::mutex turn_;  // held by the rank that computes
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, int64_t>, Round> rounds_;
};

}  // namespace loft::test
