// FALQON's CUDA kernels against the CPU references (engine/methods/falqon/falqon_ops.h), bit for
// bit: the scaled encode, row scores, the top-k select (ties, NaN, odd and large sizes),
// and the row update in both buffer modes; then the whole FalqonLinear on the GPU against
// products computed from its own codes, and its after-step update against the CPU's.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "engine/methods/falqon/falqon_linear.h"
#include "engine/methods/falqon/falqon_ops.h"
#include "engine/ops/ops.h"
#include "engine/quant/quantize.h"
#include "tests/common/test_util.h"
#include "tests/engine/test_quant_fp8_reference.h"

namespace loft {
namespace {

const Device kGpu = Device::cuda(0);

Tensor random_codes(const Shape& shape, std::mt19937& rng) {
  std::vector<uint8_t> c(size_t(shape_numel(shape)));
  for (auto& v : c) {
    v = uint8_t(rng());
    if ((v & 0x7f) == 0x7f) v = 0x7e;  // no NaN codes
  }
  return Tensor::from_host(c.data(), shape, DType::F8_E4M3);
}

Tensor scalar(float v) { return Tensor::from_vector(std::vector<float>{v}, {1}); }

TEST(FalqonCuda, EncodeMatchesTheCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(1);
  for (const Shape& s : {Shape{7, 33}, Shape{64, 4096}, Shape{1, 1}}) {
    const Tensor x = test::random_tensor(s, rng, -3.0f, 3.0f);
    Tensor c_cpu = Tensor::empty(s, DType::F8_E4M3), c_gpu = Tensor::empty(s, DType::F8_E4M3, kGpu);
    falqon::encode_e4m3(x, scalar(0.004f), c_cpu);
    falqon::encode_e4m3(x.to(kGpu), scalar(0.004f).to(kGpu), c_gpu);
    EXPECT_EQ(test::code_bytes(c_gpu), test::code_bytes(c_cpu)) << shape_str(s);
  }
}

TEST(FalqonCuda, ScoresAndTopkMatchTheCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(2);
  for (auto [out, r] : {std::pair{7, 3}, std::pair{172, 8}, std::pair{11008, 64}, std::pair{32000, 64}}) {
    Tensor b = test::random_tensor({out, r}, rng, -1e-2f, 1e-2f);
    for (int64_t i = 0; i < out; i += 5) b.ptr<float>()[i * r] = 0.5f;  // many ties among the top
    Tensor s_cpu = Tensor::empty({out}, DType::F32), s_gpu = Tensor::empty({out}, DType::F32, kGpu);
    falqon::row_scores(b, s_cpu);
    falqon::row_scores(b.to(kGpu), s_gpu);
    ASSERT_EQ(s_gpu.to_float_vector(), s_cpu.to_float_vector()) << out;
    for (int64_t k : {int64_t(1), int64_t(3), std::min<int64_t>(out, 64), std::min<int64_t>(out, 300), int64_t(out)}) {
      Tensor i_cpu = Tensor::empty({k}, DType::I32), i_gpu = Tensor::empty({k}, DType::I32, kGpu);
      falqon::select_topk(s_cpu, i_cpu);
      falqon::select_topk(s_gpu, i_gpu);
      EXPECT_EQ(i_gpu.to_int_vector(), i_cpu.to_int_vector()) << out << " k " << k;
    }
  }
  // All equal, NaN and inf.
  const Tensor flat = Tensor::from_vector(std::vector<float>(1000, 0.0f), {1000});
  const Tensor odd = Tensor::from_vector(std::vector<float>{1, INFINITY, NAN, 2, 2, 0}, {6});
  for (const auto& [s, k] : {std::pair{flat, int64_t(10)}, std::pair{flat, int64_t(1000)},
                             std::pair{odd, int64_t(4)}, std::pair{odd, int64_t(6)}}) {
    Tensor i_cpu = Tensor::empty({k}, DType::I32), i_gpu = Tensor::empty({k}, DType::I32, kGpu);
    falqon::select_topk(s, i_cpu);
    falqon::select_topk(s.to(kGpu), i_gpu);
    EXPECT_EQ(i_gpu.to_int_vector(), i_cpu.to_int_vector());
  }
}

// The select's awkward cases: fewer distinct scores than k (the k-th key's bin is taken in part),
// scores that differ only in their lowest byte (all four radix passes), negative scores and -0
// (the bit-pattern order ranks them first), and more scores than shared memory holds (the kernel
// reads them from global memory: 70000 floats exceed every GPU's 48-227 KB per block).
TEST(FalqonCuda, TopkAwkwardScoresMatchTheCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(5);
  auto check = [](const std::vector<float>& v, int64_t k, const std::string& what) {
    const Tensor s = Tensor::from_vector(v, {int64_t(v.size())});
    Tensor i_cpu = Tensor::empty({k}, DType::I32), i_gpu = Tensor::empty({k}, DType::I32, kGpu);
    falqon::select_topk(s, i_cpu);
    falqon::select_topk(s.to(kGpu), i_gpu);
    EXPECT_EQ(i_gpu.to_int_vector(), i_cpu.to_int_vector()) << what << " k " << k;
  };
  for (int64_t n : {int64_t(5), int64_t(1023), int64_t(1025), int64_t(4097), int64_t(11008), int64_t(70000)}) {
    std::vector<float> few(static_cast<size_t>(n)), low(few), mixed(few);
    for (int64_t i = 0; i < n; ++i) {
      few[size_t(i)] = float(rng() % 3);                                       // 3 distinct values
      low[size_t(i)] = std::bit_cast<float>(0x3f800000u + uint32_t(rng() % 7));  // 1.0 + a few ulps
      const uint32_t pick = rng() % 4;
      mixed[size_t(i)] = pick == 0 ? -0.0f : pick == 1 ? -float(rng() % 5) : float(rng() % 5);
    }
    for (int64_t k : {int64_t(1), int64_t(4), std::min<int64_t>(n, 64), n / 2 + 1, n - 1, n}) {
      if (k < 1) continue;
      check(few, k, cat("few n", n));
      check(low, k, cat("low bits n", n));
      check(mixed, k, cat("signed n", n));
    }
  }
}

TEST(FalqonCuda, RowUpdateMatchesTheCpuBitForBit) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(3);
  struct Case {
    int64_t out, in, r, k;
  };
  // Odd `in` takes the byte-wise path; k not a multiple of the kernel's 4 rows; r not a multiple of
  // its 16-code batches; in = 1.
  for (const Case c : {Case{172, 64, 8, 8}, Case{7, 33, 8, 3}, Case{1000, 520, 16, 16}, Case{4096, 1024, 64, 64},
                       Case{173, 1, 5, 7}, Case{301, 258, 20, 13}, Case{64, 127, 33, 64}, Case{11008, 130, 64, 64}})
    for (bool zero_all : {true, false}) {
      const Tensor wm = random_codes({c.out + c.r, c.in}, rng);
      Tensor wt = Tensor::empty({c.in, c.out}, DType::F8_E4M3);
      const auto* w = wm.ptr<uint8_t>();
      for (int64_t i = 0; i < c.out; ++i)
        for (int64_t j = 0; j < c.in; ++j) wt.ptr<uint8_t>()[j * c.out + i] = w[i * c.in + j];
      // Large B entries drive some values past ±448·s (saturation).
      const Tensor b = test::random_tensor({c.out, c.r}, rng, -40.0f, 40.0f);
      std::vector<int32_t> idx;
      for (int64_t t = 0; t < c.k; ++t) idx.push_back(int32_t((t * 7919) % c.out));
      std::sort(idx.begin(), idx.end());
      idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
      const Tensor applied = test::random_tensor({c.out, c.r}, rng);
      auto make = [&](Device d) {
        return falqon::RowUpdate{Tensor::from_vector(idx, {int64_t(idx.size())}).to(d), b.to(d), wm.to(d), wt.to(d),
                                 scalar(0.00317f).to(d), Tensor::zeros({c.out}, DType::U8, d), applied.to(d)};
      };
      falqon::RowUpdate cpu = make(Device::cpu()), gpu = make(kGpu);
      falqon::apply_rows(cpu, zero_all);
      falqon::apply_rows(gpu, zero_all);
      const std::string what = cat(c.out, "x", c.in, " r", c.r, zero_all ? " reset" : " accumulate");
      EXPECT_EQ(test::code_bytes(gpu.wm), test::code_bytes(cpu.wm)) << what;
      EXPECT_EQ(test::code_bytes(gpu.wt), test::code_bytes(cpu.wt)) << what;
      EXPECT_EQ(gpu.changed.to_int_vector(), cpu.changed.to_int_vector()) << what;
      EXPECT_EQ(gpu.applied.to_float_vector(), cpu.applied.to_float_vector()) << what;
      EXPECT_EQ(gpu.b.to_float_vector(), cpu.b.to_float_vector()) << what;
    }
}

// Three after-steps in a row (scores, top-k, update) on both devices from the same state, with
// k above the number of distinct scores (B with many equal rows) and k = out: every step's codes,
// transposed codes, flags, sums and B stay bit-identical.
TEST(FalqonCuda, RepeatedAfterStepsMatchTheCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(6);
  struct Case {
    int64_t out, in, r, k;
  };
  for (const Case c : {Case{173, 95, 8, 40}, Case{301, 256, 16, 301}, Case{1031, 64, 64, 64}})
    for (bool zero_all : {true, false}) {
      const Tensor wm = random_codes({c.out + c.r, c.in}, rng);
      Tensor wt = Tensor::empty({c.in, c.out}, DType::F8_E4M3);
      for (int64_t i = 0; i < c.out; ++i)
        for (int64_t j = 0; j < c.in; ++j) wt.ptr<uint8_t>()[j * c.out + i] = wm.ptr<uint8_t>()[i * c.in + j];
      auto make = [&](Device d) {
        return falqon::RowUpdate{Tensor::empty({c.k}, DType::I32, d), Tensor::zeros({c.out, c.r}, DType::F32, d),
                                 wm.to(d), wt.to(d), scalar(0.0021f).to(d), Tensor::zeros({c.out}, DType::U8, d),
                                 Tensor::zeros({c.out, c.r}, DType::F32, d)};
      };
      falqon::RowUpdate cpu = make(Device::cpu()), gpu = make(kGpu);
      Tensor s_cpu = Tensor::empty({c.out}, DType::F32), s_gpu = Tensor::empty({c.out}, DType::F32, kGpu);
      for (int step = 0; step < 3; ++step) {
        // A new step's gradient lands on B; a third of the rows are copies of row 0 (ties).
        Tensor g = test::random_tensor({c.out, c.r}, rng, -0.5f, 0.5f);
        for (int64_t i = 3; i < c.out; i += 3) std::copy_n(g.ptr<float>(), c.r, g.ptr<float>() + i * c.r);
        ops::axpy(1.0f, g, cpu.b);
        ops::axpy(1.0f, g.to(kGpu), gpu.b);
        for (falqon::RowUpdate* u : {&cpu, &gpu}) {
          Tensor& sc = u == &cpu ? s_cpu : s_gpu;
          falqon::row_scores(u->b, sc);
          falqon::select_topk(sc, u->idx);
          falqon::apply_rows(*u, zero_all);
        }
        const std::string what = cat(c.out, "x", c.in, " r", c.r, " k", c.k, zero_all ? " reset" : " accumulate",
                                     " step ", step);
        ASSERT_EQ(s_gpu.to_float_vector(), s_cpu.to_float_vector()) << what;
        ASSERT_EQ(gpu.idx.to_int_vector(), cpu.idx.to_int_vector()) << what;
        ASSERT_EQ(test::code_bytes(gpu.wm), test::code_bytes(cpu.wm)) << what;
        ASSERT_EQ(test::code_bytes(gpu.wt), test::code_bytes(cpu.wt)) << what;
        ASSERT_EQ(gpu.changed.to_int_vector(), cpu.changed.to_int_vector()) << what;
        ASSERT_EQ(gpu.applied.to_float_vector(), cpu.applied.to_float_vector()) << what;
        ASSERT_EQ(gpu.b.to_float_vector(), cpu.b.to_float_vector()) << what;
      }
    }
}

// after_steps over many projections at once (one launch a phase on the GPU) against the CPU's
// calls in turn: 300 projections of mixed shapes (past the 256 a launch carries), both buffer
// modes, with and without a transposed copy, two steps in a row; then a group where one
// projection's 70,000 scores exceed shared memory, so every select in the launch reads global;
// and one whose 12,288 scores fill the 48 KiB a block gets without opting in.
TEST(FalqonCuda, AfterStepsOfManyProjectionsMatchTheCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(8);
  struct Case {
    int64_t out, in, r, k;
  };
  const Case shapes[] = {{172, 64, 8, 8}, {7, 33, 8, 3}, {301, 258, 20, 13}, {64, 127, 33, 64},
                         {1031, 64, 64, 64}, {173, 1, 5, 7}, {520, 96, 16, 16}};
  auto run = [&](const std::vector<Case>& cases, const std::string& what) {
    std::vector<falqon::AfterStep> cpu, gpu;
    for (size_t n = 0; n < cases.size(); ++n) {
      const Case c = cases[n];
      const Tensor wm = random_codes({c.out + c.r, c.in}, rng);
      Tensor wt;
      if (n % 3 == 0) {
        wt = Tensor::empty({c.in, c.out}, DType::F8_E4M3);
        for (int64_t i = 0; i < c.out; ++i)
          for (int64_t j = 0; j < c.in; ++j) wt.ptr<uint8_t>()[j * c.out + i] = wm.ptr<uint8_t>()[i * c.in + j];
      }
      const Tensor applied = test::random_tensor({c.out, c.r}, rng);
      const float s = 0.001f + 0.0001f * float(n % 7);
      for (auto* side : {&cpu, &gpu}) {
        const Device d = side == &cpu ? Device::cpu() : kGpu;
        side->push_back({{Tensor::empty({c.k}, DType::I32, d), Tensor::zeros({c.out, c.r}, DType::F32, d),
                          wm.to(d), wt.defined() ? wt.to(d) : Tensor(), scalar(s).to(d),
                          Tensor::zeros({c.out}, DType::U8, d), applied.to(d)},
                         Tensor::empty({c.out}, DType::F32, d), n % 2 == 0});
      }
    }
    for (int step = 0; step < 2; ++step) {
      for (size_t n = 0; n < cases.size(); ++n) {  // a step's gradient on every B, with ties
        const Case c = cases[n];
        Tensor g = test::random_tensor({c.out, c.r}, rng, -20.0f, 20.0f);
        for (int64_t i = 3; i < c.out; i += 3) std::copy_n(g.ptr<float>(), c.r, g.ptr<float>() + i * c.r);
        ops::axpy(1.0f, g, cpu[n].update.b);
        ops::axpy(1.0f, g.to(kGpu), gpu[n].update.b);
      }
      falqon::after_steps(cpu);
      falqon::after_steps(gpu);
      for (size_t n = 0; n < cases.size(); ++n) {
        const falqon::RowUpdate &a = cpu[n].update, &b = gpu[n].update;
        const std::string at = cat(what, " projection ", n, " step ", step);
        ASSERT_EQ(gpu[n].scores.to_float_vector(), cpu[n].scores.to_float_vector()) << at;
        ASSERT_EQ(b.idx.to_int_vector(), a.idx.to_int_vector()) << at;
        ASSERT_EQ(test::code_bytes(b.wm), test::code_bytes(a.wm)) << at;
        if (a.wt.defined()) {
          ASSERT_EQ(test::code_bytes(b.wt), test::code_bytes(a.wt)) << at;
        }
        ASSERT_EQ(b.changed.to_int_vector(), a.changed.to_int_vector()) << at;
        ASSERT_EQ(b.applied.to_float_vector(), a.applied.to_float_vector()) << at;
        ASSERT_EQ(b.b.to_float_vector(), a.b.to_float_vector()) << at;
      }
    }
  };
  std::vector<Case> many;
  for (int n = 0; n < 300; ++n) many.push_back(shapes[size_t(n) % std::size(shapes)]);
  run(many, "300 projections");
  run({{70000, 4, 2, 64}, {172, 64, 8, 8}, {301, 258, 20, 13}}, "scores past shared memory");
  // 12,288 scores are exactly 48 KiB: with the select's own arrays past the default limit
  // (qwen3-8b's gate/up).
  run({{12288, 8, 4, 64}, {172, 64, 8, 8}}, "48 KiB of scores");
}

Tensor deq_host(const Tensor& u8_codes, float s) {
  Tensor c = Tensor::from_host(u8_codes.data(), u8_codes.shape(), DType::F8_E4M3);
  Tensor out = Tensor::empty(c.shape(), DType::F32);
  const Tensor sc = scalar(s);
  quant::dequantize(c, &sc, out);
  return out;
}

Tensor deq_q(const quant::QuantizedTensor& q) { return quant::dequantize(q).to(Device::cpu()); }

TEST(FalqonCuda, LayerOnTheGpuMatchesItsCodesAndTheCpuUpdate) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(4);
  struct Case {
    int64_t out, in, t;
    int r;
  };
  // 256×128 / T 64 / r 16 takes cuBLASLt's FP8 path (sm_89+); the odd shapes the fallback.
  for (const Case c : {Case{256, 128, 64, 16}, Case{172, 64, 33, 8}, Case{7, 33, 5, 8}}) {
    const Tensor w32 = test::random_tensor({c.out, c.in}, rng, -0.1f, 0.1f);
    Tensor w = Tensor::empty(w32.shape(), DType::BF16, kGpu);
    ops::convert(w32.to(kGpu), w);
    // Reset mode: the after-step check below compares with apply_rows(zero_all) and a zero B.
    FalqonLinear l("m", w, c.r, {.buffer = FalqonOptions::Buffer::reset});
    // Same scale and backbone codes as quantizing W on the CPU.
    Tensor wb = Tensor::empty(w32.shape(), DType::BF16);
    ops::convert(w32, wb);
    const quant::QuantizedTensor qw = quant::quantize(wb, quant::LowpFormat::E4M3);
    EXPECT_EQ(l.weight_scale(), qw.scale.ptr<float>()[0]);
    const Tensor codes = l.melded_codes();
    const std::vector<uint8_t> want = test::code_bytes(qw.codes);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), codes.ptr<uint8_t>()));

    Tensor x = Tensor::empty({c.t, c.in}, DType::BF16, kGpu), dy = Tensor::empty({c.t, c.out}, DType::BF16, kGpu);
    ops::convert(test::random_tensor({c.t, c.in}, rng).to(kGpu), x);
    ops::convert(test::random_tensor({c.t, c.out}, rng).to(kGpu), dy);
    Tensor y = Tensor::empty({c.t, c.out}, DType::BF16, kGpu), dx = Tensor::empty({c.t, c.in}, DType::BF16, kGpu);
    LinearSaved saved;
    l.forward(x, y, &saved);
    l.backward(dy, saved, dx, false);

    // The forward's two GEMMs over the melded codes' row slices: O = Xq·Wᵀ and O_A = Xq·Aᵀ.
    const Tensor wm = deq_host(codes, l.weight_scale()), xq = deq_q(quant::quantize(x, quant::LowpFormat::E4M3));
    Tensor o = Tensor::empty({c.t, c.out}, DType::F32), oa = Tensor::empty({c.t, c.r}, DType::F32);
    ops::gemm(xq, wm.slice(0, c.out), o, {.trans_b = true});
    ops::gemm(xq, wm.slice(c.out, c.r), oa, {.trans_b = true});
    const std::string what = cat(c.out, "x", c.in, " T", c.t);
    EXPECT_LT(test::rel_error(y, o), 1e-2) << what;  // bf16 output rounding
    EXPECT_LT(test::rel_error(saved.tensors[0], oa), 1e-2) << what;
    const Tensor dyq = deq_q(quant::quantize(dy, quant::LowpFormat::E5M2));
    Tensor dx_ref = Tensor::empty({c.t, c.in}, DType::F32);
    ops::gemm(dyq, wm.slice(0, c.out), dx_ref);
    EXPECT_LT(test::rel_error(dx, dx_ref), 1e-2) << what;
    Tensor db_ref = Tensor::empty({c.out, c.r}, DType::F32);
    ops::gemm(dyq, deq_q(quant::quantize(saved.tensors[0], quant::LowpFormat::E4M3)), db_ref, {.trans_a = true});
    // FP8 tensor cores accumulate with fewer mantissa bits than fp32 (H200: 5.6e-5 measured).
    EXPECT_LT(test::rel_error(l.buffer().grad, db_ref), 2e-4) << what;

    // after_step on the GPU equals the CPU update of the same codes and B.
    const Tensor b = test::random_tensor({c.out, c.r}, rng, -0.05f, 0.05f);
    l.buffer().value.copy_from(b.to(kGpu));
    Tensor wt = Tensor::from_host(l.transposed_codes().data(), {c.in, c.out}, DType::F8_E4M3);
    Tensor scores = Tensor::empty({c.out}, DType::F32), idx = Tensor::empty({std::min<int64_t>(c.r, c.out)}, DType::I32);
    falqon::row_scores(b, scores);
    falqon::select_topk(scores, idx);
    falqon::RowUpdate cpu{idx, b.clone(), Tensor::from_host(codes.data(), codes.shape(), DType::F8_E4M3), wt,
                          scalar(l.weight_scale()), Tensor::zeros({c.out}, DType::U8),
                          Tensor::zeros({c.out, c.r}, DType::F32)};
    falqon::apply_rows(cpu, true);
    l.after_step();
    EXPECT_EQ(test::code_bytes(l.melded_codes()), test::code_bytes(cpu.wm)) << what;
    EXPECT_EQ(test::code_bytes(l.transposed_codes()), test::code_bytes(cpu.wt)) << what;
    EXPECT_EQ(l.buffer().value.to_float_vector(), std::vector<float>(size_t(c.out * c.r), 0.0f));
  }
}

// --falqon-transposed keep on the GPU: a model's worth of projections keeping their transposed
// codes train bit for bit as per-step ones through the batched after-step (which patches the
// copies), and each kept copy stays the transpose of its backbone (the shapes take cuBLASLt's FP8
// path and the fallback).
TEST(FalqonCuda, KeptTransposedCodesTrainAsPerStep) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(6);
  struct Case {
    int64_t out, in;
  };
  const std::vector<Case> cases = {{256, 128}, {512, 256}, {172, 64}, {7, 33}};
  std::vector<std::unique_ptr<FalqonLinear>> keep, per_step;
  for (const Case& c : cases) {
    Tensor w = Tensor::empty({c.out, c.in}, DType::BF16, kGpu);
    ops::convert(test::random_tensor({c.out, c.in}, rng, -0.1f, 0.1f).to(kGpu), w);
    keep.push_back(std::make_unique<FalqonLinear>("m", w, 8, FalqonOptions{.transposed = FalqonOptions::Transposed::keep}));
    per_step.push_back(std::make_unique<FalqonLinear>("m", w, 8, FalqonOptions{.transposed = FalqonOptions::Transposed::per_step}));
  }
  std::vector<std::vector<uint8_t>> initial;
  for (auto& l : keep) initial.push_back(test::code_bytes(l->melded_codes()));
  auto all = [](std::vector<std::unique_ptr<FalqonLinear>>& ls) {
    std::vector<AdaptedLinear*> v;
    for (auto& l : ls) v.push_back(l.get());
    return v;
  };
  for (int step = 0; step < 4; ++step) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      Tensor x = Tensor::empty({64, c.in}, DType::BF16, kGpu), dy = Tensor::empty({64, c.out}, DType::BF16, kGpu);
      ops::convert(test::random_tensor({64, c.in}, rng).to(kGpu), x);
      ops::convert(test::random_tensor({64, c.out}, rng, -30, 30).to(kGpu), dy);
      std::vector<std::vector<float>> dxs;
      for (FalqonLinear* l : {keep[i].get(), per_step[i].get()}) {
        Tensor y = Tensor::empty({64, c.out}, DType::BF16, kGpu), dx = Tensor::empty({64, c.in}, DType::BF16, kGpu);
        LinearSaved saved;
        l->forward(x, y, &saved);
        l->backward(dy, saved, dx, false);
        // B takes its own gradient as the step (what reaches the update is what matters here).
        ops::axpy(1.0f, l->buffer().grad, l->buffer().value);
        l->buffer().grad.zero_();
        dxs.push_back(dx.to_float_vector());
      }
      ASSERT_EQ(dxs[0], dxs[1]) << "dX, step " << step << " projection " << i;
    }
    keep.front()->after_step_all()(all(keep));
    per_step.front()->after_step_all()(all(per_step));
  }
  bool changed = false;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string what = cat("projection ", i);
    ASSERT_EQ(test::code_bytes(keep[i]->melded_codes()), test::code_bytes(per_step[i]->melded_codes())) << what;
    EXPECT_EQ(test::code_bytes(keep[i]->kept_transposed()), test::code_bytes(keep[i]->transposed_codes())) << what;
    EXPECT_EQ(keep[i]->buffer().value.to_float_vector(), per_step[i]->buffer().value.to_float_vector()) << what;
    changed = changed || test::code_bytes(keep[i]->melded_codes()) != initial[i];
  }
  EXPECT_TRUE(changed) << "the test means the row updates to change codes";
}

}  // namespace
}  // namespace loft
