// HALO's frozen products (FP8/INT8, Hadamard levels 0/1/2, dense or NF4 backbone) against the
// exact ones, level 2 against explicit matrices, the rotation's point (outlier channels), and the
// dX of projections that read one input summed before one inverse rotation. Training quality
// against LoRA: tests/common/method_quality.
#include "engine/ops/ops.h"
#include "engine/optim/adamw.h"
#include "engine/peft/halo_weight.h"
#include "engine/peft/lora_linear.h"
#include "engine/peft/method.h"
#include "engine/peft/shared_backward.h"
#include "engine/peft/shared_input.h"
#include "engine/quant/hadamard.h"
#include "models/llama/loading.h"
#include "tests/common/test_util.h"
#include "tests/common/every_method.h"

namespace loft {
namespace {

struct Products {
  double fwd, bwd;  // relative errors of y = x·Wᵀ and dx = dy·W
};

Products halo_errors(const Tensor& x, const Tensor& w, const Tensor& dy, const HaloOptions& opt) {
  const auto hw = halo_weight(w.clone(), opt);
  Tensor y = Tensor::empty({x.size(0), w.size(0)}, DType::F32), y_ref = y.clone();
  hw->forward(x, y);
  ops::gemm(x, w, y_ref, {.trans_b = true});
  Tensor dx = Tensor::empty(x.shape(), DType::F32), dx_ref = dx.clone();
  hw->backward_input(dy, dx, false);
  ops::gemm(dy, w, dx_ref);
  // Accumulation adds onto what is there.
  Tensor acc = dx_ref.clone();
  hw->backward_input(dy, acc, true);
  Tensor twice = dx_ref.clone();
  ops::axpy(1.0f, dx, twice);
  EXPECT_LT(test::rel_error(acc, twice), 1e-6);
  return {test::rel_error(y, y_ref), test::rel_error(dx, dx_ref)};
}

TEST(Halo, ProductsAreCloseToExact) {
  std::mt19937 rng(11);
  for (auto [in, out] : {std::pair{64, 172}, {172, 64}, {96, 40}}) {
    const Tensor x = test::random_tensor({33, in}, rng), w = test::random_tensor({out, in}, rng, -0.1f, 0.1f);
    const Tensor dy = test::random_tensor({33, out}, rng);
    for (int level : {0, 1, 2}) {
      const Products fp8 = halo_errors(x, w, dy, {level, quant::LowpFormat::E4M3});
      const Products i8 = halo_errors(x, w, dy, {level, quant::LowpFormat::INT8});
      EXPECT_LT(fp8.fwd, 0.05) << in << "x" << out << " level " << level;
      EXPECT_LT(fp8.bwd, 0.05) << in << "x" << out << " level " << level;
      EXPECT_LT(i8.fwd, 0.02) << in << "x" << out << " level " << level;
      EXPECT_LT(i8.bwd, 0.02) << in << "x" << out << " level " << level;
    }
  }
}

TEST(Halo, RotationTamesOutlierChannels) {
  // Activations with a few huge channels (as LLMs have): per-tensor INT8 loses the small ones
  // without rotation; the Hadamard spreads the outliers over all channels first.
  std::mt19937 rng(12);
  Tensor x = test::random_tensor({64, 128}, rng);
  for (int64_t r = 0; r < 64; ++r) {
    x.ptr<float>()[r * 128 + 5] *= 200.0f;
    x.ptr<float>()[r * 128 + 77] *= 150.0f;
  }
  const Tensor w = test::random_tensor({96, 128}, rng, -0.1f, 0.1f), dy = test::random_tensor({64, 96}, rng);
  const Products l0 = halo_errors(x, w, dy, {0, quant::LowpFormat::INT8});
  const Products l1 = halo_errors(x, w, dy, {1, quant::LowpFormat::INT8});
  RecordProperty("int8_fwd_error_level0", std::to_string(l0.fwd));
  RecordProperty("int8_fwd_error_level1", std::to_string(l1.fwd));
  EXPECT_LT(l1.fwd, 0.5 * l0.fwd) << "level 0 " << l0.fwd << ", level 1 " << l1.fwd;
}

// dx of level 2 from explicit matrices: Ht = token Hadamard (padded), Hin = input Hadamard,
//   dX = first T rows of Ht·deq(Q(Htᵀ·[dY; 0]))·deq(Q(W·Hin))·Hinᵀ, and y = deq(Q(X·Hin))·deq(Q(W·Hin))ᵀ.
Tensor mm(const Tensor& a, const Tensor& b, bool ta = false, bool tb = false) {
  Tensor c = Tensor::empty({ta ? a.size(1) : a.size(0), tb ? b.size(0) : b.size(1)}, DType::F32);
  ops::gemm(a, b, c, {.trans_a = ta, .trans_b = tb});
  return c;
}
Tensor qdq(const Tensor& x, quant::LowpFormat f) { return quant::dequantize(quant::quantize(x, f)); }

TEST(Halo, LevelTwoMatchesExplicitMatrices) {
  std::mt19937 rng(13);
  for (auto [t, in, out] : {std::tuple{7, 172, 64}, {33, 64, 40}, {130, 172, 96}, {64, 48, 172}})
    for (quant::LowpFormat f : {quant::LowpFormat::E4M3, quant::LowpFormat::INT8}) {
      const Tensor x = test::random_tensor({t, in}, rng), dy = test::random_tensor({t, out}, rng);
      const Tensor w = test::random_tensor({out, in}, rng, -0.1f, 0.1f);
      const Tensor hin = quant::hadamard_dense(quant::plan_for(in));
      const quant::HadamardPlan tp = quant::token_plan(t);
      const Tensor ht = quant::hadamard_dense(tp);
      Tensor dyp = Tensor::zeros({tp.n, out}, DType::F32);
      dyp.slice(0, t).copy_from(dy);
      const Tensor wq = qdq(mm(w, hin), f);
      const Tensor z = mm(qdq(mm(ht, dyp, /*ta=*/true), f), wq);
      const Tensor dx_ref = mm(mm(ht, z).slice(0, t).clone(), hin, false, /*tb=*/true);
      const Tensor y_ref = mm(qdq(mm(x, hin), f), wq, false, /*tb=*/true);

      const auto hw = halo_weight(w.clone(), {2, f});
      Tensor y = Tensor::empty({t, out}, DType::F32), dx = Tensor::empty({t, in}, DType::F32);
      hw->forward(x, y);
      hw->backward_input(dy, dx, false);
      const std::string what = cat("T=", t, " in=", in, " out=", out, " ", quant::format_name(f));
      // The fast transforms and the matrix products round differently in the last bit, which
      // can flip a code at a rounding boundary (one step of one element: ~4e-4 here); a wrong
      // rotation, orientation or padding is off by O(1).
      EXPECT_LT(test::rel_error(y, y_ref), 2e-3) << what;
      EXPECT_LT(test::rel_error(dx, dx_ref), 2e-3) << what;
    }
}

TEST(Halo, Nf4BackboneProductsAreCloseToExactAndSmall) {
  std::mt19937 rng(14);
  for (auto [in, out] : {std::pair{64, 172}, {172, 64}}) {
    const Tensor x = test::random_tensor({33, in}, rng), dy = test::random_tensor({33, out}, rng);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    std::vector<float> wv(size_t(in * out));
    for (float& v : wv) v = normal(rng);
    const Tensor w = Tensor::from_vector(wv, {out, in});
    for (int level : {0, 2})
      for (quant::LowpFormat f : {quant::LowpFormat::E4M3, quant::LowpFormat::INT8}) {
        const HaloOptions opt{level, f, HaloBackbone::Nf4};
        const Products p = halo_errors(x, w, dy, opt);
        EXPECT_LT(p.fwd, 0.15) << in << "x" << out << " level " << level;
        EXPECT_LT(p.bwd, 0.15) << in << "x" << out << " level " << level;
        // NF4 keeps ~4.1 bits a weight resident; the dense store 1 byte (the codes and their
        // scale: the transposed codes dX needs are made in a shared scratch per backward).
        const auto nf4 = halo_weight(w.clone(), opt);
        const auto dense = halo_weight(w.clone(), {level, f});
        EXPECT_LT(nf4->stored_bytes(), size_t(0.6 * double(in * out))) << nf4->stored_bytes();
        EXPECT_EQ(dense->stored_bytes(), size_t(in * out) + sizeof(float));
      }
  }
}

// Three projections of one input (q, k, v widths), as the model calls their backwards: the first
// writes dx unless `accumulate_first`, the others add.
constexpr int64_t kGroupIn = 64, kGroupT = 13;
const int64_t kGroupOut[3] = {40, 16, 16};

TEST(Halo, GroupedDxIsTheSumOfEachProjectionsRotatedBackOnce) {
  std::mt19937 rng(15);
  std::vector<Tensor> ws, dys;
  for (int64_t out : kGroupOut) {
    ws.push_back(test::random_tensor({out, kGroupIn}, rng, -0.1f, 0.1f));
    dys.push_back(test::random_tensor({kGroupT, out}, rng));
  }
  const Tensor before = test::random_tensor({kGroupT, kGroupIn}, rng);
  for (int level : {0, 1, 2})
    for (quant::LowpFormat f : {quant::LowpFormat::E4M3, quant::LowpFormat::INT8})
      for (HaloBackbone backbone : {HaloBackbone::Dense, HaloBackbone::Nf4})
        for (bool accumulate_first : {false, true}) {
          const std::string what = cat("level ", level, " ", quant::format_name(f),
                                       backbone == HaloBackbone::Nf4 ? " nf4" : " dense",
                                       accumulate_first ? " onto dx" : "");
          std::vector<std::unique_ptr<FrozenWeight>> hw;
          for (const Tensor& w : ws) hw.push_back(halo_weight(w.clone(), {level, f, backbone}));
          Tensor want = before.clone(), got = before.clone();
          for (size_t i = 0; i < hw.size(); ++i) hw[i]->backward_input(dys[i], want, i > 0 || accumulate_first);
          SharedBackward group;
          for (size_t i = 0; i < hw.size(); ++i) {
            const bool acc = i > 0 || accumulate_first;
            const bool deferred = hw[i]->backward_input_grouped(dys[i], got, acc, group);
            EXPECT_EQ(deferred, level >= 1) << what << ": only the rotated levels have a step to share";
            if (!deferred) hw[i]->backward_input(dys[i], got, acc);
          }
          hw.clear();  // the finish holds what it needs, not the weights
          group.finish(got);
          // Summing before the rotations rounds differently in the last fp32 bits only.
          EXPECT_LT(test::rel_error(got, want), 1e-6) << what;
        }
}

TEST(Halo, GroupedLoraOnHaloGivesTheUngroupedGradients) {
  // LoRA's terms join dx at the group's finish too: the one rotation must write dx before them.
  for (int level : {1, 2}) {
    std::vector<Tensor> dx, grads;
    for (bool grouped : {false, true}) {
      std::mt19937 r(7);
      std::mt19937_64 rng(1);
      std::vector<std::unique_ptr<LoraLinear>> ls;
      for (int64_t out : kGroupOut) {
        const Tensor w = test::random_tensor({out, kGroupIn}, r, -0.1f, 0.1f);
        ls.push_back(std::make_unique<LoraLinear>("p" + std::to_string(ls.size()),
                                                  halo_weight(w, {level, quant::LowpFormat::E4M3}),
                                                  LoraOptions{4, 8.0f}, rng));
        ls.back()->set_adapter(test::random_tensor({4, kGroupIn}, r), test::random_tensor({out, 4}, r));
      }
      std::vector<AdaptedLinear*> all;
      for (auto& l : ls) all.push_back(l.get());
      if (grouped)
        for (AdaptedLinear* l : all) l->group_with(all);
      std::mt19937 d(9);
      const Tensor x = test::random_tensor({kGroupT, kGroupIn}, d);
      SharedInput in(x);
      SharedBackward group;
      std::vector<LinearSaved> saved(ls.size());
      for (size_t i = 0; i < ls.size(); ++i) {
        Tensor y = Tensor::empty({kGroupT, kGroupOut[i]}, DType::F32);
        ls[i]->forward(x, y, &saved[i], &in);
      }
      dx.push_back(Tensor::empty({kGroupT, kGroupIn}, DType::F32));
      for (size_t i = 0; i < ls.size(); ++i)
        ls[i]->backward(test::random_tensor({kGroupT, kGroupOut[i]}, d), saved[i], dx.back(), i > 0, nullptr, &group);
      group.finish(dx.back());
      for (auto& l : ls)
        for (Param* p : l->params()) grads.push_back(p->grad.clone());
    }
    EXPECT_LT(test::rel_error(dx[1], dx[0]), 1e-6) << "level " << level;
    const size_t n = grads.size() / 2;
    for (size_t i = 0; i < n; ++i) EXPECT_LT(test::rel_error(grads[n + i], grads[i]), 1e-6) << "level " << level;
  }
}

TEST(Halo, BadLevelAndBackboneAreRefused) {
  MethodOptions m{"halo", {8, 16.0f}, parse_lora_targets("all")};
  m.get<HaloOptions>() = {3, quant::LowpFormat::E4M3};
  std::mt19937_64 rng(0);
  EXPECT_THROW(make_linear_factory(m, rng), UsageError);
  EXPECT_THROW(parse_halo_format("fp4"), UsageError);
  EXPECT_THROW(parse_halo_backbone("nf8"), UsageError);
  for (const std::string& method : test::methods_without_flag("--backbone")) {
    MethodOptions b{method, {8, 16.0f}, parse_lora_targets("all"), {}};
    b.get<HaloOptions>().backbone = HaloBackbone::Nf4;
    try {
      make_linear_factory(b, rng);
      ADD_FAILURE() << method << " took --backbone nf4";
    } catch (const UsageError& e) {
      EXPECT_TRUE(test::contains(e.what(), "--backbone"));
    }
  }
}

}  // namespace
}  // namespace loft
