// What a device is and how much memory it has, for `loft bench`'s "will it fit" line and the
// size checks made before large allocations (finetune's activations, the KV cache). Under
// --gpu-memory-limit (memory_limit.h) a GPU reports the cap as its memory.
#pragma once
#include <cstdint>
#include <string>

#include "engine/tensor/device.h"

namespace loft {

struct DeviceInfo {
  std::string name;         // "NVIDIA H100 80GB HBM3"; "cpu" for the host
  int64_t total_bytes = 0;  // the device's memory (or the cap); 0 when not known (the CPU)
  int64_t free_bytes = 0;   // free now, as the driver reports it (or the cap leaves); 0 when not known
  // The GPU's UUID as nvidia-smi prints it ("GPU-6f1a…"); empty for the host. Which physical card
  // ran a benchmark: GPUs of one model differ by a few percent under their power cap.
  std::string uuid;
};

// 16 UUID bytes as nvidia-smi prints them: "GPU-" and 8-4-4-4-12 lowercase hex digits.
std::string gpu_uuid_text(const unsigned char (&bytes)[16]);

DeviceInfo device_info(Device device);

// `card` as a card of `cap` bytes (no change when cap is 0): the total is the cap (or the card's,
// when smaller), free what the cap leaves beside the `held` bytes of the process (the allocator's
// reserved bytes and memory_outside), and never more than the card has free.
DeviceInfo capped_device_info(const DeviceInfo& card, int64_t cap, int64_t held);

// The memory sizes are checked against before a large allocation: the GPU's total memory, or the
// host's physical RAM for the CPU; 0 when unknown.
int64_t device_memory_bytes(Device device);

}  // namespace loft
