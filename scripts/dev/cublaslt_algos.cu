// Times every algorithm cuBLASLt's heuristic offers (up to 32) for llama3-8b's projection GEMMs,
// bf16 and FP8 E4M3, against the one loft takes (the heuristic's first): whether choosing by
// measurement would pay (issue 29: the frozen GEMMs are ~60% of a LoRA step). Row-major
// C[m,n] = A·op(B) mapped to column-major as engine/ops/cuda/gemm_cublaslt.cpp maps it; FP8 in
// the only layout cuBLASLt takes for it (both operands K-contiguous, as engine/quant's GEMMs).
// Built by stage-gpu-run.sh with STAGE_CUBLASLT_ALGOS=1 into the staged bin/; run there with the
// token counts to try (default 8192 2048): `cublaslt_algos 8192`.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

cublasLtHandle_t lt;
void* workspace;
size_t workspace_bytes = size_t(32) << 20;  // loft's cuBLASLt workspace

bool ok(int status, const char* what) {
  if (status != 0) std::printf("  %s failed: %d\n", what, status);
  return status == 0;
}

// One GEMM: m×k times (n×k)ᵀ when b_transposed, else times k×n.
void survey(const char* name, long m, long n, long k, bool b_transposed, bool fp8) {
  const cudaDataType_t ab = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  const size_t es = fp8 ? 1 : 2;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  if (cudaMalloc(&a, m * k * es) || cudaMalloc(&b, n * k * es) || cudaMalloc(&c, m * n * 2)) {
    std::printf("%s: out of memory\n", name);
    std::exit(1);
  }
  cudaMemset(a, 0x11, m * k * es);
  cudaMemset(b, 0x11, n * k * es);
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulPreference_t pref;
  const cublasOperation_t op_a = b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  const long b_rows = b_transposed ? n : k, b_cols = b_transposed ? k : n;
  if (!ok(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc")) return;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b);
  cublasLtMatrixLayoutCreate(&la, ab, b_cols, b_rows, b_cols);  // cuBLASLt's A is our B
  cublasLtMatrixLayoutCreate(&lb, ab, k, m, k);
  cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, m, n);
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                       sizeof workspace_bytes);
  cublasLtMatmulHeuristicResult_t found[32];
  int count = 0;
  if (!ok(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 32, found, &count), name)) return;
  const float alpha = 1, beta = 0;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> ms(size_t(count), 1e9f);
  for (int round = 0; round < 2; ++round)  // the best of two rounds, so clocks settle
    for (int i = 0; i < count; ++i) {
      auto run = [&] {
        return cublasLtMatmul(lt, desc, &alpha, b, la, a, lb, &beta, c, lc, c, lc, &found[i].algo, workspace,
                              found[i].workspaceSize, nullptr);
      };
      for (int w = 0; w < 3; ++w) run();
      cudaEventRecord(start);
      for (int r = 0; r < 10; ++r) run();
      cudaEventRecord(stop);
      cudaEventSynchronize(stop);
      float t = 0;
      cudaEventElapsedTime(&t, start, stop);
      if (cudaGetLastError() == cudaSuccess) ms[size_t(i)] = std::min(ms[size_t(i)], t / 10);
    }
  const int best = int(std::min_element(ms.begin(), ms.end()) - ms.begin());
  const double flops = 2.0 * double(m) * double(n) * double(k);
  std::printf("%-12s %s m=%ld n=%ld k=%ld b_t=%d: %d algos; first %.1f us (%.0f TFLOP/s), best #%d %.1f us "
              "(%.0f TFLOP/s): %+.1f%%\n",
              name, fp8 ? "e4m3" : "bf16", m, n, k, int(b_transposed), count, ms[0] * 1e3, flops / ms[0] / 1e9,
              best, ms[size_t(best)] * 1e3, flops / ms[size_t(best)] / 1e9, 100.0 * (ms[0] / ms[size_t(best)] - 1));
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(desc);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<long> tokens;
  for (int i = 1; i < argc; ++i) tokens.push_back(std::atol(argv[i]));
  if (tokens.empty()) tokens = {8192, 2048};
  cublasLtCreate(&lt);
  cudaMalloc(&workspace, workspace_bytes);
  const long H = 4096, KV = 1024, F = 14336, V = 128256;  // llama3-8b
  struct Gemm {
    const char* name;
    long n, k;
  };
  // Forward y = x·Wᵀ (B transposed); the backward's dX = dy·W (bf16: B as stored; FP8: the
  // transposed codes, so B transposed again). q and o, k and v, gate and up share their shapes.
  const Gemm forward[] = {{"q/o fwd", H, H}, {"k/v fwd", KV, H}, {"gate/up fwd", F, H}, {"down fwd", H, F}};
  const Gemm dx[] = {{"q/o dX", H, H}, {"k/v dX", H, KV}, {"gate/up dX", H, F}, {"down dX", F, H}};
  for (long T : tokens) {
    std::printf("tokens %ld\n", T);
    for (bool fp8 : {false, true}) {
      for (const Gemm& g : forward) survey(g.name, T, g.n, g.k, true, fp8);
      for (const Gemm& g : dx) survey(g.name, T, g.n, g.k, fp8, fp8);
    }
  }
  for (long chunk : {512L, 2048L}) {  // the loss head's chunk (default_loss_chunk_tokens: 512 here)
    survey("lm_head fwd", chunk, V, H, true, false);
    survey("lm_head dX", chunk, H, V, false, false);
  }
  return 0;
}
