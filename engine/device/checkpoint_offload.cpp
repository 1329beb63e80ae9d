#include "engine/device/checkpoint_offload.h"

namespace loft {

#ifdef LOFT_WITH_CUDA
std::unique_ptr<CheckpointOffload> make_cuda_checkpoint_offload(int device, size_t layers,
                                                                size_t items);
#endif

std::unique_ptr<CheckpointOffload> make_checkpoint_offload(Device device, size_t layers,
                                                           size_t items) {
#ifdef LOFT_WITH_CUDA
  if (device.is_cuda()) return make_cuda_checkpoint_offload(device.index, layers, items);
#endif
  (void)device;
  (void)layers;
  (void)items;
  return nullptr;
}

}  // namespace loft
