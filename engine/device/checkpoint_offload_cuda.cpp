// CheckpointOffload on CUDA. The caching allocator hands blocks out in the compute stream's order,
// so every copy on the side stream first waits for an event recorded on the compute stream when
// its buffer was handed over, and the compute stream waits for a copy's event before the buffer it
// read is let go (store) or the one it wrote is used (fetch). Neither wait stalls the compute
// stream in practice: a copy is queued a whole layer before the wait.
#include <vector>

#include "engine/device/checkpoint_offload.h"
#include "engine/device/cuda_context.h"
#include "engine/device/pinned_memory.h"

namespace loft {

namespace {

cudaEvent_t new_event() {
  cudaEvent_t e;
  LOFT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

class CudaCheckpointOffload final : public CheckpointOffload {
 public:
  CudaCheckpointOffload(int device, size_t layers, size_t items)
      : dev_(device), items_(items), slots_(layers * items) {
    LOFT_CHECK(items > 0, "checkpoint offload: no tensors a layer");
    cuda::set_device(dev_);
    LOFT_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    handed_ = new_event();
    for (Slot& s : slots_) s.done = new_event();
  }
  ~CudaCheckpointOffload() override {
    cudaSetDevice(dev_);
    cudaStreamSynchronize(copy_);  // no copy may outlive its buffers
    for (Slot& s : slots_) cudaEventDestroy(s.done);
    cudaEventDestroy(handed_);
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
    LOFT_CUDA_CHECK(cudaMemcpyAsync(s.host->data(), x.data(), bytes, cudaMemcpyDeviceToHost, copy_));
    LOFT_CUDA_CHECK(cudaEventRecord(s.done, copy_));
    // Copies of layers two or more below were queued over a layer ago: their device memory can
    // go now (the layer below's may have been queued only midway through it).
    for (size_t i = 0; i < slots_.size(); ++i)
      if (Slot& o = slots_[i]; o.device.defined() && i / items_ + 1 < l) {
        LOFT_CUDA_CHECK(cudaStreamWaitEvent(cuda::stream(dev_), o.done, 0));
        o.device = Tensor();
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
  struct Slot {
    std::shared_ptr<Storage> host;  // pinned
    size_t bytes = 0;
    Shape shape;
    DType dtype = DType::BF16;
    bool on_host = false;
    Tensor device;  // being copied down (store), or up (prefetch)
    cudaEvent_t done = nullptr;
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
};

}  // namespace

std::unique_ptr<CheckpointOffload> make_cuda_checkpoint_offload(int device, size_t layers,
                                                                size_t items) {
  return std::make_unique<CudaCheckpointOffload>(device, layers, items);
}

}  // namespace loft
