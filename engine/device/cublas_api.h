// The cuBLAS and cuBLASLt entry points loft calls, loaded from the toolkit's libraries at first
// use (dlopen) instead of linked. Loading libcublasLt runs its static initialisers, about 0.6 s of
// CPU, which a linked binary paid at every start, on a GPU or not: each `loft` command and each
// of the test suite's ~950 test processes. Include only from CUDA code (cuda_context.h does).
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

namespace loft::cuda {

// cublas_v2.h defines cublasCreate as cublasCreate_v2 (and so on): the members and the symbols
// looked up take those names too.
struct CublasApi {
  decltype(&::cublasCreate) cublasCreate;
  decltype(&::cublasSetStream) cublasSetStream;
  decltype(&::cublasSetWorkspace) cublasSetWorkspace;
  decltype(&::cublasSetMathMode) cublasSetMathMode;
  // cublas_api.h overloads it with an inline one taking a cudaDataType compute type: this is the
  // exported one, taking cublasComputeType_t.
  cublasStatus_t (*cublasGemmBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                        int, const void*, const void* const[], cudaDataType, int,
                                        const void* const[], cudaDataType, int, const void*,
                                        void* const[], cudaDataType, int, int, cublasComputeType_t,
                                        cublasGemmAlgo_t);
  decltype(&::cublasGetStatusName) cublasGetStatusName;
  decltype(&::cublasGetStatusString) cublasGetStatusString;
  decltype(&::cublasLtCreate) cublasLtCreate;
  decltype(&::cublasLtMatmul) cublasLtMatmul;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) cublasLtMatmulAlgoGetHeuristic;
  decltype(&::cublasLtMatmulDescCreate) cublasLtMatmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) cublasLtMatmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) cublasLtMatmulDescSetAttribute;
  decltype(&::cublasLtMatmulPreferenceCreate) cublasLtMatmulPreferenceCreate;
  decltype(&::cublasLtMatmulPreferenceDestroy) cublasLtMatmulPreferenceDestroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) cublasLtMatmulPreferenceSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) cublasLtMatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) cublasLtMatrixLayoutDestroy;
};

// Loaded once per process (libcublas.so.N and libcublasLt.so.N of the toolkit loft was built
// with); throws Error naming the library and dlerror()'s reason when one or a symbol is missing.
const CublasApi& cublas_api();

}  // namespace loft::cuda
