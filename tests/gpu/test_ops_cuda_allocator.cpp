// The caching CUDA allocator: freed blocks are handed out again without asking the driver, and
// allocated/peak/reserved statistics follow allocations and frees.
#include "engine/device/memory.h"
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

TEST(CudaAllocator, ReusesFreedBlock) {
  LOFT_REQUIRE_GPU();
  release_cached_memory(kGpu);
  const size_t bytes = (3u << 20) + 12345;
  auto first = allocate_storage(bytes, kGpu);
  void* p = first->data();
  const MemoryStats held = memory_stats(kGpu);
  first.reset();
  EXPECT_LT(memory_stats(kGpu).allocated, held.allocated);
  EXPECT_EQ(memory_stats(kGpu).reserved, held.reserved) << "a freed block stays cached";
  auto second = allocate_storage(bytes, kGpu);
  EXPECT_EQ(second->data(), p);
  EXPECT_EQ(memory_stats(kGpu).reserved, held.reserved) << "reuse must not reserve more";
  EXPECT_EQ(memory_stats(kGpu).allocated, held.allocated);
  second.reset();
  release_cached_memory(kGpu);
  EXPECT_LT(memory_stats(kGpu).reserved, held.reserved);
}

TEST(CudaAllocator, PeakTracksHighWaterMark) {
  LOFT_REQUIRE_GPU();
  const size_t mib = 1u << 20;
  release_cached_memory(kGpu);  // so the sizes below come fresh from the driver, not rounded up
  const size_t base = memory_stats(kGpu).allocated;
  reset_peak_memory(kGpu);
  EXPECT_EQ(memory_stats(kGpu).peak_allocated, base);
  {
    auto a = allocate_storage(8 * mib, kGpu);
    auto b = allocate_storage(4 * mib, kGpu);
    EXPECT_EQ(memory_stats(kGpu).allocated, base + 12 * mib);
    a.reset();
    EXPECT_EQ(memory_stats(kGpu).allocated, base + 4 * mib);
    EXPECT_EQ(memory_stats(kGpu).peak_allocated, base + 12 * mib);
  }
  EXPECT_EQ(memory_stats(kGpu).allocated, base);
  EXPECT_EQ(memory_stats(kGpu).peak_allocated, base + 12 * mib);
  reset_peak_memory(kGpu);
  EXPECT_EQ(memory_stats(kGpu).peak_allocated, base);
}

TEST(CudaAllocator, TensorsRoundTripThroughDevice) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(81);
  Tensor x = random_tensor({13, 7}, rng);
  Tensor back = x.to(kGpu).clone().to(Device::cpu());
  EXPECT_EQ(back.to_float_vector(), x.to_float_vector());
}

}  // namespace
}  // namespace loft::test
