// FALQON's element-level pieces on the CPU (engine/methods/falqon/falqon_ops.h) against
// hand-written references: the scaled E4M3 encode, row scores, the top-k select with ties,
// and the row update with saturation at ±448·s, ties-to-even rounding, and both buffer modes.
#include <algorithm>
#include <cmath>

#include "engine/methods/falqon/falqon_ops.h"
#include "engine/quant/quantize.h"
#include "tests/common/test_util.h"
#include "tests/engine/test_quant_fp8_reference.h"

namespace loft {
namespace {

using quant::LowpFormat;

Tensor scalar(float v) { return Tensor::from_vector(std::vector<float>{v}, {1}); }

Tensor codes_of(const std::vector<uint8_t>& c, const Shape& shape) {
  return Tensor::from_host(c.data(), shape, DType::F8_E4M3);
}

std::vector<int32_t> topk(const std::vector<float>& scores, int64_t k) {
  Tensor idx = Tensor::empty({k}, DType::I32);
  falqon::select_topk(Tensor::from_vector(scores, {int64_t(scores.size())}), idx);
  const std::vector<int64_t> v = idx.to_int_vector();
  return {v.begin(), v.end()};
}

TEST(FalqonOps, EncodeWithAGivenScaleMatchesTheQuantizer) {
  std::mt19937 rng(1);
  const Tensor x = test::random_tensor({13, 29}, rng, -2.0f, 2.0f);
  const quant::QuantizedTensor q = quant::quantize(x, LowpFormat::E4M3);
  Tensor codes = Tensor::empty(x.shape(), DType::F8_E4M3);
  falqon::encode_e4m3(x, q.scale, codes);
  EXPECT_EQ(test::code_bytes(codes), test::code_bytes(q.codes));
  // A smaller scale than the data's: values beyond 448·s saturate, the rest round to nearest even.
  const Tensor v = Tensor::from_vector(std::vector<float>{1000.0f, -900.0f, 17.0f, 0.0f, 895.0f}, {5});
  Tensor c = Tensor::empty({5}, DType::F8_E4M3);
  falqon::encode_e4m3(v, scalar(2.0f), c);
  const std::vector<uint8_t> want{0x7e, 0xfe, test::nearest_code(LowpFormat::E4M3, 8.5f), 0x00, 0x7e};
  EXPECT_EQ(test::code_bytes(c), want);
  Tensor wrong = Tensor::empty({4}, DType::F8_E4M3);
  EXPECT_THROW(falqon::encode_e4m3(v, scalar(1.0f), wrong), Error);
}

TEST(FalqonOps, RowScoresSumAbsoluteValues) {
  const Tensor b = Tensor::from_vector(std::vector<float>{1.0f, -2.0f, 0.5f, 0.0f, -0.0f, 0.0f, -3.0f, 3.0f, -0.25f}, {3, 3});
  Tensor s = Tensor::empty({3}, DType::F32);
  falqon::row_scores(b, s);
  EXPECT_EQ(s.to_float_vector(), (std::vector<float>{3.5f, 0.0f, 6.25f}));
}

TEST(FalqonOps, TopkPrefersLargerScoresThenLowerIndices) {
  EXPECT_EQ(topk({1, 3, 3, 2, 3}, 2), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(topk({1, 3, 3, 2, 3}, 4), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(topk({0, 0, 0, 0, 0, 0, 0}, 3), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(topk({5, 4, 3}, 3), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(topk({1, INFINITY, NAN, 2}, 2), (std::vector<int32_t>{1, 2})) << "NaN ranks above +inf";
  // Random scores with many ties against a full sort.
  std::mt19937 rng(3);
  std::vector<float> s(1000);
  for (float& v : s) v = float(rng() % 50) * 0.125f;
  std::vector<int32_t> order(s.size());
  for (size_t i = 0; i < s.size(); ++i) order[i] = int32_t(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[size_t(a)] > s[size_t(b)]; });
  for (int64_t k : {1, 7, 64, 999, 1000}) {
    std::vector<int32_t> want(order.begin(), order.begin() + k);
    std::sort(want.begin(), want.end());
    EXPECT_EQ(topk(s, k), want) << "k " << k;
  }
  Tensor too_many = Tensor::empty({4}, DType::I32);
  EXPECT_THROW(falqon::select_topk(Tensor::from_vector(std::vector<float>{1.0f, 2.0f}, {2}), too_many), Error);
}

// out 4, in 3, r 2, s 0.5: every value below is a small dyadic number, so the exact sum is the
// fp32 one and the expected codes come from the brute-force nearest-code reference.
struct Hand {
  std::vector<float> w = {448, -448, 17, 0.5f, 2, -3, 1, 1, 1, 0, 0, 0};  // W / s, row-major
  std::vector<float> a = {1, 2, -4, 0.5f, 0, 64};                        // A / s
  std::vector<float> b = {100, 1, 0, 0, 0.25f, -0.5f, 2, 0};              // B [4×2]
  float s = 0.5f;
};

std::vector<uint8_t> encode_scaled(const std::vector<float>& v) {
  std::vector<uint8_t> c;
  for (float x : v) c.push_back(test::nearest_code(LowpFormat::E4M3, x));
  return c;
}

void run_hand(bool zero_all) {
  const Hand h;
  std::vector<uint8_t> wm = encode_scaled(h.w), a = encode_scaled(h.a);
  wm.insert(wm.end(), a.begin(), a.end());
  std::vector<uint8_t> wt(12);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) wt[size_t(j * 4 + i)] = wm[size_t(i * 3 + j)];
  falqon::RowUpdate u{Tensor::from_vector(std::vector<int32_t>{0, 2}, {2}),
                      Tensor::from_vector(h.b, {4, 2}),
                      codes_of(wm, {6, 3}),
                      codes_of(wt, {3, 4}),
                      scalar(h.s),
                      Tensor::zeros({4}, DType::U8),
                      Tensor::from_vector(std::vector<float>(8, 1.0f), {4, 2})};
  falqon::apply_rows(u, zero_all);
  std::vector<uint8_t> want = wm;
  for (int i : {0, 2})
    for (int j = 0; j < 3; ++j) {
      // In units of s: W/s + Σ_c B_ic·(A/s)_cj, clamped to ±448 (then encoded).
      double v = h.w[size_t(i * 3 + j)];
      for (int c = 0; c < 2; ++c) v += double(h.b[size_t(i * 2 + c)]) * h.a[size_t(c * 3 + j)];
      want[size_t(i * 3 + j)] = test::nearest_code(LowpFormat::E4M3, float(std::clamp(v, -448.0, 448.0)));
    }
  // Row 0: 448+100+0.5 saturates at 448; −448+200 = −248, a tie between −240 and −256, goes to
  // the even code −256; 17−400+64 = −319 → −320. Row 2: 1 (unchanged), 1.5, −32.
  EXPECT_EQ(test::code_bytes(u.wm), want);
  std::vector<uint8_t> want_t(12);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) want_t[size_t(j * 4 + i)] = want[size_t(i * 3 + j)];
  EXPECT_EQ(test::code_bytes(u.wt), want_t);
  EXPECT_EQ(u.changed.to_int_vector(), (std::vector<int64_t>{1, 0, 1, 0}));
  EXPECT_EQ(u.applied.to_float_vector(), (std::vector<float>{101, 2, 1, 1, 1.25f, 0.5f, 1, 1}));
  const std::vector<float> b_after = zero_all ? std::vector<float>(8, 0.0f)
                                              : std::vector<float>{0, 0, 0, 0, 0, 0, 2, 0};
  EXPECT_EQ(u.b.to_float_vector(), b_after);
}

TEST(FalqonOps, RowUpdateResetMode) { run_hand(true); }
TEST(FalqonOps, RowUpdateAccumulateModeKeepsUnappliedRows) { run_hand(false); }

TEST(FalqonOps, ZeroUpdateLeavesEveryCodeAlone) {
  // deq then requantize with the same scale is the identity on every code, saturated ones included.
  std::vector<uint8_t> wm(256 + 256);
  for (int c = 0; c < 256; ++c) wm[size_t(c)] = uint8_t(c == 0x7f || c == 0xff ? 0 : c);
  for (int c = 0; c < 256; ++c) wm[size_t(256 + c)] = 0x38;
  std::vector<uint8_t> wt = std::vector<uint8_t>(wm.begin(), wm.begin() + 256);
  falqon::RowUpdate u{Tensor::from_vector(std::vector<int32_t>{0}, {1}), Tensor::zeros({1, 1}, DType::F32),
                      codes_of(wm, {2, 256}), codes_of(wt, {256, 1}), scalar(0.0371f),
                      Tensor::zeros({1}, DType::U8), Tensor::zeros({1, 1}, DType::F32)};
  falqon::apply_rows(u, true);
  EXPECT_EQ(test::code_bytes(u.wm), wm);
  EXPECT_EQ(u.changed.to_int_vector(), std::vector<int64_t>{0});
}

}  // namespace
}  // namespace loft
