// A device-side error flag for kernels that find bad input (an out-of-range id or target): the
// kernel atomicMin's the offending position into it, the op then reads it back (one sync) and
// throws an Error naming that position. Memory comes from the caching allocator.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include "engine/device/memory.h"

namespace loft::ops {

class DeviceFlag {
 public:
  // Allocates the flag on `device` and clears it (queued on the device's stream).
  explicit DeviceFlag(int device);
  uint32_t* ptr() const { return static_cast<uint32_t*>(storage_->data()); }
  // Waits for the stream; the smallest position any kernel raised, if one did.
  std::optional<uint32_t> first_raised() const;

  static constexpr uint32_t kClear = 0xffffffffu;

 private:
  int device_;
  std::shared_ptr<Storage> storage_;
};

}  // namespace loft::ops
