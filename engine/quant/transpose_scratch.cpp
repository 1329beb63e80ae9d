#include "engine/quant/transpose_scratch.h"

#include <map>
#include <mutex>
#include <utility>

#include "engine/quant/code_transpose.h"

namespace loft::quant {

std::shared_ptr<TransposeScratch> TransposeScratch::of(Device device) {
  static std::mutex mu;
  // Weak: the layers own the scratch, so it goes with the model (and never outlives the CUDA
  // allocator at exit).
  static std::map<std::pair<int, int>, std::weak_ptr<TransposeScratch>> live;
  std::lock_guard lock(mu);
  std::weak_ptr<TransposeScratch>& slot = live[{int(device.type), device.index}];
  std::shared_ptr<TransposeScratch> s = slot.lock();
  if (!s) slot = s = std::make_shared<TransposeScratch>(device);
  return s;
}

Tensor TransposeScratch::transposed(const Tensor& codes) {
  LOFT_CHECK(codes.dim() == 2 && codes.device() == device_, "TransposeScratch: codes ", codes.str(),
             " must be 2-D on ", device_.str());
  const size_t need = codes.nbytes();
  // The old buffer goes back to the allocator; the one stream orders it after its last reader.
  if (need > capacity()) buf_ = Tensor::empty({int64_t(need)}, DType::U8, device_);
  // The view keeps the buffer alive (a caller may hold it past a later call that grows it).
  Tensor t = Tensor::wrap(buf_.data(), {codes.size(1), codes.size(0)}, codes.dtype(), device_,
                          std::make_shared<Tensor>(buf_));
  transpose_codes(codes, t);
  return t;
}

}  // namespace loft::quant
