// Sums the adapter gradients over the data-parallel ranks (docs/multi-gpu.md, step 2) through a
// Communicator, in buckets: consecutive params are packed until a bucket would pass the cap
// (25 MiB by default, as PyTorch DDP), and each bucket is one all_reduce_sum (one NCCL group).
// Buckets exist so that a later change can launch each one as soon as the backward has written
// its gradients (the params are listed in the order the backward finishes them); for now
// reduce_all launches every bucket and wait() waits for them.
#pragma once
#include <chrono>
#include <cstddef>
#include <span>
#include <vector>

#include "engine/dist/nccl_comm.h"
#include "engine/peft/adapted_linear.h"
#include "engine/train/train_step.h"

namespace loft {

inline constexpr size_t kDefaultBucketBytes = size_t(25) << 20;

// Params [first, last) of the list given to plan_buckets.
struct BucketRange {
  size_t first = 0;
  size_t last = 0;
  size_t bytes = 0;
  bool operator==(const BucketRange&) const = default;
};

// Splits params of the given byte sizes, in order, into consecutive buckets of at most `cap`
// bytes; a param bigger than the cap gets a bucket of its own. Empty params ride along in the
// current bucket. Pure, so every rank computes the same plan from the same sizes.
std::vector<BucketRange> plan_buckets(std::span<const size_t> bytes, size_t cap);

class GradReducer final : public GradientSync {
 public:
  explicit GradReducer(Communicator& comm, size_t bucket_bytes = kDefaultBucketBytes,
                       std::chrono::milliseconds timeout = kDefaultNcclTimeout);

  // Queues the sum over the ranks of every param's grad (in place), bucket by bucket; `extra`
  // (F32 tensors on the communicator's device) rides in the last bucket's group.
  void reduce_all(std::span<Param* const> params, std::span<Tensor* const> extra = {});
  // Waits for what reduce_all queued; throws Error (the communicator aborted) when a peer fails
  // or the timeout passes.
  void wait();
  // GradientSync: reduce_all with the scalars in the last bucket's group, then wait.
  void sum(std::span<Param* const> params, std::span<float> scalars) override;
  // GradientSync: an all-gather through one all_reduce_sum: each rank writes its value as four
  // 16-bit pieces (exact in fp32) into its own slots of a zeroed [4·world] tensor, so the sum is
  // every rank's value in place.
  std::vector<uint64_t> gather(uint64_t value) override;
  void abort() override { comm_.abort(); }

  // The buckets of the last reduce_all (for tests and logs).
  const std::vector<BucketRange>& buckets() const { return buckets_; }

 private:
  Communicator& comm_;
  size_t bucket_bytes_;
  std::chrono::milliseconds timeout_;
  std::vector<BucketRange> buckets_;
};

}  // namespace loft
