// Sums the adapter gradients over the data-parallel ranks (docs/multi-gpu.md, step 2) through a
// Communicator, in buckets: consecutive params of the backward's order are packed until a bucket
// would pass the cap (25 MiB by default, as PyTorch DDP), and each bucket is one all_reduce_sum
// (one NCCL group). The model says during its last backward which gradients are final (ready());
// each bucket is launched as soon as all its params are, in plan order, so the all-reduce of the
// last layers runs while the backward of the first ones goes on. The last bucket always waits for
// sum(), which adds the scalars to its group: the groups are then the same on every rank however
// its backward's notifications fell.
#pragma once
#include <chrono>
#include <cstddef>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/parallel/gradient_sync.h"
#include "engine/parallel/nccl_comm.h"
#include "engine/tensor/param.h"

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
  // bucket_bytes 0: buckets of the default cap, every one launched after the backward (sum()),
  // none during it (--grad-bucket-mib 0: no overlap; the same sums).
  explicit GradReducer(Communicator& comm, size_t bucket_bytes = kDefaultBucketBytes,
                       std::chrono::milliseconds timeout = kDefaultNcclTimeout);

  // GradientSync: plans the buckets over `order` (the backward's order) for this step.
  void begin(std::span<Param* const> order) override;
  // GradientSync: marks these params ready and launches, in plan order, every bucket but the
  // last whose params all are. Error for a param begin() did not name, or one marked twice.
  void ready(std::span<Param* const> params) override;
  // Launches every bucket not launched yet (planned over `params` when begin() was not called;
  // else `params` must be begin()'s, in any order); `extra` (F32 tensors on the communicator's
  // device) rides in the last bucket's group. Ends the step.
  void reduce_all(std::span<Param* const> params, std::span<Tensor* const> extra = {});
  // Waits for what was launched; throws Error (the communicator aborted) when a peer fails or the
  // timeout passes.
  void wait();
  // GradientSync: reduce_all with the scalars in the last bucket's group, then wait.
  void sum(std::span<Param* const> params, std::span<float> scalars) override;
  // GradientSync: an all-gather through one all_reduce_sum: each rank writes its value as four
  // 16-bit pieces (exact in fp32) into its own slots of a zeroed [4·world] tensor, so the sum is
  // every rank's value in place.
  std::vector<uint64_t> gather(uint64_t value) override;
  void abort() override { comm_.abort(); }

  // The buckets of the last step (for tests and logs), as positions in its order.
  const std::vector<BucketRange>& buckets() const { return buckets_; }

 private:
  void launch(size_t bucket, std::span<Tensor* const> extra);

  Communicator& comm_;
  size_t bucket_bytes_;
  bool overlap_;  // launch buckets from ready(), during the backward
  std::chrono::milliseconds timeout_;
  // This step's plan: the grads in begin()'s order, where each param sits in it, its buckets,
  // each bucket's params not ready yet, and how many buckets were launched.
  std::vector<Tensor*> grads_;
  std::unordered_map<const Param*, size_t> position_;
  std::vector<BucketRange> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<char> ready_;
  std::vector<size_t> pending_;
  size_t launched_ = 0;
  bool open_ = false;  // begin() was called and the step's reduce_all has not run yet
};

}  // namespace loft
