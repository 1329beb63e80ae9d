// Shared by the CPU and GPU tests of issue 15 (no resident transposed weight codes): FALQON's and
// HALO's dX against the GEMM on the transposed codes the layers used to keep resident
// (quantize(W, ..., also_transposed).codes_t), which must agree bit for bit, with every layer's
// backward sharing the device's one transpose scratch, interleaved across shapes.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "engine/methods/falqon/falqon_linear.h"
#include "engine/ops/ops.h"
#include "engine/peft/halo_weight.h"
#include "engine/quant/lowp_gemm.h"
#include "engine/quant/quantize.h"
#include "engine/quant/transpose_scratch.h"
#include "tests/common/test_util.h"
#include "tests/engine/test_quant_fp8_reference.h"

namespace loft::test {

struct DxCase {
  int64_t out, in, t;
};

// x in the layers' compute dtype on `device` (F32 on the CPU, BF16 on CUDA).
inline Tensor compute_tensor(const Tensor& x32, Device device) {
  const DType dt = device.is_cpu() ? DType::F32 : DType::BF16;
  Tensor x = Tensor::empty(x32.shape(), dt, device);
  ops::convert(x32.to(device), x);
  return x;
}

// dX = Q(dY)·Q(W) from the codes and transpose quantize() makes in one pass (the old resident copy).
inline Tensor dx_from_resident_transpose(const Tensor& w, const Tensor& dy, quant::LowpFormat wf,
                                         quant::LowpFormat df) {
  const quant::QuantizedTensor qw = quant::quantize(w, wf, /*also_transposed=*/true);
  const quant::QuantizedTensor qd = quant::quantize(dy, df);
  Tensor dx = Tensor::empty({dy.size(0), w.size(1)}, dy.dtype(), dy.device());
  quant::gemm_lowp(qd.codes, qd.scale, qw.codes_t, qw.scale, dx);
  return dx;
}

inline void expect_dx_as_with_a_resident_transpose(Device device, const std::vector<DxCase>& cases) {
  std::mt19937 rng(15);
  struct Layer {
    DxCase c;
    Tensor w, x, dy;
    std::unique_ptr<FalqonLinear> falqon;
    std::unique_ptr<FrozenWeight> halo_fp8, halo_int8;
  };
  std::vector<Layer> layers;
  int64_t largest = 0;
  for (const DxCase& c : cases) {  // all built first: the backwards below share one scratch
    Layer l;
    l.c = c;
    l.w = compute_tensor(random_tensor({c.out, c.in}, rng, -0.1f, 0.1f), device);
    l.x = compute_tensor(random_tensor({c.t, c.in}, rng), device);
    l.dy = compute_tensor(random_tensor({c.t, c.out}, rng), device);
    l.falqon = std::make_unique<FalqonLinear>("m", l.w, 8, FalqonOptions{});
    l.halo_fp8 = halo_weight(l.w, {0, quant::LowpFormat::E4M3});
    l.halo_int8 = halo_weight(l.w, {0, quant::LowpFormat::INT8});
    largest = std::max(largest, c.out * c.in);
    layers.push_back(std::move(l));
  }
  for (int pass = 0; pass < 2; ++pass)  // the second pass reuses a scratch grown by the first
    for (Layer& l : layers) {
      const std::string what = cat(device.str(), " ", l.c.out, "x", l.c.in, " T", l.c.t, " pass ", pass);
      Tensor y = Tensor::empty({l.c.t, l.c.out}, l.x.dtype(), device);
      Tensor dx = Tensor::empty({l.c.t, l.c.in}, l.x.dtype(), device);
      LinearSaved saved;
      l.falqon->forward(l.x, y, &saved);
      l.falqon->backward(l.dy, saved, dx, false);
      EXPECT_EQ(code_bytes(dx), code_bytes(dx_from_resident_transpose(l.w, l.dy, quant::LowpFormat::E4M3,
                                                                        quant::LowpFormat::E5M2)))
          << "falqon " << what;
      for (auto f : {quant::LowpFormat::E4M3, quant::LowpFormat::INT8}) {
        const FrozenWeight& h = f == quant::LowpFormat::INT8 ? *l.halo_int8 : *l.halo_fp8;
        h.backward_input(l.dy, dx, false);
        EXPECT_EQ(code_bytes(dx), code_bytes(dx_from_resident_transpose(l.w, l.dy, f, f)))
            << "halo " << quant::format_name(f) << " " << what;
        EXPECT_EQ(h.stored_bytes(), size_t(l.c.out * l.c.in) + sizeof(float)) << "no transposed copy";
      }
      EXPECT_EQ(code_bytes(l.falqon->transposed_codes()),
                code_bytes(quant::quantize(l.w, quant::LowpFormat::E4M3, true).codes_t))
          << "made on demand " << what;
    }
  EXPECT_EQ(quant::TransposeScratch::of(device)->capacity(), size_t(largest))
      << "one scratch, as large as the largest projection";
}

}  // namespace loft::test
