// --gpu-memory-limit on a real GPU: an allocation over the cap is the clean out-of-memory error
// naming the cap (after the cached blocks went back), device_info reports the cap, the CUDA
// context and cuBLAS workspace count against it, and a finetune under a cap just above its
// measured peak trains while one under its estimate is refused before training.
#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "engine/core/byte_size.h"
#include "engine/core/error.h"
#include "engine/device/device_info.h"
#include "engine/device/memory.h"
#include "engine/device/memory_limit.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"

namespace loft::test {
namespace {

namespace fs = std::filesystem;
constexpr size_t kMiB = size_t(1) << 20;
const Device kCuda = Device::cuda(0);

struct CapGuard {
  explicit CapGuard(int64_t bytes) { set_gpu_memory_limit(bytes); }
  ~CapGuard() { set_gpu_memory_limit(0); }
};

// Runs first in its own process (ctest runs each test alone): the cap is set before the context
// exists, so NVML sees what the context itself takes.
TEST(GpuMemoryLimit, ContextAndWorkspaceCount) {
  LOFT_REQUIRE_GPU();
  if (memory_outside(kCuda).bytes > 0) GTEST_SKIP() << "an earlier test in this process made the context";
  CapGuard cap(int64_t(80) << 30);
  auto block = allocate_storage(1, kCuda);
  const OutsideMemory s = memory_outside(kCuda);
  std::cout << "CUDA context and libraries on " << device_info(kCuda).name << ": " << (s.bytes >> 20)
            << " MiB (context " << (s.context_measured ? "measured" : "not measured: no NVML") << ")\n";
  EXPECT_GE(s.bytes, 32 * kMiB) << "the cuBLASLt workspace at least";
  if (s.context_measured) {
    EXPECT_GT(s.bytes, 40 * kMiB) << "a CUDA context takes more than the workspace";
  }
}

TEST(GpuMemoryLimit, AllocationOverTheCapIsTheOutOfMemoryError) {
  LOFT_REQUIRE_GPU();
  auto keep = allocate_storage(1, kCuda);  // the context exists and is counted
  release_cached_memory(kCuda);
  const MemoryStats before = memory_stats(kCuda);
  const size_t outside = memory_outside(kCuda).bytes;
  EXPECT_GE(outside, 32 * kMiB);
  const int64_t cap = int64_t(before.reserved + outside + 64 * kMiB);
  CapGuard guard(cap);

  const DeviceInfo info = device_info(kCuda);
  EXPECT_EQ(info.total_bytes, cap);
  EXPECT_EQ(info.free_bytes, 64 * int64_t(kMiB));
  EXPECT_EQ(device_memory_bytes(kCuda), cap);

  auto a = allocate_storage(48 * kMiB, kCuda);
  try {
    allocate_storage(32 * kMiB, kCuda);
    FAIL() << "48 + 32 MiB went over a 64 MiB allowance";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("out of GPU memory on cuda:0 allocating 32 MiB over --gpu-memory-limit ", 0), 0u) << m;
    EXPECT_TRUE(contains(m, "48 MiB in use by loft"));
    EXPECT_EQ(m.find('\n'), std::string::npos);
  }
  a.reset();  // 48 MiB cached: too small for 56 MiB, and 48 + 56 is over the cap
  auto b = allocate_storage(56 * kMiB, kCuda);
  EXPECT_EQ(memory_stats(kCuda).reserved, before.reserved + 56 * kMiB) << "the cached block went back first";
  b.reset();
  release_cached_memory(kCuda);
}

std::string stories() { return (source_dir() / "examples" / "stories260K").string(); }
std::string demo() { return (source_dir() / "examples" / "demo.jsonl").string(); }

CliResult finetune(const fs::path& out, const std::string& cap) {
  std::vector<std::string> args{"finetune", "--model", stories(), "--data", demo(), "--steps", "3",
                                "--batch", "8", "--micro-batch", "8", "--seq", "128", "--lora-rank", "8",
                                "--device", "cuda", "--no-report", "--out", out.string()};
  if (!cap.empty()) args.insert(args.end(), {"--gpu-memory-limit", cap});
  return run_cli_captured(args);
}

TEST(GpuMemoryLimit, FinetuneUnderACapJustAboveItsPeakTrainsAndUnderItsEstimateIsRefused) {
  LOFT_REQUIRE_GPU();
  // The in-process finetunes below set the process's cap; it goes when the test ends, however it
  // ends, or every later test in this binary would run under it.
  CapGuard uncapped_after(0);
  TempDir dir;
  reset_peak_memory(kCuda);
  const CliResult free_run = finetune(dir / "free", "");
  ASSERT_EQ(free_run.code, 0) << free_run.err;
  const MemoryStats measured = memory_stats(kCuda);
  const size_t outside = memory_outside(kCuda).bytes;
  release_cached_memory(kCuda);

  const int64_t just_above = int64_t(outside + measured.peak_allocated + 16 * kMiB);
  const CliResult capped = finetune(dir / "capped", std::to_string(just_above));
  ASSERT_EQ(capped.code, 0) << "cap " << just_above << " (peak " << measured.peak_allocated << " + outside "
                            << outside << "): " << capped.err;
  EXPECT_EQ(read_jsonl(dir / "capped" / "metrics.jsonl").size(), 3u);

  const CliResult info = run_cli_captured({"info", "--model", stories(), "--json", "--batch", "8", "--seq", "128",
                                           "--lora-rank", "8"});
  ASSERT_EQ(info.code, 0) << info.err;
  int64_t estimate = 0;
  // Parsed into a variable: a range-for over a member of a temporary reads freed memory.
  const nlohmann::json parsed = nlohmann::json::parse(info.out);
  for (const auto& m : parsed["memory_estimate"]["methods"])
    if (m["method"] == "lora-bf16") estimate = m["total_bytes"];
  ASSERT_GT(estimate, 0);
  const int64_t below = int64_t(memory_outside(kCuda).bytes) + estimate / 2;
  const CliResult refused = finetune(dir / "refused", std::to_string(below));
  EXPECT_EQ(refused.code, 2) << refused.err;
  EXPECT_TRUE(contains(refused.err, "by loft's estimate"));
  EXPECT_TRUE(contains(refused.err, "more than --gpu-memory-limit " + format_byte_size(below)));
  EXPECT_FALSE(fs::exists(dir / "refused" / "metrics.jsonl")) << "refused before training";
}

}  // namespace
}  // namespace loft::test
