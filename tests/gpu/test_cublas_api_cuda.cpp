// cuBLAS and cuBLASLt are loaded at first use (engine/device/cublas_api.h). This needs no GPU, so
// it runs on CI's CPU-only machine too: a wrong soname or entry point name fails here rather than
// on the first GPU run.
#include <gtest/gtest.h>

#include "engine/device/cublas_api.h"

namespace loft {
namespace {

TEST(CublasApi, LoadsEveryEntryPointAndCallsThemWithoutAGpu) {
  const cuda::CublasApi& api = cuda::cublas_api();  // throws naming what is missing
  EXPECT_STREQ(api.cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  // Host-only cuBLASLt calls: a layout made and destroyed through the loaded pointers.
  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(api.cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 4, 8, 4), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(api.cublasLtMatrixLayoutDestroy(layout), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
}  // namespace loft
