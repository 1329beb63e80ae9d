#include "engine/device/cublas_api.h"

#include "engine/core/dynamic_library.h"

namespace loft::cuda {

namespace {

// The sonames of the toolkit loft was built with (libcublas.so.13 for CUDA 13).
#define LOFT_CUBLAS_STR(x) #x
#define LOFT_CUBLAS_SONAME(lib, major) "lib" lib ".so." LOFT_CUBLAS_STR(major)
constexpr const char* kCublas = LOFT_CUBLAS_SONAME("cublas", CUBLAS_VER_MAJOR);
constexpr const char* kCublasLt = LOFT_CUBLAS_SONAME("cublasLt", CUBLAS_VER_MAJOR);

CublasApi load() {
  const char* remedy = "add the CUDA toolkit's lib folder to LD_LIBRARY_PATH";
  const DynamicLibrary blas = open_library(kCublas, "the CUDA backend needs cuBLAS", remedy),
                       lt = open_library(kCublasLt, "the CUDA backend needs cuBLAS", remedy);
  CublasApi a;
  // Stringised after expansion, so cublasCreate looks up cublasCreate_v2 (cublas_v2.h's macro).
#define LOFT_CUBLAS_NAME(f) LOFT_CUBLAS_STR(f)
#define LOFT_CUBLAS_SYMBOL(lib, f) a.f = reinterpret_cast<decltype(a.f)>(library_symbol(lib, LOFT_CUBLAS_NAME(f)))
  LOFT_CUBLAS_SYMBOL(blas, cublasCreate);
  LOFT_CUBLAS_SYMBOL(blas, cublasSetStream);
  LOFT_CUBLAS_SYMBOL(blas, cublasSetWorkspace);
  LOFT_CUBLAS_SYMBOL(blas, cublasSetMathMode);
  LOFT_CUBLAS_SYMBOL(blas, cublasGemmBatchedEx);
  LOFT_CUBLAS_SYMBOL(blas, cublasGetStatusName);
  LOFT_CUBLAS_SYMBOL(blas, cublasGetStatusString);
  LOFT_CUBLAS_SYMBOL(lt, cublasLtCreate);
  LOFT_CUBLAS_SYMBOL(lt, cublasLtMatmul);
  LOFT_CUBLAS_SYMBOL(lt, cublasLtMatmulAlgoGetHeuristic);
  LOFT_CUBLAS_SYMBOL(lt, cublasLtMatmulDescCreate);
  LOFT_CUBLAS_SYMBOL(lt, cublasLtMatmulDescDestroy);
  LOFT_CUBLAS_SYMBOL(lt, cublasLtMatmulDescSetAttribute);
  LOFT_CUBLAS_SYMBOL(lt, cublasLtMatmulPreferenceCreate);
  LOFT_CUBLAS_SYMBOL(lt, cublasLtMatmulPreferenceDestroy);
  LOFT_CUBLAS_SYMBOL(lt, cublasLtMatmulPreferenceSetAttribute);
  LOFT_CUBLAS_SYMBOL(lt, cublasLtMatrixLayoutCreate);
  LOFT_CUBLAS_SYMBOL(lt, cublasLtMatrixLayoutDestroy);
#undef LOFT_CUBLAS_SYMBOL
#undef LOFT_CUBLAS_NAME
  return a;
}

}  // namespace

const CublasApi& cublas_api() { return load_once(load); }

}  // namespace loft::cuda
