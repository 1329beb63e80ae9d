// engine/device/caching_pool: the GPU allocator's reuse rules and the --gpu-memory-limit cap,
// driven on the CPU by a fake driver that hands out host memory and can run out.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "engine/core/error.h"
#include "engine/device/caching_pool.h"
#include "engine/device/device_info.h"
#include "engine/device/memory_limit.h"

namespace loft {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

// Host memory as a device of `capacity` bytes, counting its calls.
struct FakeDriver {
  size_t capacity = SIZE_MAX, held = 0;
  int mallocs = 0, frees = 0, syncs = 0;
  std::map<void*, size_t> live;  // pointer -> size

  PoolDriver driver() {
    PoolDriver d;
    d.malloc = [this](size_t size, std::string* error) -> void* {
      ++mallocs;
      if (size > capacity - held) {
        *error = "fake device out of memory";
        return nullptr;
      }
      void* p = std::malloc(size);
      held += size;
      live[p] = size;
      return p;
    };
    d.sync = [this] { ++syncs; };
    d.free = [this](void* p) {
      ++frees;
      held -= live.at(p);
      live.erase(p);
      std::free(p);
    };
    return d;
  }
};

// Sets the process-wide cap for one test and clears it after.
struct CapGuard {
  explicit CapGuard(int64_t bytes) { set_gpu_memory_limit(bytes); }
  ~CapGuard() { set_gpu_memory_limit(0); }
};

std::string error_of(CachingPool& pool, size_t bytes) {
  try {
    pool.acquire(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CachingPool, ReusesFreedBlocksWithinAnEighth) {
  FakeDriver fake;
  CachingPool pool("cuda:0", fake.driver());
  const auto a = pool.acquire(8 * kMiB);
  pool.give_back(a.ptr, a.size);
  const auto b = pool.acquire(7 * kMiB + kMiB / 2);  // 8 MiB is within 1/8 of 7.5 MiB
  EXPECT_EQ(b.ptr, a.ptr);
  EXPECT_EQ(fake.mallocs, 1);
  pool.give_back(b.ptr, b.size);
  const auto c = pool.acquire(4 * kMiB);  // 8 MiB would waste half: a new block
  EXPECT_NE(c.ptr, a.ptr);
  EXPECT_EQ(fake.mallocs, 2);
  const MemoryStats s = pool.stats();
  EXPECT_EQ(s.allocated, 4 * kMiB);
  EXPECT_EQ(s.reserved, 12 * kMiB);
  EXPECT_EQ(s.peak_allocated, 8 * kMiB);
  pool.give_back(c.ptr, c.size);
  pool.release_cached();
  EXPECT_EQ(pool.stats().reserved, 0u);
  EXPECT_TRUE(fake.live.empty());
}

TEST(CachingPool, RealOutOfMemoryReleasesTheCacheThenFails) {
  FakeDriver fake;
  fake.capacity = 10 * kMiB;
  CachingPool pool("cuda:1", fake.driver());
  const auto a = pool.acquire(6 * kMiB);
  pool.give_back(a.ptr, a.size);
  const auto b = pool.acquire(8 * kMiB);  // the driver is full until the cached 6 MiB go back
  EXPECT_EQ(fake.frees, 1);
  EXPECT_EQ(fake.syncs, 1);
  EXPECT_EQ(pool.stats().reserved, 8 * kMiB);
  const std::string err = error_of(pool, 4 * kMiB);
  EXPECT_EQ(err.rfind("out of GPU memory on cuda:1 allocating 4 MiB", 0), 0u) << err;
  EXPECT_NE(err.find("fake device out of memory"), std::string::npos) << err;
  pool.give_back(b.ptr, b.size);
  pool.release_cached();
}

TEST(CachingPool, RealOutOfMemoryReturnsOnlyWhatTheRequestNeeds) {
  FakeDriver fake;
  fake.capacity = 10 * kMiB;
  CachingPool pool("cuda:0", fake.driver());
  const auto a = pool.acquire(3 * kMiB), b = pool.acquire(4 * kMiB);
  pool.give_back(a.ptr, a.size);
  pool.give_back(b.ptr, b.size);
  // 7 of 10 held, all cached: 6 more fit once the largest (4) goes back; the 3 stays cached.
  const auto c = pool.acquire(6 * kMiB);
  EXPECT_EQ(fake.frees, 1);
  EXPECT_EQ(fake.syncs, 1);
  EXPECT_EQ(pool.stats().reserved, 9 * kMiB);
  EXPECT_EQ(pool.stats().pressure_returns, 1u);
  const auto d = pool.acquire(3 * kMiB);
  EXPECT_EQ(d.ptr, a.ptr);
  // Full, nothing cached, 2 MiB asked: the driver's error.
  EXPECT_NE(error_of(pool, 2 * kMiB).find("fake device out of memory"), std::string::npos);
  pool.give_back(d.ptr, d.size);
  // Full again with the 3 MiB cached: a 2 MiB request takes it rather than return it.
  const int frees = fake.frees;
  const auto e = pool.acquire(2 * kMiB);
  EXPECT_EQ(e.ptr, a.ptr);
  EXPECT_EQ(fake.frees, frees);
  pool.give_back(c.ptr, c.size);
  pool.give_back(e.ptr, e.size);
  pool.release_cached();
  EXPECT_TRUE(fake.live.empty());
}

TEST(CachingPool, CapCountsReservedAndOutside) {
  FakeDriver fake;
  CachingPool pool("cuda:0", fake.driver());
  pool.add_outside(3 * kMiB, true);
  CapGuard cap(16 * kMiB);
  const auto a = pool.acquire(8 * kMiB);  // 3 + 8 <= 16
  pool.give_back(a.ptr, a.size);
  // 3 + 8 cached + 6 > 16: the cached block serves, though it wastes 2 MiB, and none goes back.
  const auto b = pool.acquire(6 * kMiB);
  EXPECT_EQ(b.ptr, a.ptr);
  EXPECT_EQ(b.size, 8 * kMiB);
  EXPECT_EQ(fake.frees, 0);
  EXPECT_EQ(fake.syncs, 0);
  EXPECT_EQ(pool.stats().reserved, 8 * kMiB);
  // 3 + 8 + 6 > 16 with nothing cached: the cap's error, before the driver is asked.
  const int mallocs = fake.mallocs;
  const std::string err = error_of(pool, 6 * kMiB);
  EXPECT_EQ(fake.mallocs, mallocs);
  EXPECT_EQ(err,
            "out of GPU memory on cuda:0 allocating 6 MiB over --gpu-memory-limit 16 MiB (8 MiB in "
            "use by loft, 0 MiB cached, 3 MiB CUDA context and libraries)");
  const auto c = pool.acquire(5 * kMiB);  // exactly 16: fits
  EXPECT_EQ(pool.stats().reserved + pool.outside().bytes, 16 * kMiB);
  pool.give_back(b.ptr, b.size);
  pool.give_back(c.ptr, c.size);
  pool.release_cached();
}

TEST(CachingPool, CapReturnsCachedBlocksLargestFirstOnlyUntilTheRequestFits) {
  FakeDriver fake;
  CachingPool pool("cuda:0", fake.driver());
  CapGuard cap(16 * kMiB);
  const auto a = pool.acquire(2 * kMiB), b = pool.acquire(3 * kMiB), c = pool.acquire(4 * kMiB);
  for (const auto& x : {a, b, c}) pool.give_back(x.ptr, x.size);
  // 9 cached + 10 > 16, and no cached block holds 10: the 4 goes back (5 + 10 <= 16), not the rest.
  const auto d = pool.acquire(10 * kMiB);
  EXPECT_EQ(fake.frees, 1);
  EXPECT_EQ(fake.syncs, 1);
  EXPECT_EQ(pool.stats().reserved, 15 * kMiB);
  EXPECT_EQ(pool.stats().pressure_returns, 1u);
  EXPECT_EQ(pool.acquire(3 * kMiB).ptr, b.ptr);
  EXPECT_EQ(pool.acquire(2 * kMiB).ptr, a.ptr);
  EXPECT_EQ(fake.frees, 1);
  pool.give_back(d.ptr, d.size);
  pool.give_back(a.ptr, a.size);
  pool.give_back(b.ptr, b.size);
  pool.release_cached();
  EXPECT_TRUE(fake.live.empty());
  EXPECT_EQ(pool.stats().pressure_returns, 1u) << "a release asked for is not one made under pressure";
}

TEST(CachingPool, CapErrorSaysWhenTheContextWasNotMeasured) {
  FakeDriver fake;
  CachingPool pool("cuda:0", fake.driver());
  pool.add_outside(kMiB, false);
  CapGuard cap(2 * kMiB);
  const std::string err = error_of(pool, 2 * kMiB);
  EXPECT_NE(err.find("over --gpu-memory-limit 2 MiB"), std::string::npos) << err;
  EXPECT_NE(err.find("the CUDA context itself not measured"), std::string::npos) << err;
}

TEST(CachingPool, OutsideAboveTheCapRefusesEverything) {
  FakeDriver fake;
  CachingPool pool("cuda:0", fake.driver());
  pool.add_outside(5 * kMiB, true);
  CapGuard cap(4 * kMiB);
  EXPECT_NE(error_of(pool, 512).find("over --gpu-memory-limit 4 MiB"), std::string::npos);
  EXPECT_EQ(fake.mallocs, 0);
}

TEST(CachingPool, NoCapAsksTheDriver) {
  FakeDriver fake;
  CachingPool pool("cuda:0", fake.driver());
  pool.add_outside(100 * kMiB, true);
  const auto a = pool.acquire(64 * kMiB);
  EXPECT_EQ(fake.mallocs, 1);
  pool.give_back(a.ptr, a.size);
  pool.release_cached();
}

TEST(CappedDeviceInfo, ReportsTheCapAsTheCard) {
  const int64_t GiB = int64_t(1) << 30;
  const DeviceInfo h100{"NVIDIA H100 80GB HBM3", 80 * GiB, 79 * GiB, ""};
  int64_t held = 2 * GiB + GiB / 2;  // reserved + outside
  const DeviceInfo d = capped_device_info(h100, 24 * GiB, held);
  EXPECT_EQ(d.name, h100.name);
  EXPECT_EQ(d.total_bytes, 24 * GiB);
  EXPECT_EQ(d.free_bytes, 24 * GiB - 2 * GiB - GiB / 2);
  const DeviceInfo same = capped_device_info(h100, 0, held);
  EXPECT_EQ(same.total_bytes, h100.total_bytes);
  EXPECT_EQ(same.free_bytes, h100.free_bytes);
  // A cap above the card: the card; free never more than the card has.
  const DeviceInfo small{"card", 16 * GiB, 3 * GiB, ""};
  const DeviceInfo over = capped_device_info(small, 24 * GiB, held);
  EXPECT_EQ(over.total_bytes, 16 * GiB);
  EXPECT_EQ(over.free_bytes, 3 * GiB);
  held = 30 * GiB;
  EXPECT_EQ(capped_device_info(h100, 24 * GiB, held).free_bytes, 0);
}

// A GPU's UUID as nvidia-smi prints it (bench's device_uuid: which card ran a benchmark).
TEST(DeviceInfo, GpuUuidTextIsNvidiaSmis) {
  const unsigned char bytes[16] = {0x6f, 0x1a, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
                                   0x08, 0x09, 0x0a, 0xbc, 0x0c, 0x0d, 0x0e, 0xff};
  EXPECT_EQ(gpu_uuid_text(bytes), "GPU-6f1a0203-0405-0607-0809-0abc0c0d0eff");
}

}  // namespace
}  // namespace loft
