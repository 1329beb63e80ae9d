#include "engine/dist/grad_reducer.h"

#include "engine/core/error.h"

namespace loft {

std::vector<BucketRange> plan_buckets(std::span<const size_t> bytes, size_t cap) {
  LOFT_CHECK(cap > 0, "plan_buckets: a bucket cap of 0 bytes");
  std::vector<BucketRange> out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    // A new bucket when there is none yet, or this param would push a non-empty one past the cap.
    if (out.empty() || (out.back().bytes > 0 && out.back().bytes + bytes[i] > cap))
      out.push_back({i, i, 0});
    out.back().last = i + 1;
    out.back().bytes += bytes[i];
  }
  return out;
}

GradReducer::GradReducer(Communicator& comm, size_t bucket_bytes,
                         std::chrono::milliseconds timeout)
    : comm_(comm), bucket_bytes_(bucket_bytes), timeout_(timeout) {
  LOFT_CHECK(bucket_bytes > 0, "GradReducer: a bucket cap of 0 bytes");
}

void GradReducer::reduce_all(std::span<Param* const> params) {
  std::vector<size_t> bytes;
  std::vector<Tensor*> grads;
  bytes.reserve(params.size());
  grads.reserve(params.size());
  for (Param* p : params) {
    bytes.push_back(p->grad.nbytes());
    grads.push_back(&p->grad);
  }
  buckets_ = plan_buckets(bytes, bucket_bytes_);
  for (const BucketRange& b : buckets_)
    comm_.all_reduce_sum(std::span<Tensor* const>(grads).subspan(b.first, b.last - b.first));
}

void GradReducer::wait() { comm_.wait(timeout_); }

void GradReducer::sum(std::span<Param* const> params) {
  reduce_all(params);
  wait();
}

}  // namespace loft
