// LoRA projections that read one input, grouped (LoraLinear::group_with): their A are views of
// one matrix, the group's products (x·Aᵀ once, one dA, one dx term at SharedBackward::finish)
// give what each projection computes alone, the own path of a grouped projection (no
// SharedInput or SharedBackward) still works, values set on a member land in the group, and a
// group whose backward is never finished is caught.
#include <gtest/gtest.h>

#include <random>

#include "engine/optim/adamw.h"
#include "engine/peft/lora_linear.h"
#include "engine/peft/shared_backward.h"
#include "engine/peft/shared_input.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

constexpr int64_t kIn = 24, kT = 13;
const int64_t kOut[3] = {20, 8, 8};  // q, k, v widths

// Three LoRA projections of one input with fixed weights and a non-zero B (so every gradient
// flows), grouped or not.
std::vector<std::unique_ptr<LoraLinear>> readers(bool group) {
  std::vector<std::unique_ptr<LoraLinear>> ls;
  std::mt19937 r(7);
  std::mt19937_64 rng(1);
  for (int64_t out : kOut) {
    ls.push_back(std::make_unique<LoraLinear>("p" + std::to_string(ls.size()),
                                              test::random_tensor({out, kIn}, r), LoraOptions{4, 8.0f}, rng));
    ls.back()->set_adapter(test::random_tensor({4, kIn}, r), test::random_tensor({out, 4}, r));
  }
  if (group) {
    std::vector<AdaptedLinear*> all;
    for (auto& l : ls) all.push_back(l.get());
    for (AdaptedLinear* l : all) l->group_with(all);
  }
  return ls;
}

struct Result {
  std::vector<Tensor> y, grads;
  Tensor dx;
};

Result step(std::vector<std::unique_ptr<LoraLinear>>& ls, bool shared_paths) {
  std::mt19937 r(9);
  const Tensor x = test::random_tensor({kT, kIn}, r);
  SharedInput in(x);
  SharedBackward group;
  Result out;
  out.dx = Tensor::empty({kT, kIn}, DType::F32);
  std::vector<LinearSaved> saved(ls.size());
  for (size_t i = 0; i < ls.size(); ++i) {
    out.y.push_back(Tensor::empty({kT, kOut[i]}, DType::F32));
    ls[i]->forward(x, out.y[i], &saved[i], shared_paths ? &in : nullptr);
  }
  for (size_t i = 0; i < ls.size(); ++i) {
    const Tensor dy = test::random_tensor({kT, kOut[i]}, r);
    ls[i]->backward(dy, saved[i], out.dx, i > 0, nullptr, shared_paths ? &group : nullptr);
  }
  group.finish(out.dx);
  for (auto& l : ls)
    for (Param* p : l->params()) out.grads.push_back(p->grad.clone());
  return out;
}

void expect_close(const Result& a, const Result& b, const std::string& what) {
  for (size_t i = 0; i < a.y.size(); ++i) EXPECT_LT(test::rel_error(a.y[i], b.y[i]), 1e-6) << what << " y" << i;
  EXPECT_LT(test::rel_error(a.dx, b.dx), 1e-6) << what << " dx";
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_LT(test::rel_error(a.grads[i], b.grads[i]), 1e-6) << what << " grad " << i;
}

TEST(LoraGroup, GroupedProductsMatchEachProjectionAlone) {
  auto alone = readers(false), grouped = readers(true);
  for (auto& l : alone) EXPECT_FALSE(l->grouped());
  for (auto& l : grouped) EXPECT_TRUE(l->grouped());
  const Result want = step(alone, true);
  expect_close(step(grouped, true), want, "grouped");
}

TEST(LoraGroup, AGroupedProjectionAloneStillComputesItsOwn) {
  auto alone = readers(false), grouped = readers(true);
  expect_close(step(grouped, false), step(alone, false), "own path");
}

TEST(LoraGroup, TheMembersAreViewsOfTheGroupsMatrix) {
  auto ls = readers(true);
  const float* base = ls[0]->lora_a().value.ptr<float>();
  EXPECT_EQ(ls[1]->lora_a().value.ptr<float>(), base + 4 * kIn);
  EXPECT_EQ(ls[2]->lora_a().value.ptr<float>(), base + 8 * kIn);
  EXPECT_EQ(ls[2]->lora_a().grad.ptr<float>(), ls[0]->lora_a().grad.ptr<float>() + 8 * kIn);
  // Values set on a member (a PEFT adapter, a resumed checkpoint) are the group's.
  std::mt19937 r(11);
  const Tensor a = test::random_tensor({4, kIn}, r), b = test::random_tensor({kOut[1], 4}, r);
  ls[1]->set_adapter(a, b);
  EXPECT_TRUE(test::same_bytes(ls[1]->lora_a().value, a));
  // An optimizer step over the members' views updates each once.
  std::vector<Param*> params;
  for (auto& l : ls)
    for (Param* p : l->params()) {
      p->grad.copy_from(test::random_tensor(p->value.shape(), r));
      params.push_back(p);
    }
  const Tensor before = ls[2]->lora_a().value.clone();
  AdamW opt(params, {});
  opt.step(1e-2);
  EXPECT_GT(test::rel_error(ls[2]->lora_a().value, before), 0.0);
}

TEST(LoraGroup, ProjectionsOfOtherWidthsAreNotGrouped) {
  std::mt19937 r(7);
  std::mt19937_64 rng(1);
  LoraLinear a("a", test::random_tensor({8, 16}, r), LoraOptions{4, 8.0f}, rng);
  LoraLinear b("b", test::random_tensor({8, 24}, r), LoraOptions{4, 8.0f}, rng);
  const std::vector<AdaptedLinear*> both{&a, &b};
  a.group_with(both);
  b.group_with(both);
  EXPECT_FALSE(a.grouped());
  EXPECT_FALSE(b.grouped());
}

TEST(LoraGroupDeathTest, AnUnfinishedGroupIsCaught) {
  EXPECT_DEATH(
      {
        SharedBackward group;
        group.at_finish("g", [](Tensor&) {});
      },
      "unfinished group");
}

}  // namespace
}  // namespace loft
