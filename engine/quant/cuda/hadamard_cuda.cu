// CUDA Hadamard transform: one thread block per row, the whole row staged in shared memory as
// fp32. The 2^m Walsh–Hadamard stages of stride < 32 run in registers with warp shuffles while
// the row is loaded (element e sits in lane e mod 32, and sub-rows start at multiples of 2^m), the
// wider stages run in shared memory, and the K-mix reads the K sub-rows of each diagonal block
// from shared memory and writes the scaled result. All of x is read before y is written, so y may
// be x.
#include <map>
#include <mutex>
#include <utility>

#include "engine/device/cuda_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/quant/cuda/hadamard_cuda.h"

namespace loft::quant {

namespace {

using ops::cuda_kernels::bf16;
using ops::cuda_kernels::from_f32;
using ops::cuda_kernels::to_f32;

struct Params {
  int n, log2_p, k;
  float scale;
  const int8_t* h;  // k·k entries of H_k on the device
  bool inverse;
};

// x and y may alias: no __restrict__.
template <typename T>
__global__ void hadamard_rows(const T* x, T* y, Params prm) {
  extern __shared__ float s[];
  const int n = prm.n, log2_p = prm.log2_p, p = 1 << log2_p, k = prm.k;
  const T* xr = x + int64_t(blockIdx.x) * n;
  T* yr = y + int64_t(blockIdx.x) * n;
  const int lane = threadIdx.x & 31;
  const int shuffle_stages = min(log2_p, 5);
  // Every lane takes part in the shuffles: sub-rows lie wholly inside or outside [0, n).
  for (int base = 0; base < n; base += blockDim.x) {
    const int e = base + threadIdx.x;
    float v = e < n ? to_f32(xr[e]) : 0.0f;
    for (int st = 0; st < shuffle_stages; ++st) {
      const int h = 1 << st;
      const float other = __shfl_xor_sync(0xffffffffu, v, h);
      v = (lane & h) ? other - v : v + other;
    }
    if (e < n) s[e] = v;
  }
  __syncthreads();
  for (int st = 5; st < log2_p; ++st) {
    const int h = 1 << st;
    for (int q = threadIdx.x; q < n / 2; q += blockDim.x) {
      const int lo = ((q >> st) << (st + 1)) + (q & (h - 1));
      const float a = s[lo], b = s[lo + h];
      s[lo] = a + b;
      s[lo + h] = a - b;
    }
    __syncthreads();
  }
  // Row vector times H: output sub-row i of a block takes column i of H_k (row i for the inverse).
  for (int e = threadIdx.x; e < n; e += blockDim.x) {
    const int sub = e >> log2_p, i = sub % k;
    const int first = ((sub - i) << log2_p) + (e & (p - 1));
    float acc = 0.0f;
    for (int src = 0; src < k; ++src) {
      const int8_t hv = prm.inverse ? __ldg(prm.h + i * k + src) : __ldg(prm.h + src * k + i);
      acc += float(hv) * s[first + (src << log2_p)];
    }
    yr[e] = from_f32<T>(acc * prm.scale);
  }
}

// H_k on `device`, uploaded once per (device, k) and kept for the process (never freed: the
// matrices are tiny and may be in use by queued kernels at exit).
const int8_t* device_matrix(const HadamardMatrix& m, int device) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, int8_t*> cache;
  std::lock_guard<std::mutex> lock(mu);
  int8_t*& ptr = cache[{device, m.k}];
  if (ptr == nullptr) {
    int8_t* buf = nullptr;
    LOFT_CUDA_CHECK(cudaMalloc(&buf, m.entries.size()));
    // Ordered before the kernels on the same stream; the host entries live in the process cache.
    LOFT_CUDA_CHECK(cudaMemcpyAsync(buf, m.entries.data(), m.entries.size(), cudaMemcpyHostToDevice,
                                    cuda::stream(device)));
    ptr = buf;
  }
  return ptr;
}

template <typename T>
void launch(const HadamardPlan& plan, const Tensor& x, const Tensor& y, bool inverse, int device) {
  const int n = int(plan.n);
  const int64_t rows = x.numel() / plan.n;
  const size_t smem = size_t(n) * sizeof(float);
  int optin = 0;
  LOFT_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (smem > size_t(optin))
    throw Error(cat("hadamard_transform: width n=", n, " needs ", smem,
                    " bytes of shared memory per row; cuda:", device, " offers ", optin));
  if (smem > 48 * 1024)
    LOFT_CUDA_CHECK(cudaFuncSetAttribute(hadamard_rows<T>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  if (rows > int64_t(0x7fffffff))
    throw Error(cat("hadamard_transform: x ", x.str(), " has more rows than one launch takes"));
  const Params prm{
      n, plan.log2_pow2, plan.k, plan.scale(), device_matrix(*plan.matrix, device), inverse};
  const int threads = n >= 2048 ? 512 : 128;  // multiples of 32 (lane = e mod 32)
  hadamard_rows<T>
      <<<unsigned(rows), threads, smem, cuda::stream(device)>>>(x.ptr<T>(), y.ptr<T>(), prm);
  cuda::check_launch("hadamard_rows");
}

}  // namespace

void hadamard_transform_cuda(const HadamardPlan& plan, const Tensor& x, const Tensor& y,
                             bool inverse) {
  if (plan.n > int64_t(1) << 30)
    throw Error(
        cat("hadamard_transform: width n=", plan.n, " is too large for the CUDA transform"));
  const int device = x.device().index;
  cuda::set_device(device);
  switch (x.dtype()) {
    case DType::F32:
      return launch<float>(plan, x, y, inverse, device);
    case DType::BF16:
      return launch<bf16>(plan, x, y, inverse, device);
    default:
      throw Error(cat("hadamard_transform: the CUDA transform takes F32 or BF16, got x ", x.str()));
  }
}

}  // namespace loft::quant
