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
  CudaCheckpointOffload(int device, size_t layers) : dev_(device), slots_(layers) {
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

  void store(size_t l, const Tensor& x) override {
    Slot& s = slot(l);
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
    // The previous input's copy was queued a layer ago: its device memory can go now.
    for (Slot& o : slots_)
      if (o.device.defined() && &o != &s) {
        LOFT_CUDA_CHECK(cudaStreamWaitEvent(cuda::stream(dev_), o.done, 0));
        o.device = Tensor();
      }
    s.device = x;
    s.on_host = true;
  }

  void prefetch(size_t l) override {
    Slot& s = slot(l);
    if (s.device.defined()) return;  // still on the device (the last block's), or fetched already
    LOFT_CHECK(s.on_host, "checkpoint offload: layer ", l, " was never stored");
    cuda::set_device(dev_);
    s.device = Tensor::empty(s.shape, s.dtype, Device::cuda(dev_));
    after_compute();
    LOFT_CUDA_CHECK(cudaMemcpyAsync(s.device.data(), s.host->data(), s.bytes, cudaMemcpyHostToDevice, copy_));
    LOFT_CUDA_CHECK(cudaEventRecord(s.done, copy_));
  }

  Tensor fetch(size_t l) override {
    prefetch(l);
    Slot& s = slot(l);
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
  Slot& slot(size_t l) {
    LOFT_CHECK(l < slots_.size(), "checkpoint offload: layer ", l, " of ", slots_.size());
    return slots_[l];
  }
  // The side stream waits for everything queued on the compute stream so far.
  void after_compute() {
    LOFT_CUDA_CHECK(cudaEventRecord(handed_, cuda::stream(dev_)));
    LOFT_CUDA_CHECK(cudaStreamWaitEvent(copy_, handed_, 0));
  }

  int dev_;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t handed_ = nullptr;
  std::vector<Slot> slots_;
};

}  // namespace

std::unique_ptr<CheckpointOffload> make_cuda_checkpoint_offload(int device, size_t layers) {
  return std::make_unique<CudaCheckpointOffload>(device, layers);
}

}  // namespace loft
