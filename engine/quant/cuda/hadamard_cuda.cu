// CUDA Hadamard transforms. Rows: one thread block per row, the whole row staged in shared
// memory as fp32; the 2^m Walsh–Hadamard stages of stride < 32 run in registers with warp
// shuffles while the row is loaded (element e sits in lane e mod 32, and sub-rows start at
// multiples of 2^m), the wider stages run in shared memory, and the K-mix reads the K sub-rows of
// each diagonal block from shared memory. Tokens (columns): one thread block per token block ×
// 32 columns, the same stages down the columns of the tile. Both run the CPU's butterflies and
// K-mix sums in the CPU's order (±1 products are exact), so they agree with it bit for bit.
// What happens to each rotated value is the kernel's epilogue: store it (the transform), fold it
// into an amax, or cast it to FP8/INT8 codes (the two passes of the fused rotate + quantize).
#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/device/cuda_context.h"
#include "engine/ops/cuda/kernel_util.cuh"
#include "engine/quant/cuda/hadamard_cuda.h"
#include "engine/quant/cuda/hadamard_kmix.cuh"
#include "engine/quant/cuda/hadamard_kmix_mma.cuh"
#include "engine/quant/cuda/hadamard_vec.cuh"
#include "engine/quant/cuda/quant_device.cuh"
#include "engine/quant/quantize.h"

namespace loft::quant {

namespace {

using ops::cuda_kernels::aligned16;
using ops::cuda_kernels::allow_dynamic_smem;
using ops::cuda_kernels::bf16;
using ops::cuda_kernels::from_f32;
using ops::cuda_kernels::kChunk;
using ops::cuda_kernels::max_shared_optin;
using ops::cuda_kernels::sm_count;
using ops::cuda_kernels::to_f32;

// ---- epilogues: put(i, v) receives rotated value v of output element i; put_n<N>(i, v) the N
// values of elements i..i+N-1 (i a multiple of N, N = 2, 4 or 8: the fast kernels' vector stores).
template <typename T>
struct StoreRotated {
  T* y;
  __device__ void begin() {}
  __device__ void put(int64_t i, float v) { y[i] = from_f32<T>(v); }
  template <int N>
  __device__ void put_n(int64_t i, const float* v) {
    if constexpr (N == kChunk) {
      ops::cuda_kernels::store_chunk(y + i, *reinterpret_cast<const float(*)[kChunk]>(v));
    } else if constexpr (N == 4 && std::is_same_v<T, float>) {
      *reinterpret_cast<float4*>(y + i) = make_float4(v[0], v[1], v[2], v[3]);
    } else if constexpr (N == 4 && std::is_same_v<T, bf16>) {
      const __nv_bfloat162 a = __floats2bfloat162_rn(v[0], v[1]), b = __floats2bfloat162_rn(v[2], v[3]);
      *reinterpret_cast<uint2*>(y + i) =
          make_uint2(*reinterpret_cast<const uint32_t*>(&a), *reinterpret_cast<const uint32_t*>(&b));
    } else if constexpr (N % 2 == 0 && std::is_same_v<T, bf16>) {
#pragma unroll
      for (int j = 0; j < N; j += 2)
        *reinterpret_cast<__nv_bfloat162*>(y + i + j) = __floats2bfloat162_rn(v[j], v[j + 1]);
    } else {
#pragma unroll
      for (int j = 0; j < N; ++j) y[i + j] = from_f32<T>(v[j]);
    }
  }
  __device__ void end() {}
};

// The amax over the rotated values as the unfused path stores them (rounded to T).
template <typename T>
struct AmaxRotated {
  unsigned* amax_bits;
  float m;
  __device__ void begin() { m = 0.0f; }
  __device__ void put(int64_t, float v) { m = fmaxf(m, fabsf(to_f32(from_f32<T>(v)))); }
  template <int N>
  __device__ void put_n(int64_t, const float* v) {
#pragma unroll
    for (int j = 0; j < N; ++j) m = fmaxf(m, fabsf(to_f32(from_f32<T>(v[j]))));
  }
  __device__ void end() { cuda::block_amax(m, amax_bits); }
};

template <typename T, LowpFormat F>
struct CastRotated {
  const unsigned* amax_bits;
  float qmax;
  uint8_t* codes;
  float* scale;
  float s;
  __device__ void begin() {
    s = cuda::scale_from(amax_bits, qmax);
    if ((blockIdx.x | blockIdx.y | threadIdx.x | threadIdx.y) == 0) *scale = s;
  }
  __device__ void put(int64_t i, float v) {
    codes[i] = cuda::encode<F>(__fdiv_rn(to_f32(from_f32<T>(v)), s));
  }
  template <int N>
  __device__ void put_n(int64_t i, const float* v) {
    alignas(8) uint8_t q[N];
#pragma unroll
    for (int j = 0; j < N; ++j) q[j] = cuda::encode<F>(__fdiv_rn(to_f32(from_f32<T>(v[j])), s));
    if constexpr (N == 8) {
      *reinterpret_cast<uint2*>(codes + i) = *reinterpret_cast<const uint2*>(q);
    } else if constexpr (N == 4) {
      *reinterpret_cast<uint32_t*>(codes + i) = *reinterpret_cast<const uint32_t*>(q);
    } else if constexpr (N == 2) {
      *reinterpret_cast<uint16_t*>(codes + i) = *reinterpret_cast<const uint16_t*>(q);
    } else {
#pragma unroll
      for (int j = 0; j < N; ++j) codes[i + j] = q[j];
    }
  }
  __device__ void end() {}
};

struct Params {
  int n, log2_p, k;  // rows: n = the row width; tokens: n = the block
  float scale;
  const int8_t* h;  // k·k entries of H_k on the device
  bool inverse;
  int64_t rows_x, rows_y, cols;  // tokens only
};

// Output sub-row i of a block takes column i of H_k (row i for the inverse); s_at(r) reads the
// staged value of in-block position r.
template <typename At>
__device__ __forceinline__ float k_mix(const Params& prm, int e, At s_at) {
  const int i = e >> prm.log2_p, j = e & ((1 << prm.log2_p) - 1), k = prm.k;
  float acc = 0.0f;
  for (int src = 0; src < k; ++src) {
    const int8_t hv = prm.inverse ? __ldg(prm.h + i * k + src) : __ldg(prm.h + src * k + i);
    acc += float(hv) * s_at((src << prm.log2_p) + j);
  }
  return acc * prm.scale;
}

// x and y may alias (all of x is read before anything is written): no __restrict__.
template <typename T, typename Epi>
__global__ void hadamard_rows(const T* x, Params prm, Epi epi) {
  extern __shared__ float s[];
  const int n = prm.n, log2_p = prm.log2_p;
  const T* xr = x + int64_t(blockIdx.x) * n;
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
  epi.begin();
  const int block = prm.k << log2_p;
  for (int e = threadIdx.x; e < n; e += blockDim.x) {
    const float* blk = s + (e / block) * block;
    epi.put(int64_t(blockIdx.x) * n + e, k_mix(prm, e % block, [&](int r) { return blk[r]; }));
  }
  epi.end();
}

constexpr int kTokenCols = 32, kTokenRowsPerPass = 8;

// Block (32, 8) per tile of one token block × 32 columns; a warp walks one row of the tile, so
// global accesses run along rows and shared-memory banks are the column (conflict-free).
template <typename T, typename Epi>
__global__ void hadamard_tokens(const T* __restrict__ x, Params prm, Epi epi) {
  extern __shared__ float s[];  // [block][kTokenCols]
  const int tx = threadIdx.x, ty = threadIdx.y, b = prm.n, log2_p = prm.log2_p;
  const int64_t col = int64_t(blockIdx.x) * kTokenCols + tx, r0 = int64_t(blockIdx.y) * b;
  const bool in_cols = col < prm.cols;
  for (int r = ty; r < b; r += kTokenRowsPerPass) {
    const int64_t gr = r0 + r;
    s[r * kTokenCols + tx] = in_cols && gr < prm.rows_x ? to_f32(x[gr * prm.cols + col]) : 0.0f;
  }
  __syncthreads();
  for (int st = 0; st < log2_p; ++st) {
    const int h = 1 << st;
    for (int q = ty; q < b / 2; q += kTokenRowsPerPass) {
      const int lo = ((q >> st) << (st + 1)) + (q & (h - 1));
      const float a = s[lo * kTokenCols + tx], c = s[(lo + h) * kTokenCols + tx];
      s[lo * kTokenCols + tx] = a + c;
      s[(lo + h) * kTokenCols + tx] = a - c;
    }
    __syncthreads();
  }
  epi.begin();
  for (int r = ty; r < b; r += kTokenRowsPerPass) {
    const float v = k_mix(prm, r, [&](int q) { return s[q * kTokenCols + tx]; });
    const int64_t gr = r0 + r;
    if (in_cols && gr < prm.rows_y) epi.put(gr * prm.cols + col, v);
  }
  epi.end();
}

// The table `build()` makes (a std::vector) on `device`, built and uploaded once per key (which
// names the device) and kept for the process: never freed, as the tables are tiny and may be in
// use by queued kernels at exit. The host copy is kept too, as the asynchronous upload (ordered
// before the kernels on the same stream) reads it later. Each call site is its own cache (its
// own Build type).
template <typename Key, typename Build>
const auto* kept_table(const Key& key, int device, Build build) {
  using E = typename std::invoke_result_t<Build>::value_type;
  static std::mutex mu;
  static std::map<Key, std::pair<std::vector<E>, E*>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& [host, ptr] = cache[key];
  if (ptr == nullptr) {  // set only once the upload is queued: a failure leaves the key unbuilt
    host = build();
    E* buf = nullptr;
    LOFT_CUDA_CHECK(cudaMalloc(&buf, host.size() * sizeof(E)));
    LOFT_CUDA_CHECK(cudaMemcpyAsync(buf, host.data(), host.size() * sizeof(E), cudaMemcpyHostToDevice,
                                    loft::cuda::stream(device)));
    ptr = buf;
  }
  return static_cast<const E*>(ptr);
}

// H_k on `device`, per (device, k).
const int8_t* device_matrix(const HadamardMatrix& m, int device) {
  return kept_table(std::pair{device, m.k}, device, [&] { return m.entries; });
}

// H' of the K-mix kernel (hadamard_kmix.cuh) on `device`: fp32 [k][k] with H'[src][i] = H[src][i]
// (H[i][src] for the inverse), per (device, k, direction).
const float* device_mix_matrix(const HadamardMatrix& m, bool inverse, int device) {
  return kept_table(std::tuple{device, m.k, inverse}, device, [&] {
    std::vector<float> h(size_t(m.k) * size_t(m.k));
    for (int src = 0; src < m.k; ++src)
      for (int i = 0; i < m.k; ++i) h[size_t(src) * m.k + i] = float(inverse ? m.at(i, src) : m.at(src, i));
    return h;
  });
}

// The sign bits of the tensor-core K-mix (hadamard_kmix_mma.cuh) on `device`: [kp][words] with
// bit src of row i set where A[i][src] = H'[src][i] is -1 (rows past k and bits past k clear),
// per (device, k, direction).
const uint32_t* device_sign_bits(const HadamardMatrix& m, bool inverse, int device) {
  return kept_table(std::tuple{device, m.k, inverse}, device, [&] {
    const int kp = kmix_mma::padded_order(m.k), words = kmix_mma::sign_words(kp);
    std::vector<uint32_t> bits(size_t(kp) * size_t(words), 0u);
    for (int i = 0; i < m.k; ++i)
      for (int src = 0; src < m.k; ++src)
        if ((inverse ? m.at(i, src) : m.at(src, i)) < 0) bits[size_t(i) * words + src / 32] |= 1u << (src % 32);
    return bits;
  });
}

// Resident blocks of `kernel` per SM at this size, asked once per (kernel, size, device).
template <typename Kernel>
int blocks_per_sm(Kernel* kernel, int threads, size_t smem, int device) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, size_t, int>, int> cache;
  std::lock_guard<std::mutex> lock(mu);
  int& n = cache[{reinterpret_cast<const void*>(kernel), threads, smem, device}];
  if (n == 0) LOFT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem));
  return n;
}

Params params_for(const HadamardPlan& plan, bool inverse, int device) {
  return Params{int(plan.n),  plan.log2_pow2, plan.k, plan.scale(), device_matrix(*plan.matrix, device),
                inverse,      0,              0,      0};
}

// Shared memory the tensor-core K-mix needs for `plan` on `device` with `pieces` bf16 pieces, or
// 0 when the plan does not take it (k < kTensorCoreMixOrder, 2^m outside 32..512, or the segment
// does not fit: 18944's BF16 rows need 90 KiB, its F32 rows 131 KiB).
size_t mma_mix_smem(const HadamardPlan& plan, int pieces, int device) {
  const int m = plan.log2_pow2;
  if (plan.k < kTensorCoreMixOrder || m < kmix_mma::kMinLog2P || m > kmix_mma::kMaxLog2P) return 0;
  const size_t smem = kmix_mma::smem_bytes(pieces, plan.k, m);
  // 1 KiB of the opt-in left for the epilogue's static shared memory (block_amax).
  return smem + 1024 <= size_t(max_shared_optin(device)) ? smem : 0;
}

// The tensor-core K-mix for a plan mma_mix_smem accepts; blocks loop over the segments, as many
// as fit on the device at once. Returns false to leave the transform to the fp32 K-mix.
template <typename T, typename Epi>
bool launch_rows_kmix_mma(const HadamardPlan& plan, const Tensor& x, bool inverse, int device,
                          const Epi& epi) {
  const size_t smem = mma_mix_smem(plan, kmix_mma::pieces<T>(), device);
  if (smem == 0) return false;
  kmix_mma::MmaParams prm{};
  prm.k = plan.k;
  prm.kp = kmix_mma::padded_order(plan.k);
  prm.log2_p = plan.log2_pow2;
  prm.ld = kmix_mma::row_stride(plan.log2_pow2);
  prm.words = kmix_mma::sign_words(prm.kp);
  prm.total_segs = x.numel() / plan.block;
  prm.scale = plan.scale();
  prm.signs = device_sign_bits(*plan.matrix, inverse, device);
  auto* kernel = kmix_mma::hadamard_rows_kmix_mma<T, Epi>;
  allow_dynamic_smem(kernel, smem, device);
  const int64_t resident = int64_t(blocks_per_sm(kernel, kmix_mma::kThreads, smem, device)) * sm_count(device);
  if (resident == 0) return false;
  const int64_t grid = std::min(prm.total_segs, resident);
  kernel<<<unsigned(grid), kmix_mma::kThreads, smem, loft::cuda::stream(device)>>>(x.ptr<T>(), prm, epi);
  loft::cuda::check_launch("hadamard_rows_kmix_mma");
  return true;
}

// The K-mix for a plan with k > 1: on tensor cores where launch_rows_kmix_mma takes it, else the
// fp32 kernel (hadamard_kmix.cuh) for k a multiple of 4, 2^m >= 8, blocks of at most 32768
// elements. H' stays in shared memory beside the segments when both fit (14336: 56 + 3 KiB),
// else it is staged in chunks of rows. Blocks loop over the segments, as many as fit on the
// device at once. Returns false to leave the transform to the general kernel.
template <typename T, typename Epi>
bool launch_rows_kmix(const HadamardPlan& plan, const Tensor& x, bool inverse, int device,
                      const Epi& epi) {
  const int64_t seg = plan.block;
  const int k = plan.k;
  if (k % 4 != 0 || plan.log2_pow2 < 3 || seg % 32 != 0 || seg > 32 * 1024) return false;
  if (launch_rows_kmix_mma<T>(plan, x, inverse, device, epi)) return true;
  kmix::KmixParams prm{};
  prm.seg = int(seg);
  const int tiles = int(seg / 32);  // per segment, 8 outputs each
  prm.segs = std::max(1, 256 / tiles);
  prm.log2_p = plan.log2_pow2;
  prm.k = k;
  prm.total_segs = x.numel() / seg;
  prm.groups = (prm.total_segs + prm.segs - 1) / prm.segs;
  prm.scale = plan.scale();
  prm.h = device_mix_matrix(*plan.matrix, inverse, device);
  const size_t seg_bytes = size_t(prm.segs) * size_t(seg) * sizeof(float);
  // 1 KiB of the opt-in left for the epilogue's static shared memory (block_amax).
  const size_t row_bytes = size_t(k) * sizeof(float), optin = size_t(max_shared_optin(device)) - 1024;
  if (seg_bytes + row_bytes > optin) return false;
  prm.h_rows = int(std::min<size_t>(size_t(k), (optin - seg_bytes) / row_bytes));
  const size_t smem = seg_bytes + size_t(prm.h_rows) * row_bytes;
  // Threads: the tiles of a block in equal rounds of at most kMaxThreads.
  const int mixes = prm.segs * tiles, rounds = (mixes + kmix::kMaxThreads - 1) / kmix::kMaxThreads;
  const int threads = ((mixes + rounds - 1) / rounds + 31) / 32 * 32;
  auto* kernel = kmix::hadamard_rows_kmix<T, Epi>;
  allow_dynamic_smem(kernel, smem, device);
  const int64_t resident = int64_t(blocks_per_sm(kernel, threads, smem, device)) * sm_count(device);
  if (resident == 0) return false;
  const int64_t grid = std::min(prm.groups, resident);
  kernel<<<unsigned(grid), threads, smem, loft::cuda::stream(device)>>>(x.ptr<T>(), prm, epi);
  loft::cuda::check_launch("hadamard_rows_kmix");
  return true;
}

// The register-resident row kernels when the plan and operands allow them: blocks of a multiple
// of 8 elements, at most 1024 threads per block, 16-byte aligned rows. Returns false to leave the
// transform to the general kernel. A K-mix (k > 1) goes to launch_rows_kmix. Otherwise elements
// per thread E and the mode by m = log2 of the FWHT length: m <= 8: E = 8, all in one warp;
// m = 9: E = 16, one warp; m = 10..12: E = 16 and m = 13, 14: E = 32 with one exchange; m = 15:
// stage by stage in shared memory.
template <typename T, typename Epi>
bool launch_rows_vec(const HadamardPlan& plan, const Tensor& x, bool inverse, int device,
                     const Epi& epi, bool out_aligned) {
  using vec::Mode;
  const int64_t seg = plan.block;
  const int m = plan.log2_pow2;
  if (seg % kChunk != 0 || !out_aligned || !aligned16(x.data()) || seg > 32 * 1024) return false;
  if (plan.k > 1) return launch_rows_kmix<T>(plan, x, inverse, device, epi);
  int e = 0, r = 0;
  Mode mode = Mode::Staged;
  if (plan.k == 1 && m <= 14) {
    e = m <= 8 ? 8 : m <= 12 ? 16 : 32;
    r = std::max(0, m - (e == 8 ? 3 : e == 16 ? 4 : 5) - 5);
    mode = r == 0 ? Mode::Warp : Mode::Transposed;
  } else {
    e = seg / 8 <= 1024 ? 8 : seg / 16 <= 1024 && seg % 16 == 0 ? 16 : seg % 32 == 0 ? 32 : 0;
  }
  if (e == 0 || seg % e != 0 || seg / e > 1024) return false;
  vec::RowParams prm{};
  prm.seg = int(seg);
  prm.seg_threads = int(seg / e);
  prm.segs = std::max(1, 256 / prm.seg_threads);
  prm.log2_p = m;
  prm.total_segs = x.numel() / seg;
  prm.scale = plan.scale();
  prm.h = device_matrix(*plan.matrix, device);
  const size_t smem = mode == Mode::Warp ? 0 : size_t(prm.segs) * size_t(seg) * sizeof(float);
  if (smem > size_t(max_shared_optin(device))) return false;
  const int threads = (prm.segs * prm.seg_threads + 31) / 32 * 32;
  const int64_t grid = (prm.total_segs + prm.segs - 1) / prm.segs;
  if (grid > int64_t(0x7fffffff)) return false;
  auto run = [&](auto kernel) {
    allow_dynamic_smem(kernel, smem, device);
    kernel<<<unsigned(grid), threads, smem, loft::cuda::stream(device)>>>(x.ptr<T>(), prm, epi);
  };
  using vec::hadamard_rows_vec;
  if (mode == Mode::Warp) {
    if (e == 8) run(hadamard_rows_vec<T, 8, Mode::Warp, 0, Epi>);
    else run(hadamard_rows_vec<T, 16, Mode::Warp, 0, Epi>);
  } else if (mode == Mode::Transposed) {
    if (e == 16 && r == 1) run(hadamard_rows_vec<T, 16, Mode::Transposed, 1, Epi>);
    else if (e == 16 && r == 2) run(hadamard_rows_vec<T, 16, Mode::Transposed, 2, Epi>);
    else if (e == 16) run(hadamard_rows_vec<T, 16, Mode::Transposed, 3, Epi>);
    else if (r == 3) run(hadamard_rows_vec<T, 32, Mode::Transposed, 3, Epi>);
    else run(hadamard_rows_vec<T, 32, Mode::Transposed, 4, Epi>);
  } else {
    if (e == 8) run(hadamard_rows_vec<T, 8, Mode::Staged, 0, Epi>);
    else if (e == 16) run(hadamard_rows_vec<T, 16, Mode::Staged, 0, Epi>);
    else run(hadamard_rows_vec<T, 32, Mode::Staged, 0, Epi>);
  }
  loft::cuda::check_launch("hadamard_rows_vec");
  return true;
}

template <typename T, typename Epi>
void launch_rows(const HadamardPlan& plan, const Tensor& x, bool inverse, int device, const Epi& epi,
                 bool out_aligned) {
  if (plan.n > int64_t(1) << 30)
    throw Error(cat("hadamard_transform: width n=", plan.n, " is too large for the CUDA transform"));
  if (x.numel() == 0) return;
  if (launch_rows_vec<T>(plan, x, inverse, device, epi, out_aligned)) return;
  const int n = int(plan.n);
  const int64_t rows = x.numel() / plan.n;
  const size_t smem = size_t(n) * sizeof(float);
  const int optin = max_shared_optin(device);
  if (smem > size_t(optin))
    throw Error(cat("hadamard_transform: width n=", n, " needs ", smem,
                    " bytes of shared memory per row; cuda:", device, " offers ", optin));
  allow_dynamic_smem(hadamard_rows<T, Epi>, smem, device);
  if (rows > int64_t(0x7fffffff))
    throw Error(cat("hadamard_transform: x ", x.str(), " has more rows than one launch takes"));
  const int threads = n >= 2048 ? 512 : 128;  // multiples of 32 (lane = e mod 32)
  hadamard_rows<T, Epi><<<unsigned(rows), threads, smem, loft::cuda::stream(device)>>>(
      x.ptr<T>(), params_for(plan, inverse, device), epi);
  loft::cuda::check_launch("hadamard_rows");
}

template <typename T, typename Epi>
void launch_tokens(const HadamardPlan& plan, const Tensor& x, int64_t rows_y, bool inverse,
                   int device, const Epi& epi, bool out_aligned) {
  LOFT_CHECK(plan.block <= kMaxTokenBlock, "token_transform: the plan's block ", plan.block,
             " exceeds ", kMaxTokenBlock, " tokens (use token_plan)");
  const int64_t cols = x.size(1), blocks = plan.n / plan.block;
  LOFT_CHECK(blocks <= 65535, "token_transform: ", plan.n, " tokens are more than one launch takes");
  if (cols == 0) return;
  const cudaStream_t stream = loft::cuda::stream(device);
  // Blocks of 256 tokens (K = 1, the plan of every multiple of 256): the register-resident kernel.
  if (plan.block == vec::kTokBlock && plan.k == 1 && cols % 2 == 0 && out_aligned &&
      aligned16(x.data())) {
    const vec::TokenParams prm{x.size(0), rows_y, cols, plan.scale(), device_matrix(*plan.matrix, device)};
    allow_dynamic_smem(vec::hadamard_tokens256<T, Epi>, vec::kTokSmem, device);
    const dim3 grid(unsigned((cols + vec::kTokCols - 1) / vec::kTokCols), unsigned(blocks));
    vec::hadamard_tokens256<T, Epi><<<grid, 256, vec::kTokSmem, stream>>>(x.ptr<T>(), prm, epi);
    loft::cuda::check_launch("hadamard_tokens256");
    return;
  }
  Params prm = params_for(plan, inverse, device);
  prm.n = int(plan.block);
  prm.rows_x = x.size(0);
  prm.rows_y = rows_y;
  prm.cols = cols;
  const dim3 grid(unsigned((cols + kTokenCols - 1) / kTokenCols), unsigned(blocks));
  const size_t smem = size_t(plan.block) * kTokenCols * sizeof(float);  // <= 32 KiB
  hadamard_tokens<T, Epi><<<grid, dim3(kTokenCols, kTokenRowsPerPass), smem, stream>>>(x.ptr<T>(), prm, epi);
  loft::cuda::check_launch("hadamard_tokens");
}

// Calls f(Tag<T>{}) for F32 or BF16 x; `what` names the operation in the error.
template <typename Fn>
void dispatch_dtype(const Tensor& x, const char* what, Fn&& fn) {
  switch (x.dtype()) {
    case DType::F32:
      return fn(ops::cuda_kernels::Tag<float>{});
    case DType::BF16:
      return fn(ops::cuda_kernels::Tag<bf16>{});
    default:
      throw Error(cat(what, ": the CUDA transform takes F32 or BF16, got x ", x.str()));
  }
}

}  // namespace

void hadamard_transform_cuda(const HadamardPlan& plan, const Tensor& x, const Tensor& y,
                             bool inverse) {
  const int device = x.device().index;
  loft::cuda::set_device(device);
  dispatch_dtype(x, "hadamard_transform", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_rows<T>(plan, x, inverse, device, StoreRotated<T>{y.ptr<T>()}, aligned16(y.data()));
  });
}

void token_transform_cuda(const HadamardPlan& plan, const Tensor& x, const Tensor& y,
                          bool inverse) {
  const int device = x.device().index;
  loft::cuda::set_device(device);
  dispatch_dtype(x, "token_transform", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_tokens<T>(plan, x, y.size(0), inverse, device, StoreRotated<T>{y.ptr<T>()},
                     aligned16(y.data()));
  });
}

// Order k of the K-mix from which rotate_quantize rotates once instead of twice (see there).
constexpr int kRotateOnceK = 64;

void rotate_quantize_cuda(const HadamardPlan& plan, const Tensor& x, bool token_dim, Tensor& codes,
                          Tensor& scale) {
  const int device = x.device().index;
  loft::cuda::set_device(device);
  const LowpFormat f = format_of(codes.dtype(), "rotate_quantize: codes");
  if (!token_dim && plan.k >= kRotateOnceK) {
    // Rotating costs k multiply-adds per element on the CUDA cores: at k >= 64 (13824 = 108 x
    // 128) one rotation into x's dtype and a quantize of it (the same bytes: the fused passes
    // cast exactly those values) beat rotating in both the amax and the cast pass. On tensor
    // cores too (H200, [2048, 18944] BF16: 188 us a rotation, 395 us for the two fused passes).
    Tensor xr = Tensor::empty(x.shape(), x.dtype(), x.device());
    hadamard_transform_cuda(plan, x, xr, /*inverse=*/false);
    return quantize_into(xr, codes, nullptr, scale);
  }
  Tensor amax = Tensor::empty({1}, DType::I32, x.device());
  LOFT_CUDA_CHECK(cudaMemsetAsync(amax.data(), 0, sizeof(unsigned), loft::cuda::stream(device)));
  auto* amax_bits = amax.ptr<unsigned>();
  const int64_t rows_y = token_dim ? plan.n : 0;
  dispatch_dtype(x, "rotate_quantize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto run = [&](const auto& epi) {
      // Codes are written 8 (rows) or 2 (tokens) at a time: 8-byte alignment suffices.
      const bool codes_aligned = (reinterpret_cast<uintptr_t>(codes.data()) & 7u) == 0;
      if (token_dim)
        launch_tokens<T>(plan, x, rows_y, /*inverse=*/false, device, epi, codes_aligned);
      else
        launch_rows<T>(plan, x, /*inverse=*/false, device, epi, codes_aligned);
    };
    run(AmaxRotated<T>{amax_bits, 0.0f});
    cuda::dispatch_format(f, [&](auto fc) {
      constexpr LowpFormat F = decltype(fc)::value;
      run(CastRotated<T, F>{amax_bits, qmax(f), codes.ptr<uint8_t>(), scale.ptr<float>(), 1.0f});
    });
  });
}

}  // namespace loft::quant
