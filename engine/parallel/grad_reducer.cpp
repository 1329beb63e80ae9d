#include "engine/parallel/grad_reducer.h"

#include <algorithm>

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
    : comm_(comm), bucket_bytes_(bucket_bytes == 0 ? kDefaultBucketBytes : bucket_bytes),
      overlap_(bucket_bytes > 0), timeout_(timeout) {}

void GradReducer::begin(std::span<Param* const> order) {
  grads_.clear();
  position_.clear();
  std::vector<size_t> bytes;
  for (Param* p : order) {
    LOFT_CHECK(position_.emplace(p, grads_.size()).second, "GradReducer: ", p->name,
               " twice in a step's params");
    bytes.push_back(p->grad.nbytes());
    grads_.push_back(&p->grad);
  }
  buckets_ = plan_buckets(bytes, bucket_bytes_);
  bucket_of_.assign(grads_.size(), 0);
  pending_.clear();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t i = buckets_[b].first; i < buckets_[b].last; ++i) bucket_of_[i] = b;
    pending_.push_back(buckets_[b].last - buckets_[b].first);
  }
  ready_.assign(grads_.size(), 0);
  launched_ = 0;
  open_ = true;
}

void GradReducer::ready(std::span<Param* const> params) {
  LOFT_CHECK(open_, "GradReducer: gradients reported ready outside a step (begin() first)");
  for (const Param* p : params) {
    const auto it = position_.find(p);
    LOFT_CHECK(it != position_.end(), "GradReducer: ", p->name, " is ready but not in the step's params");
    LOFT_CHECK(!ready_[it->second], "GradReducer: ", p->name, " reported ready twice");
    ready_[it->second] = 1;
    --pending_[bucket_of_[it->second]];
  }
  // In plan order, so that every rank launches the same groups in the same sequence.
  while (overlap_ && launched_ + 1 < buckets_.size() && pending_[launched_] == 0) launch(launched_++, {});
}

void GradReducer::reduce_all(std::span<Param* const> params, std::span<Tensor* const> extra) {
  if (!open_) {
    begin(params);
  } else {
    std::vector<char> seen(grads_.size(), 0);
    for (const Param* p : params) {
      const auto it = position_.find(p);
      LOFT_CHECK(it != position_.end() && !seen[it->second], "GradReducer: the params summed are "
                 "not the ", grads_.size(), " the step began with (", p->name, ")");
      seen[it->second] = 1;
    }
    LOFT_CHECK(params.size() == grads_.size(), "GradReducer: ", params.size(),
               " params summed, the step began with ", grads_.size());
  }
  open_ = false;
  for (; launched_ < buckets_.size(); ++launched_)
    launch(launched_, launched_ + 1 == buckets_.size() ? extra : std::span<Tensor* const>{});
  if (buckets_.empty() && !extra.empty()) comm_.all_reduce_sum(extra);
}

void GradReducer::launch(size_t bucket, std::span<Tensor* const> extra) {
  const BucketRange& b = buckets_[bucket];
  std::vector<Tensor*> group(grads_.begin() + ptrdiff_t(b.first), grads_.begin() + ptrdiff_t(b.last));
  group.insert(group.end(), extra.begin(), extra.end());
  comm_.all_reduce_sum(group);
}

void GradReducer::wait() { comm_.wait(timeout_); }

void GradReducer::sum(std::span<Param* const> params, std::span<float> scalars) {
  Tensor on_device;
  std::vector<Tensor*> extra;
  if (!scalars.empty()) {
    on_device = Tensor::from_host(scalars.data(), {int64_t(scalars.size())}, DType::F32, comm_.device());
    extra.push_back(&on_device);
  }
  reduce_all(params, extra);
  wait();
  if (!scalars.empty()) {
    const Tensor back = on_device.to(Device::cpu());
    std::copy_n(back.ptr<float>(), scalars.size(), scalars.data());
  }
}

std::vector<uint64_t> GradReducer::gather(uint64_t value) {
  const int world = comm_.world_size();
  std::vector<float> slots(size_t(4 * world), 0.0f);
  for (int k = 0; k < 4; ++k) slots[size_t(4 * comm_.rank() + k)] = float((value >> (16 * k)) & 0xffff);
  Tensor t = Tensor::from_vector(slots, {int64_t(slots.size())}, comm_.device());
  Tensor* one[] = {&t};
  comm_.all_reduce_sum(one);
  wait();
  const Tensor back = t.to(Device::cpu());
  std::vector<uint64_t> out(size_t(world), 0);
  for (int r = 0; r < world; ++r)
    for (int k = 0; k < 4; ++k)
      out[size_t(r)] |= uint64_t(back.ptr<float>()[4 * r + k]) << (16 * k);
  return out;
}

}  // namespace loft
