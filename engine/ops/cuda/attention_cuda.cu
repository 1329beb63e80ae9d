// cuda::attention and attention_backward: picks the path per call (attention_paths.h); and the
// one kernel both backward passes share.
#include "engine/ops/cuda/attention_cuda.h"

#include "engine/ops/cuda/attention_paths.h"
#include "engine/ops/cuda/kernel_util.cuh"

namespace loft::ops::cuda_attention {

namespace {

using namespace cuda_kernels;

// out[r] = Σ a[r]·b[r] over rows of length d, one warp per row.
template <typename T>
__global__ void row_dot(const T* a, const T* b, float* out, int64_t rows, int64_t d) {
  const int64_t r = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  float s = 0;
  for (int64_t e = lane; e < d; e += 32) s += to_f32(a[r * d + e]) * to_f32(b[r * d + e]);
  s = warp_sum(s);
  if (lane == 0) out[r] = s;
}

}  // namespace

void softmax_row_dot(const Tensor& dout, const Tensor& out, Tensor& drow) {
  const int device = use_device(dout);
  const int64_t rows = drow.numel(), d = dout.numel() / rows;
  dispatch_activation(dout.dtype(), "attention_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    row_dot<T><<<unsigned((rows * 32 + 255) / 256), 256, 0, loft::cuda::stream(device)>>>(
        dout.ptr<T>(), out.ptr<T>(), drow.ptr<float>(), rows, d);
  });
  loft::cuda::check_launch("attention row_dot");
}

bool uses_flash(const Tensor& q, const Tensor& k, int64_t seq) { return flash_supports(q, k, seq); }

size_t set_scratch_budget(size_t bytes) { return gemm_set_scratch_budget(bytes); }

size_t set_flash_shared_limit(size_t bytes) { return flash_set_shared_limit(bytes); }

bool uses_hopper_forward(const Tensor& q, const Tensor& k, int64_t seq) {
  return flash_supports(q, k, seq) && hopper_forward_supports(q, seq);
}

bool set_hopper_forward(bool allowed) { return flash_set_hopper_forward(allowed); }

bool uses_hopper_backward(const Tensor& q, const Tensor& k, int64_t seq) {
  return flash_supports(q, k, seq) && flash_backward_kernel_for(q) == FlashBackwardKernel::hopper;
}

bool set_hopper_backward(bool allowed) { return flash_set_hopper_backward(allowed); }

bool hopper_kernels_built() {
#ifdef LOFT_HAVE_SM90A
  return true;
#else
  return false;
#endif
}

bool hopper_kernel_runs_on(int device, size_t shared_bytes) {
  return hopper_kernels_built() && device_attribute(cudaDevAttrComputeCapabilityMajor, device) == 9 &&
         device_attribute(cudaDevAttrComputeCapabilityMinor, device) == 0 &&
         size_t(max_shared_optin(device)) >= shared_bytes;
}

}  // namespace loft::ops::cuda_attention

namespace loft::ops::cuda {

// The op table's attention rows: the flash kernels where they apply, else the GEMM path.
void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_start,
               int64_t seq, float scale, Tensor& out, Tensor& lse) {
  if (q.numel() == 0) return;
  if (cuda_attention::flash_supports(q, k, seq) && cuda_attention::flash_supports(out, v, seq))
    cuda_attention::flash_forward(q, k, v, doc_start, seq, scale, out, lse);
  else
    cuda_attention::gemm_forward(q, k, v, doc_start, seq, scale, out, lse);
}

void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, const Tensor& lse, const Tensor& doc_start, int64_t seq,
                        float scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  if (q.numel() == 0) return;
  if (cuda_attention::flash_supports(q, k, seq) && cuda_attention::flash_supports(dout, v, seq) && cuda_attention::flash_supports(dq, dk, seq) &&
      cuda_attention::flash_supports(out, dv, seq))
    cuda_attention::flash_backward(dout, q, k, v, out, lse, doc_start, seq, scale, dq, dk, dv);
  else
    cuda_attention::gemm_backward(dout, q, k, v, out, lse, doc_start, seq, scale, dq, dk, dv);
}

}  // namespace loft::ops::cuda
