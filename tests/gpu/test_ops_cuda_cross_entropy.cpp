// Cross-entropy losses and gradients against the CPU (V from 7 to 32000, ignored rows, gradient
// written over the logits), and the error an out-of-range target raises.
#include "tests/gpu/test_ops_cuda_util.h"

namespace loft::test {
namespace {

struct CeCase {
  int64_t rows, vocab;
};
const CeCase kCases[] = {{1, 7}, {7, 512}, {33, 1001}, {9, 32000}, {3, 32003}};

// Targets in [0, vocab), every 4th row ignored.
Tensor targets_for(int64_t rows, int64_t vocab, std::mt19937& rng) {
  std::vector<int32_t> t(static_cast<size_t>(rows));
  std::uniform_int_distribution<int32_t> dist(0, int32_t(vocab) - 1);
  for (size_t i = 0; i < t.size(); ++i) t[i] = i % 4 == 3 ? ops::kIgnoreIndex : dist(rng);
  return Tensor::from_vector(t, {rows});
}

TEST(CrossEntropyCuda, LossesAndGradientsMatchCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(71);
  for (DType dt : kActivationDtypes)
    for (const CeCase& c : kCases)
      for (bool in_place : {false, true}) {
        const Shape s{c.rows, c.vocab};
        const float grad_scale = 1.0f / float(c.rows);
        Tensor logits = to_gpu(random_tensor(s, rng, -8.0f, 8.0f), dt);
        Tensor targets = targets_for(c.rows, c.vocab, rng);
        Tensor clogits = cpu_f32(logits);
        Tensor closses = Tensor::empty({c.rows}, DType::F32), cdl = Tensor::empty(s, DType::F32);
        ops::cross_entropy(clogits, targets, closses, &cdl, grad_scale);

        Tensor losses = Tensor::empty({c.rows}, DType::F32, kGpu);
        Tensor dl = in_place ? logits : Tensor::empty(s, dt, kGpu);
        ops::cross_entropy(logits, targets.to(kGpu), losses, &dl, grad_scale);
        const std::string what =
            name(dt) + " " + shape_str(s) + (in_place ? " gradient over logits" : "");
        EXPECT_LT(rel_error(losses, closses), 1e-5) << what;  // fp32 on exact inputs
        EXPECT_LT(rel_error(dl, cdl), tol(dt)) << what;
        const std::vector<float> l = losses.to_float_vector(), g = dl.to_float_vector();
        for (int64_t r = 3; r < c.rows; r += 4) {
          EXPECT_EQ(l[size_t(r)], 0.0f) << what << " ignored row " << r;
          for (int64_t j = 0; j < c.vocab; ++j)
            if (g[size_t(r * c.vocab + j)] != 0.0f) {
              ADD_FAILURE() << what << " ignored row " << r << " has a gradient at " << j;
              break;
            }
        }
      }
}

// F32 logits with a BF16 gradient (the loss head's path): the CPU's fp32 gradient rounded once.
TEST(CrossEntropyCuda, Bf16GradientOfFp32LogitsMatchesCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(73);
  for (const CeCase& c : kCases) {
    const Shape s{c.rows, c.vocab};
    Tensor clogits = random_tensor(s, rng, -8.0f, 8.0f);
    Tensor targets = targets_for(c.rows, c.vocab, rng);
    Tensor closses = Tensor::empty({c.rows}, DType::F32), cdl = Tensor::empty(s, DType::BF16);
    ops::cross_entropy(clogits, targets, closses, &cdl, 0.25f);
    Tensor losses = Tensor::empty({c.rows}, DType::F32, kGpu), dl = Tensor::empty(s, DType::BF16, kGpu);
    ops::cross_entropy(clogits.to(kGpu), targets.to(kGpu), losses, &dl, 0.25f);
    EXPECT_LT(rel_error(losses, closses), 1e-5) << shape_str(s);
    EXPECT_LT(rel_error(dl, cdl), tol(DType::BF16)) << shape_str(s);
  }
}

TEST(CrossEntropyCuda, LossesOnlyMatchCpu) {
  LOFT_REQUIRE_GPU();
  std::mt19937 rng(72);
  for (DType dt : kActivationDtypes) {
    Tensor logits = to_gpu(random_tensor({17, 32000}, rng, -8.0f, 8.0f), dt);
    Tensor targets = targets_for(17, 32000, rng);
    Tensor closses = Tensor::empty({17}, DType::F32),
           losses = Tensor::empty({17}, DType::F32, kGpu);
    ops::cross_entropy(cpu_f32(logits), targets, closses);
    ops::cross_entropy(logits, targets.to(kGpu), losses);
    EXPECT_LT(rel_error(losses, closses), 1e-5) << name(dt);
  }
}

TEST(CrossEntropyCuda, OutOfRangeTargetThrowsNamingRow) {
  LOFT_REQUIRE_GPU();
  for (int32_t bad : {512, -5}) {
    std::vector<int32_t> t{1, 2, ops::kIgnoreIndex, bad, 4};
    Tensor logits = Tensor::zeros({5, 512}, DType::BF16, kGpu);
    Tensor losses = Tensor::empty({5}, DType::F32, kGpu);
    try {
      ops::cross_entropy(logits, Tensor::from_vector(t, {5}, kGpu), losses, &logits);
      ADD_FAILURE() << "target " << bad << " did not throw";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("row 3"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace loft::test
