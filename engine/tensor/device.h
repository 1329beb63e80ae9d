// Where a tensor lives. Ops dispatch on it; "auto" resolves to the first GPU when one is present.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace loft {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0"
};

// Number of usable CUDA devices: 0 when built without CUDA or when no GPU/driver is present.
int cuda_device_count();
// True when this binary was built with the CUDA backend.
bool cuda_compiled();

// Parses --device: "auto", "cpu", "cuda" or "cuda:N". Throws UsageError naming the bad value, or
// when cuda is asked for and none is present. For "auto" without a GPU, writes a one-line notice
// to `notice` (if given) and returns the CPU.
Device resolve_device(std::string_view spec, std::ostream* notice = nullptr);

}  // namespace loft
