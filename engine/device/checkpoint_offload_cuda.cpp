// CheckpointOffload on CUDA. The caching allocator hands blocks out in the compute stream's order,
// so every copy on the side stream first waits for an event recorded on the compute stream when
// its buffer was handed over, and the compute stream waits for a copy's event before the buffer it
// read is let go (store) or the one it wrote is used (fetch). Neither wait stalls the compute
// stream in practice: a copy is queued a whole layer before the wait, and room_for paces the
// optional tensors to the link's measured speed.
#include <algorithm>
#include <vector>

#include "engine/device/checkpoint_offload.h"
#include "engine/device/cuda_context.h"
#include "engine/device/pinned_memory.h"

namespace loft {

namespace {

cudaEvent_t new_event(bool timing = false) {
  cudaEvent_t e;
  LOFT_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return e;
}

float elapsed_ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  LOFT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

class CudaCheckpointOffload final : public CheckpointOffload {
 public:
  CudaCheckpointOffload(int device, size_t layers, size_t items)
      : dev_(device), items_(items), slots_(layers * items) {
    LOFT_CHECK(items > 0, "checkpoint offload: no tensors a layer");
    cuda::set_device(dev_);
    LOFT_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    handed_ = new_event();
    for (Slot& s : slots_) {
      s.done = new_event();
      s.start = new_event(true);
      s.end = new_event(true);
    }
    for (cudaEvent_t* e : {&fwd_start_, &fwd_end_}) *e = new_event(true);
    stalls_.resize(layers);
    for (Stall& w : stalls_) w = {new_event(true), new_event(true), false};
    layer_bytes_.assign(layers, 0);
  }
  ~CudaCheckpointOffload() override {
    cuda::set_device(dev_);  // keeps the thread's cached current device true (cuda_context.h)
    cudaStreamSynchronize(copy_);  // no copy may outlive its buffers
    for (Slot& s : slots_)
      for (cudaEvent_t e : {s.done, s.start, s.end}) cudaEventDestroy(e);
    for (Stall& w : stalls_)
      for (cudaEvent_t e : {w.before, w.after}) cudaEventDestroy(e);
    for (cudaEvent_t e : {fwd_start_, fwd_end_, handed_}) cudaEventDestroy(e);
    cudaStreamDestroy(copy_);
  }

  void store(size_t l, size_t item, const Tensor& x) override {
    Slot& s = slot(l, item);
    cuda::set_device(dev_);
    const size_t bytes = x.nbytes();
    if (!s.host || s.bytes != bytes) {
      s.host = allocate_pinned_host(bytes, Device::cuda(dev_));
      s.bytes = bytes;
    }
    s.shape = x.shape();
    s.dtype = x.dtype();
    after_compute();
    LOFT_CUDA_CHECK(cudaEventRecord(s.start, copy_));
    LOFT_CUDA_CHECK(cudaMemcpyAsync(s.host->data(), x.data(), bytes, cudaMemcpyDeviceToHost, copy_));
    LOFT_CUDA_CHECK(cudaEventRecord(s.end, copy_));
    LOFT_CUDA_CHECK(cudaEventRecord(s.done, copy_));
    s.timed = in_forward_;
    layer_bytes_[l] += bytes;
    // Copies of layers two or more below were queued over a layer ago: their device memory can
    // go now (the layer below's may have been queued only midway through it). The compute
    // stream's wait is timed, so pacing can leave it out of the compute time.
    Stall& w = stalls_[l];
    bool waited = false;
    for (size_t i = 0; i < slots_.size(); ++i)
      if (Slot& o = slots_[i]; o.device.defined() && i / items_ + 1 < l) {
        if (in_forward_ && !w.used && !waited)
          LOFT_CUDA_CHECK(cudaEventRecord(w.before, cuda::stream(dev_)));
        waited = true;
        LOFT_CUDA_CHECK(cudaStreamWaitEvent(cuda::stream(dev_), o.done, 0));
        o.device = Tensor();
      }
    if (waited && in_forward_ && !w.used) {  // one timed wait a layer: its first store's
      LOFT_CUDA_CHECK(cudaEventRecord(w.after, cuda::stream(dev_)));
      w.used = true;
    }
    s.device = x;
    s.on_host = true;
  }

  void prefetch(size_t l) override {
    cuda::set_device(dev_);
    bool queued = false;
    for (size_t item = 0; item < items_; ++item) {
      Slot& s = slot(l, item);
      // Still on the device (the last block's), fetched already, or never stored (fetch says).
      if (s.device.defined() || !s.on_host) continue;
      s.device = Tensor::empty(s.shape, s.dtype, Device::cuda(dev_));
      if (!queued) after_compute();
      queued = true;
      LOFT_CUDA_CHECK(cudaMemcpyAsync(s.device.data(), s.host->data(), s.bytes, cudaMemcpyHostToDevice, copy_));
      LOFT_CUDA_CHECK(cudaEventRecord(s.done, copy_));
    }
  }

  void begin_forward() override {
    cuda::set_device(dev_);
    if (measured_) pace_from_last_forward();
    measured_ = false;
    for (Slot& s : slots_) s.timed = false;
    for (Stall& w : stalls_) w.used = false;
    std::fill(layer_bytes_.begin(), layer_bytes_.end(), 0);
    credit_ = budget_;  // one layer's worth of slack: a layer's copies may end a layer late
    LOFT_CUDA_CHECK(cudaEventRecord(fwd_start_, cuda::stream(dev_)));
    in_forward_ = true;
  }

  void end_forward() override {
    LOFT_CHECK(in_forward_, "checkpoint offload: end_forward without begin_forward");
    LOFT_CUDA_CHECK(cudaEventRecord(fwd_end_, cuda::stream(dev_)));
    in_forward_ = false;
    measured_ = true;
  }

  bool room_for(size_t l, size_t bytes) override {
    if (budget_ <= 0) return true;  // nothing measured yet
    // What the link moves while a layer computes, less what the layer stored already.
    credit_ = std::min(credit_ + budget_ - double(layer_bytes_.at(l)), 2 * budget_);
    if (credit_ < double(bytes)) return false;
    credit_ -= double(bytes);
    return true;
  }

  Tensor fetch(size_t l, size_t item) override {
    Slot& s = slot(l, item);
    LOFT_CHECK(s.device.defined() || s.on_host, "checkpoint offload: tensor ", item, " of layer ",
               l, " was never stored");
    prefetch(l);
    cuda::set_device(dev_);
    LOFT_CUDA_CHECK(cudaStreamWaitEvent(cuda::stream(dev_), s.done, 0));
    Tensor t = s.device;
    s.device = Tensor();
    s.on_host = false;
    return t;
  }

 private:
  // The last forward's compute time per layer (its stalls left out) and the link's speed over
  // its copies give the bytes a layer may add: 90% of what the link moves while a layer computes.
  void pace_from_last_forward() {
    LOFT_CUDA_CHECK(cudaEventSynchronize(fwd_end_));
    double compute_ms = elapsed_ms(fwd_start_, fwd_end_), copy_ms = 0, bytes = 0;
    for (const Stall& w : stalls_)
      if (w.used) compute_ms -= elapsed_ms(w.before, w.after);
    size_t layers = 0;
    for (size_t i = 0; i < slots_.size(); ++i)
      if (const Slot& s = slots_[i]; s.timed) {
        LOFT_CUDA_CHECK(cudaEventSynchronize(s.end));
        copy_ms += elapsed_ms(s.start, s.end);
        bytes += double(s.bytes);
        layers = std::max(layers, i / items_ + 1);
      }
    if (layers == 0 || copy_ms <= 0 || compute_ms <= 0) return;
    budget_ = 0.9 * bytes / copy_ms * compute_ms / double(layers);
  }

  struct Stall {  // the compute stream's wait at a layer's store, timed
    cudaEvent_t before = nullptr, after = nullptr;
    bool used = false;
  };
  struct Slot {
    std::shared_ptr<Storage> host;  // pinned
    size_t bytes = 0;
    Shape shape;
    DType dtype = DType::BF16;
    bool on_host = false;
    Tensor device;  // being copied down (store), or up (prefetch)
    cudaEvent_t done = nullptr;
    cudaEvent_t start = nullptr, end = nullptr;  // the copy down, timed
    bool timed = false;                          // copied down in the forward being measured
  };
  Slot& slot(size_t l, size_t item) {
    LOFT_CHECK(l < slots_.size() / items_ && item < items_, "checkpoint offload: tensor ", item,
               " of layer ", l, " (", slots_.size() / items_, " layers of ", items_, ")");
    return slots_[l * items_ + item];
  }
  // The side stream waits for everything queued on the compute stream so far.
  void after_compute() {
    LOFT_CUDA_CHECK(cudaEventRecord(handed_, cuda::stream(dev_)));
    LOFT_CUDA_CHECK(cudaStreamWaitEvent(copy_, handed_, 0));
  }

  int dev_;
  size_t items_;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t handed_ = nullptr;
  std::vector<Slot> slots_;
  // Pacing (room_for).
  cudaEvent_t fwd_start_ = nullptr, fwd_end_ = nullptr;
  std::vector<Stall> stalls_;
  std::vector<size_t> layer_bytes_;  // stored this forward, per layer
  bool in_forward_ = false, measured_ = false;
  double budget_ = 0;  // bytes a layer may copy down; 0: not measured yet
  double credit_ = 0;
};

}  // namespace

std::unique_ptr<CheckpointOffload> make_cuda_checkpoint_offload(int device, size_t layers,
                                                                size_t items) {
  return std::make_unique<CudaCheckpointOffload>(device, layers, items);
}

}  // namespace loft
