// after_steps(): every projection's after-step runs exactly once, those of a method naming an
// AfterStepAll in one call of it with all of them (in the model's order), the others one by one.
#include <gtest/gtest.h>

#include "engine/peft/adapted_linear.h"

namespace loft {
namespace {

std::vector<std::string> calls;

class Fake : public AdaptedLinear {
 public:
  Fake(std::string name, AfterStepAll all) : name_(std::move(name)), all_(all) {}
  int64_t in_features() const override { return 1; }
  int64_t out_features() const override { return 1; }
  void forward(const Tensor&, Tensor&, LinearSaved*, SharedInput*) override {}
  void backward(const Tensor&, const LinearSaved&, Tensor&, bool, const Tensor*,
                SharedBackward*) override {}
  std::vector<Param*> params() override { return {}; }
  Tensor merged_weight() const override { return Tensor(); }
  void after_step() override { calls.push_back("one " + name_); }
  AfterStepAll after_step_all() const override { return all_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  AfterStepAll all_;
};

void group(const char* tag, const std::vector<AdaptedLinear*>& same) {
  std::string s = tag;
  for (AdaptedLinear* l : same) s += " " + static_cast<Fake*>(l)->name();
  calls.push_back(s);
}
void group_a(const std::vector<AdaptedLinear*>& same) { group("A", same); }
void group_b(const std::vector<AdaptedLinear*>& same) { group("B", same); }

TEST(AfterSteps, GroupsEachMethodsProjectionsIntoOneCallAndRunsTheRestAlone) {
  Fake q("q", group_a), k("k", nullptr), v("v", group_b), o("o", group_a), up("up", nullptr), down("down", group_a);
  calls.clear();
  after_steps({&q, &k, &v, &o, &up, &down});
  EXPECT_EQ(calls, (std::vector<std::string>{"one k", "one up", "A q o down", "B v"}));
  calls.clear();
  after_steps({});
  EXPECT_TRUE(calls.empty());
}

}  // namespace
}  // namespace loft
