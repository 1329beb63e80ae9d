// loft evaluate --task ppl: the JSON report, and the number itself against a direct computation
// of the definition (each document alone: [BOS]+ids, NLL of tokens 1..n-1).
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/llama/loading.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

TEST(EvaluatePpl, JsonMatchesTheDefinition) {
  test::TempDir dir;
  const std::vector<std::string> docs = {"Once upon a time there was a dog.",
                                         "The cat sat on the mat and looked at the sun."};
  {
    std::ofstream f(dir / "t.txt", std::ios::binary);
    f << docs[0] << "\r\n\n" << docs[1] << "\n";  // CRLF, an empty line, LF
  }
  const auto model_dir = test::data_path("models/stories260K-hf");
  const auto r = test::run_cli_captured({"evaluate", "--model", model_dir.string(), "--task", "ppl",
                                         "--data", (dir / "t.txt").string(), "--json", "--device", "cpu"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["task"], "ppl");
  EXPECT_EQ(j["documents"], 2);

  auto tok = load_tokenizer(model_dir);
  std::mt19937_64 rng(0);
  auto model = llama::load_model(model_dir, Device::cpu(), make_linear_factory({"lora", {}, {}}, rng));
  double nll = 0;
  int64_t tokens = 0;
  for (const auto& d : docs) {
    std::vector<int32_t> ids{tok->bos_id()};
    for (int32_t id : tok->encode(d)) ids.push_back(id);
    const LossSums s = model->evaluate(make_batch(ids, ids, {}, 1, int64_t(ids.size()), Device::cpu()));
    nll += s.loss_sum;
    tokens += s.tokens;
  }
  EXPECT_EQ(j["tokens"], tokens);
  EXPECT_NEAR(j["nll"].get<double>(), nll / double(tokens), 1e-6);
  EXPECT_NEAR(j["ppl"].get<double>(), std::exp(nll / double(tokens)), 1e-4);
}

TEST(EvaluatePpl, UnknownTaskIsAUsageError) {
  const auto model_dir = test::data_path("models/stories260K-hf");
  const auto r = test::run_cli_captured({"evaluate", "--model", model_dir.string(), "--task", "hellaswag",
                                         "--data", "x", "--device", "cpu"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "hellaswag")) << r.err;
  EXPECT_TRUE(r.out.empty());
}

}  // namespace
}  // namespace loft
