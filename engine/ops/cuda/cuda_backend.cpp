#include "engine/ops/cuda/cuda_backend.h"

namespace loft::ops {

Backend& cuda_backend() {
  static CudaBackend backend;
  return backend;
}

}  // namespace loft::ops
