// evaluate --task mmlu|gsm8k --adapter builds the model the adapter was trained on: for an adapter
// of every registered method on stories260K (a few training steps, so the adapter matters),
// the command's MMLU log-likelihoods equal eval::run_mmlu on the trained model in memory, and the
// report names the recorded method; GSM8K runs on the same adapter and reports it.
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/peft/halo_weight.h"
#include "engine/optim/adamw.h"
#include "eval/mmlu.h"
#include "models/llama/loading.h"
#include "tests/common/cli_capture.h"
#include "tests/common/eval_util.h"
#include "tests/common/test_util.h"
#include "tests/common/train_a_little.h"
#include "tests/common/every_method.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path model_dir() { return test::data_path("models/stories260K-hf"); }

class EvaluateAdapter : public ::testing::TestWithParam<std::string> {};

TEST_P(EvaluateAdapter, ScoresTheTrainedModel) {
  MethodOptions m;
  m.method = GetParam();
  m.lora = {4, 8.0f};
  m.targets = parse_lora_targets("all");
  if (m.method == "halo") m.get<HaloOptions>() = {1, quant::LowpFormat::INT8};
  test::TempDir dir;
  std::mt19937_64 rng(3);
  auto model = llama::load_model(model_dir(), Device::cpu(), make_linear_factory(m, rng));
  test::train_a_little(*model, 3);
  save_peft_adapter(dir / "a", llama::extract_adapter(*model, m, model_dir().string()));

  const auto tok = load_tokenizer(model_dir());
  eval::MmluOptions mo;
  mo.data = test::data_path("mmlu");
  mo.subjects = {"marketing"};
  mo.limit = 2;
  mo.max_length = model->config().max_position_embeddings;
  std::vector<eval::MmluSample> want;
  mo.on_sample = [&](const eval::MmluSample& s) { want.push_back(s); };
  eval::run_mmlu(*model, *tok, mo);

  const auto r = test::run_cli_captured({"evaluate", "--model", model_dir().string(), "--adapter", (dir / "a").string(),
                                         "--task", "mmlu", "--data", mo.data.string(), "--subjects", "marketing",
                                         "--limit", "2", "--log-samples", (dir / "s.jsonl").string(), "--json",
                                         "--device", "cpu"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json report = json::parse(r.out);
  EXPECT_EQ(report["method"], m.method);
  EXPECT_EQ(report["adapter"], (dir / "a").string());
  const auto got = test::read_jsonl(dir / "s.jsonl");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    for (size_t c = 0; c < 4; ++c)
      EXPECT_NEAR(got[i]["loglikelihoods"][c].get<double>(), want[i].loglikelihoods[c],
                  1e-6 * std::abs(want[i].loglikelihoods[c]))
          << m.method << " " << i << " " << c;

  const auto g = test::run_cli_captured({"evaluate", "--model", model_dir().string(), "--adapter", (dir / "a").string(),
                                         "--task", "gsm8k", "--data", test::data_path("gsm8k").string(),
                                         "--limit", "1", "--max-gen-toks", "8", "--json", "--device", "cpu"});
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(json::parse(g.out)["method"], m.method);
  EXPECT_EQ(json::parse(g.out)["metrics"]["questions"], 1);
}

INSTANTIATE_TEST_SUITE_P(Methods, EvaluateAdapter, test::every_method(), test::method_test_name);

}  // namespace
}  // namespace loft
