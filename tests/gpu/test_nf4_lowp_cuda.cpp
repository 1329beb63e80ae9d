// nf4_to_lowp on CUDA (engine/quant/cuda/nf4_lowp_cuda.cu) byte for byte against the CPU
// reference, for each of its kernels: plain (16 elements a thread; a partial last 16 and a
// partial last NF4 block; misaligned codes or output take the byte path), transposed by 4×16
// squares (cols a multiple of 64, rows of 4: the Llama projections) and by 32×32 tiles (every
// other shape, or a misaligned output), and the plain kernel at llama shapes (`loft bench
// --kernels` times it); nf4_max_abs against the CPU's.
#include <cstring>

#include "engine/device/memory.h"
#include "engine/quant/nf4_lowp.h"
#include "tests/engine/test_quant_fp8_reference.h"
#include "tests/engine/test_quant_nf4_util.h"
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

using quant::LowpFormat;

constexpr uint8_t kSentinel = 0xA5;

// A GPU buffer of numel + offset + 8 bytes of dtype dt filled with kSentinel.
Tensor sentinel_buffer(int64_t numel, DType dt, int64_t offset) {
  Tensor host = Tensor::empty({numel + offset + 8}, dt);
  std::memset(host.data(), kSentinel, size_t(host.numel()));
  return host.to(kGpu);
}

// The GPU's codes of g into a view `offset` bytes into a sentinel buffer equal the CPU's of q (the
// same weight), and no byte outside the view changed.
::testing::AssertionResult same_as_cpu(const Nf4Tensor& q, const Nf4Tensor& g, LowpFormat f,
                                       bool transposed, int64_t offset) {
  const Shape shape = transposed ? Shape{q.shape[1], q.shape[0]} : q.shape;
  const int64_t n = shape_numel(shape);
  const float s = quant::nf4_lowp_scale(q, f);
  Tensor want = Tensor::empty(shape, quant::code_dtype(f));
  quant::nf4_to_lowp(q, s, transposed, want);
  Tensor buf = sentinel_buffer(n, quant::code_dtype(f), offset);
  Tensor got = buf.slice(offset, n).view(shape);
  quant::nf4_to_lowp(g, s, transposed, got);
  const std::vector<uint8_t> a = code_bytes(got), b = code_bytes(want);
  if (a != b) {
    size_t i = 0;
    while (a[i] == b[i]) ++i;
    return ::testing::AssertionFailure() << "first differing code at " << i << ": " << int(a[i])
                                         << " vs the CPU's " << int(b[i]);
  }
  const std::vector<uint8_t> all = code_bytes(buf);
  for (int64_t i = 0; i < int64_t(all.size()); ++i)
    if ((i < offset || i >= offset + n) && all[size_t(i)] != kSentinel)
      return ::testing::AssertionFailure() << "wrote byte " << i << " outside the view";
  return ::testing::AssertionSuccess();
}

// g with its NF4 codes moved `offset` bytes into a fresh buffer (a misaligned input).
Nf4Tensor with_codes_at(const Nf4Tensor& g, int64_t offset) {
  Nf4Tensor out = g;
  Tensor buf = Tensor::zeros({g.codes.numel() + offset}, DType::U8, kGpu);
  out.codes = buf.slice(offset, g.codes.numel());
  out.codes.copy_from(g.codes);
  return out;
}

TEST(Nf4LowpCuda, CodesIdenticalToCpu) {
  LOFT_REQUIRE_GPU();
  uint32_t seed = 70;
  // Odd numels (a pad nibble), partial last 16 and last NF4 block (91, 80, 100), rows of 4 with
  // cols a multiple of 64 (the square kernel, including a partial last block of 256 rows), and
  // shapes only the tile kernel takes (cols % 64 != 0 or rows % 4 != 0).
  const Shape shapes[] = {{1, 1},    {3, 5},    {7, 13},   {4, 20},    {2, 96},   {10, 10},
                          {4, 192},  {6, 64},   {300, 64}, {172, 64},  {64, 172}, {301, 128},
                          {260, 128}, {33, 4160}, {1024, 4096}};
  for (const Shape& shape : shapes) {
    const Nf4Tensor cpu = quantize_nf4(nf4_test_weight(shape, seed++));
    const Nf4Tensor gpu = cpu.to(kGpu);
    for (LowpFormat f : {LowpFormat::E4M3, LowpFormat::E5M2, LowpFormat::INT8})
      for (bool transposed : {false, true})
        for (int64_t offset : {0, 1}) {
          EXPECT_TRUE(same_as_cpu(cpu, gpu, f, transposed, offset))
              << shape_str(shape) << " " << quant::format_name(f) << " transposed " << transposed
              << " output offset " << offset;
          if (offset == 1) {  // a misaligned NF4 input too
            EXPECT_TRUE(same_as_cpu(cpu, with_codes_at(gpu, 3), f, transposed, 0))
                << shape_str(shape) << " " << quant::format_name(f) << " transposed " << transposed
                << " input offset 3";
          }
        }
  }
}

// nf4_max_abs on the GPU (the scale HALO's NF4 backbone fixes once) is the CPU's float, whichever
// block holds the largest magnitude: the first, one inside, or a partial last one.
TEST(Nf4LowpCuda, MaxAbsIdenticalToCpu) {
  LOFT_REQUIRE_GPU();
  uint32_t seed = 80;
  const Shape shapes[] = {{1, 1}, {3, 5}, {7, 13}, {10, 10}, {300, 64}, {33, 4160}, {1024, 4096}};
  for (const Shape& shape : shapes)
    for (int64_t at : {int64_t(0), shape_numel(shape) / 2, shape_numel(shape) - 1}) {
      Tensor w = nf4_test_weight(shape, seed++);
      w.ptr<float>()[at] = -8.0f;  // the outlier sets one block's absmax
      const Nf4Tensor cpu = quantize_nf4(w);
      const Nf4Tensor gpu = cpu.to(kGpu);
      const float want = quant::nf4_max_abs(cpu);
      EXPECT_EQ(quant::nf4_max_abs(gpu), want) << shape_str(shape) << " outlier at " << at;
      EXPECT_EQ(quant::nf4_max_abs(with_codes_at(gpu, 3)), want)
          << shape_str(shape) << " outlier at " << at << ", codes at an odd address";
    }
}

// The Llama projections (llama-7b / llama-3-8b): weights quantized on the GPU (the CPU's bytes),
// decoded both ways against the CPU.
TEST(Nf4LowpCuda, LlamaShapesIdenticalToCpu) {
  LOFT_REQUIRE_GPU();
  uint32_t seed = 90;
  for (const Shape& shape : {Shape{4096, 4096}, Shape{14336, 4096}, Shape{4096, 11008}}) {
    const Nf4Tensor gpu = quantize_nf4(nf4_test_weight(shape, seed++).to(kGpu));
    const Nf4Tensor cpu = gpu.to(Device::cpu());
    for (LowpFormat f : {LowpFormat::E4M3, LowpFormat::INT8})
      for (bool transposed : {false, true})
        EXPECT_TRUE(same_as_cpu(cpu, gpu, f, transposed, 0))
            << shape_str(shape) << " " << quant::format_name(f) << " transposed " << transposed;
  }
}

// The plain kernel at Llama projection shapes, against the CPU.
TEST(Nf4LowpCuda, PlainAtLlamaShapesMatchesTheCpu) {
  LOFT_REQUIRE_GPU();
  for (const Shape& shape : {Shape{4096, 4096}, Shape{14336, 4096}, Shape{4096, 14336}}) {
    Tensor w = Tensor::empty(shape, DType::BF16, kGpu);
    ops::fill_random(w, 3, 0.02f);
    const Nf4Tensor q = quantize_nf4(w);
    const float s = quant::nf4_lowp_scale(q, LowpFormat::E4M3);
    Tensor codes = Tensor::empty(shape, DType::F8_E4M3, kGpu);
    quant::nf4_to_lowp(q, s, false, codes);
    const Nf4Tensor cpu = q.to(Device::cpu());
    Tensor want = Tensor::empty(shape, DType::F8_E4M3);
    quant::nf4_to_lowp(cpu, s, false, want);
    EXPECT_TRUE(code_bytes(codes) == code_bytes(want)) << shape_str(shape);
  }
}

}  // namespace
}  // namespace loft::test
