// HOT's CUDA kernels against the CPU reference, bit for bit (docs/hot.md §8.2): FWHT16 → scale → SR (or
// RNE) codes of dY, the W codes, the integer GEMM on every path (cuBLASLt INT8, loft's mma s8,
// packed s4), the epilogue (F32 and BF16 dx, with dx_lora and accumulate), at Llama shapes and odd
// ones; the overflow flag; LQS's errors; and a whole HotWeight on the GPU against the CPU one.
// The CPU GEMM runs on a sample of rows for the large shapes (rows are independent); each weight's
// CPU codes are made once per bit width and shared by the token counts and options using them.
#include <algorithm>
#include <array>
#include <cstring>
#include <map>

#include "engine/device/memory.h"
#include "engine/methods/hot/hot_gemm.h"
#include "engine/methods/hot/hot_lqs.h"
#include "engine/methods/hot/hot_numerics.h"
#include "engine/methods/hot/hot_weight.h"
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

using quant::HotCodes;
using quant::HotGemmPath;
using quant::HotQuantOptions;
using quant::HotRound;
using quant::HotScale;

// bf16 values with every 5th token 40× louder, on the GPU (BF16) and as F32 on the CPU.
struct Pair {
  Tensor gpu, cpu;
};
Pair bf16_pair(int64_t rows, int64_t cols, std::mt19937& rng, float scale, bool loud_rows) {
  Tensor h = random_tensor({rows, cols}, rng, -scale, scale);
  if (loud_rows)
    for (int64_t r = 0; r < rows; r += 5)
      for (int64_t c = 0; c < cols; ++c) h.ptr<float>()[r * cols + c] *= 40.0f;
  const Tensor g = to_gpu(h, DType::BF16);
  return {g, cpu_f32(g)};
}

std::vector<int64_t> ints(const Tensor& t) { return t.to(Device::cpu()).to_int_vector(); }
std::vector<uint32_t> bits_of(const Tensor& t) {
  const Tensor h = t.to(Device::cpu());
  std::vector<uint32_t> b(size_t(h.numel()));
  std::memcpy(b.data(), h.data(), b.size() * 4);
  return b;
}

// Bytes of a CPU or GPU tensor, as the CPU sees them (codes, scales, int32 accumulators).
std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor h = t.to(Device::cpu());
  std::vector<uint8_t> b(h.nbytes());
  std::memcpy(b.data(), h.data(), b.size());
  return b;
}

::testing::AssertionResult same_codes(const HotCodes& gpu, const HotCodes& cpu) {
  if (gpu.codes.shape() != cpu.codes.shape()) return ::testing::AssertionFailure() << "shapes differ";
  if (bits_of(gpu.scale) != bits_of(cpu.scale))
    return ::testing::AssertionFailure() << "scales differ";
  // Compared as bytes (int8 codes); the first difference is named.
  const auto a = bytes_of(gpu.codes), b = bytes_of(cpu.codes);
  if (a == b) return ::testing::AssertionSuccess();
  const size_t i = size_t(std::mismatch(a.begin(), a.end(), b.begin()).first - a.begin());
  return ::testing::AssertionFailure() << "code " << i << " (row " << i / size_t(cpu.k_padded()) << ", col "
                                       << i % size_t(cpu.k_padded()) << "): gpu " << int(int8_t(a[i])) << " cpu "
                                       << int(int8_t(b[i]));
}

// The CPU codes of `rows` only (padded as hot_codes_empty pads).
HotCodes rows_of(const HotCodes& c, const std::vector<int64_t>& rows) {
  HotCodes r = quant::hot_codes_empty(int64_t(rows.size()), c.cols, c.bits, Device::cpu());
  const int64_t k = c.k_padded();
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(r.codes.ptr<int8_t>() + int64_t(i) * k, c.codes.ptr<int8_t>() + rows[i] * k, size_t(k));
    r.scale.ptr<float>()[i] = c.scale.ptr<float>()[rows[i]];
  }
  return r;
}

std::vector<int64_t> sample_rows(int64_t t) {
  if (t <= 64) {
    std::vector<int64_t> all(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) all[size_t(i)] = i;
    return all;
  }
  return {0, 1, 5, 17, t / 2, t - 2, t - 1};
}

// Rows `rows` of a [T, N] tensor as F32 on the CPU.
Tensor take_rows(const Tensor& t, const std::vector<int64_t>& rows) {
  const Tensor h = cpu_f32(t);
  Tensor r = Tensor::empty({int64_t(rows.size()), t.size(1)}, DType::F32);
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(r.ptr<float>() + int64_t(i) * t.size(1), h.ptr<float>() + rows[i] * t.size(1),
                size_t(t.size(1)) * 4);
  return r;
}

// A weight [out, in] on both sides and its CPU codes per bit width, made once and shared by every
// token count and option that uses it (the CPU codes of a Llama-sized W are the slow part).
struct WeightCase {
  Pair w;
  std::map<int, HotCodes> cpu_codes;

  WeightCase(int64_t out, int64_t in, uint32_t seed) {
    std::mt19937 rng(seed);
    w = bf16_pair(out, in, rng, 0.02f, false);
  }
  const HotCodes& codes(int bits) {
    auto it = cpu_codes.find(bits);
    if (it == cpu_codes.end()) it = cpu_codes.emplace(bits, quant::hot_weight_codes(w.cpu, bits)).first;
    return it->second;
  }
};

void check_pipeline(int64_t t, WeightCase& wc, const HotQuantOptions& opt, uint32_t seed) {
  const int64_t out = wc.w.cpu.size(0), in = wc.w.cpu.size(1);
  const std::string what = cat("T=", t, " out=", out, " in=", in, " bits=", opt.bits,
                               opt.scale == HotScale::PerToken ? " per-token" : " per-tensor",
                               opt.round == HotRound::Stochastic ? " sr" : " rne");
  SCOPED_TRACE(what);
  std::mt19937 rng(seed);
  const Pair dy = bf16_pair(t, out, rng, 1.0f, true);
  const HotCodes a_gpu = quant::hot_quantize_dy(dy.gpu, opt), a_cpu = quant::hot_quantize_dy(dy.cpu, opt);
  ASSERT_TRUE(same_codes(a_gpu, a_cpu)) << "dY codes";
  const HotCodes b_gpu = quant::hot_weight_codes(wc.w.gpu, opt.bits);
  const HotCodes& b_cpu = wc.codes(opt.bits);
  ASSERT_TRUE(same_codes(b_gpu, b_cpu)) << "W codes";

  // Every GEMM path gives the same int32 accumulators.
  const Tensor acc = quant::hot_igemm(a_gpu, b_gpu, HotGemmPath::Int8);
  const auto acc_bytes = bytes_of(acc);
  EXPECT_TRUE(bytes_of(quant::hot_igemm(a_gpu, b_gpu, HotGemmPath::Int8Mma)) == acc_bytes) << "mma s8";
  if (opt.bits == 4) {
    EXPECT_TRUE(bytes_of(quant::hot_igemm(a_gpu, b_gpu, HotGemmPath::S4)) == acc_bytes) << "packed s4";
    EXPECT_TRUE(bytes_of(quant::hot_pack_s4(a_gpu.codes)) == bytes_of(quant::hot_pack_s4(a_cpu.codes)))
        << "packed s4 codes";
  }
  const int32_t* acc_v = reinterpret_cast<const int32_t*>(acc_bytes.data());
  // The CPU on sampled rows: accumulators, then the epilogue with dx_lora and accumulate.
  const std::vector<int64_t> rows = sample_rows(t);
  const HotCodes a_rows = rows_of(a_cpu, rows);
  const Tensor acc_cpu = quant::hot_igemm(a_rows, b_cpu);
  const int64_t np = b_cpu.rows_padded();
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t j = 0; j < in; ++j)
      ASSERT_EQ(acc_v[rows[i] * np + j], acc_cpu.ptr<int32_t>()[int64_t(i) * np + j])
          << "acc row " << rows[i] << " col " << j;

  const Tensor lora = to_gpu(random_tensor({t, in}, rng, -0.01f, 0.01f), DType::F32);
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor dx = to_gpu(random_tensor({t, in}, rng, -0.1f, 0.1f), dt);
    Tensor dx_cpu = take_rows(dx, rows);
    const Tensor lora_rows = take_rows(lora, rows);
    quant::hot_epilogue(acc, a_gpu, b_gpu, &lora, dx, true);
    quant::hot_epilogue(acc_cpu, a_rows, b_cpu, &lora_rows, dx_cpu, true);
    const Tensor got = take_rows(dx, rows);
    for (int64_t i = 0; i < got.numel(); ++i) {
      float want = dx_cpu.ptr<float>()[i];
      if (dt == DType::BF16) want = bf16_to_f32(f32_to_bf16(want));
      ASSERT_EQ(quant::float_bits(got.ptr<float>()[i]), quant::float_bits(want))
          << name(dt) << " dx element " << i << ": " << got.ptr<float>()[i] << " vs " << want;
    }
  }
}

TEST(HotCuda, PipelineMatchesCpuBitForBitAtLlamaShapes) {
  LOFT_REQUIRE_GPU();
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1024, 4096}, {4096, 4096}, {14336, 4096}, {4096, 14336}, {11008, 4096}, {4096, 11008}};
  uint32_t seed = 1;
  for (auto [out, in] : shapes) {
    WeightCase wc(out, in, 1000 + seed);
    for (int64_t t : {1, 17, 4096}) {
      HotQuantOptions opt;
      opt.seed = 0x1234567890abcdefull + seed, opt.step = seed, opt.site = quant::hot_site(3, 2, 0);
      check_pipeline(t, wc, opt, seed++);
      if (t == 4096 && out != in) continue;  // the CPU's share of the large cases
      opt.bits = 8, opt.scale = HotScale::PerTensor;
      check_pipeline(t, wc, opt, seed++);
      opt.bits = 4, opt.round = HotRound::Nearest;
      check_pipeline(t, wc, opt, seed++);
    }
  }
}

TEST(HotCuda, PipelineMatchesCpuBitForBitAtOddShapes) {
  LOFT_REQUIRE_GPU();
  // out not a multiple of 16 (blocks of 4, 8, 1), in odd, T below and across the 16-row padding,
  // and M/N across the mma kernel's 128-row tiles.
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 172, 64}, {17, 172, 64}, {3, 24, 7}, {33, 7, 5}, {130, 48, 130}, {257, 256, 258},
      {17, 1000, 300}};
  uint32_t seed = 100;
  for (auto [t, out, in] : shapes) {
    WeightCase wc(out, in, 1000 + seed);
    for (int bits : {4, 8})
      for (HotScale sc : {HotScale::PerToken, HotScale::PerTensor}) {
        HotQuantOptions opt;
        opt.bits = bits, opt.scale = sc, opt.seed = seed, opt.site = 77;
        check_pipeline(t, wc, opt, seed++);
      }
  }
}

TEST(HotCuda, F32InputsAndOverflowFlagMatchCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(5);
  Tensor h = random_tensor({20, 64}, rng);
  h.ptr<float>()[64 * 3 + 9] = std::nanf("");
  h.ptr<float>()[64 * 11 + 2] = INFINITY;
  for (HotScale sc : {HotScale::PerToken, HotScale::PerTensor}) {
    HotQuantOptions opt;
    opt.scale = sc;
    Tensor flag_gpu = Tensor::zeros({1}, DType::I32, kGpu), flag_cpu = Tensor::zeros({1}, DType::I32);
    const HotCodes g = quant::hot_quantize_dy(h.to(kGpu), opt, &flag_gpu);
    const HotCodes c = quant::hot_quantize_dy(h, opt, &flag_cpu);
    EXPECT_TRUE(same_codes(g, c));
    EXPECT_EQ(ints(flag_gpu)[0], 1);
    EXPECT_EQ(ints(flag_cpu)[0], 1);
  }
  const Tensor clean = random_tensor({20, 64}, rng);
  Tensor flag = Tensor::zeros({1}, DType::I32, kGpu);
  EXPECT_TRUE(same_codes(quant::hot_quantize_dy(clean.to(kGpu), {}, &flag),
                         quant::hot_quantize_dy(clean, {})));
  EXPECT_EQ(ints(flag)[0], 0);
  EXPECT_EQ(bits_of(quant::hot_rotate_rows(clean.to(kGpu))),
            bits_of(quant::hot_rotate_rows(clean)));
}

TEST(HotCuda, LqsErrorsAgreeWithCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(6);
  const Pair dy = bf16_pair(300, 4096, rng, 1.0f, true);
  HotQuantOptions opt;
  opt.site = quant::hot_site(0, 0, quant::hot::kStreamLqs);
  quant::HotLqsErrors g, c;
  quant::hot_lqs_accumulate(dy.gpu, opt, g);
  quant::hot_lqs_accumulate(dy.cpu, opt, c);
  EXPECT_NEAR(g.token, c.token, 1e-9 * c.token);
  EXPECT_NEAR(g.tensor, c.tensor, 1e-9 * c.tensor);
  EXPECT_EQ(quant::hot_lqs_choice(g), quant::hot_lqs_choice(c));
}

TEST(HotCuda, HotWeightOnTheGpuMatchesTheCpuOne) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(7);
  const Pair w = bf16_pair(1024, 512, rng, 0.02f, false);
  for (HotGemmPath path : {HotGemmPath::Auto, HotGemmPath::Int8, HotGemmPath::S4}) {
    HotOptions opt;
    opt.seed = 42;
    opt.gemm = path;
    HotWeight gpu(WeightSource(w.gpu), opt, {5, 3});
    HotWeight cpu(WeightSource(w.cpu), opt, {5, 3});
    for (int step = 0; step < 2; ++step) {
      const Pair dy = bf16_pair(37, 1024, rng, 1.0f, true);
      Tensor dx_g = Tensor::empty({37, 512}, DType::BF16, kGpu), dx_c = Tensor::empty({37, 512}, DType::F32);
      gpu.backward_input(dy.gpu, dx_g, false);
      cpu.backward_input(dy.cpu, dx_c, false);
      const std::vector<float> g = dx_g.to_float_vector(), c = dx_c.to_float_vector();
      for (size_t i = 0; i < g.size(); ++i)
        ASSERT_EQ(quant::float_bits(g[i]), quant::float_bits(bf16_to_f32(f32_to_bf16(c[i]))))
            << "element " << i << " at step " << step;
    }
  }
}

}  // namespace
}  // namespace loft::test
