// Files loft reads besides the data: a resumed checkpoint's trainer_state.json and a model's
// tokenizer.json. A value that would make the run do something other than asked (write an
// adapter without training, decode an id two ways, have no way to spell a byte) is an error
// naming the file and the field.
#include <functional>

#include "tests/robustness/robustness_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::expect_failure;

std::vector<std::string> finetune(const fs::path& out, std::vector<std::string> extra, const char* steps = "2") {
  std::vector<std::string> a{"finetune", "--model", test::stories(), "--data", test::demo_data(), "--out", out.string(),
                             "--steps", steps, "--batch", "2", "--seq", "128", "--device", "cpu", "--no-report"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(Robustness, ResumedStepBeyondTheRunIsAnError) {
  test::TempDir dir;
  const fs::path run = dir / "run";
  // 3 steps with a checkpoint at step 2 (the last step writes the adapter, not a checkpoint).
  const test::BinaryResult trained = test::run_loft(finetune(run, {"--save-every", "2"}, "3"));
  ASSERT_EQ(trained.code, 0) << trained.err;
  const fs::path state_file = run / "checkpoints" / "step-2" / "trainer_state.json";
  json state = json::parse(test::read_text(state_file));
  const json saved = state;
  state["step"] = int64_t(1000000000000000000);
  test::write_file(state_file, state.dump());
  expect_failure(finetune(run, {"--resume"}, "3"), 1, {state_file.string(), "field step", "beyond the run's 3 steps"});
  state = saved;
  state["optimizer_steps"] = int64_t(1) << 40;
  test::write_file(state_file, state.dump());
  expect_failure(finetune(run, {"--resume"}, "3"), 1, {state_file.string(), "field optimizer_steps"});
  // A shorter --steps than the checkpoint's is refused the same way.
  test::write_file(state_file, saved.dump());
  expect_failure(finetune(run, {"--resume"}, "1"), 1, {state_file.string(), "beyond the run's 1 steps"});
}

// A copy of stories260K's tokenizer files with tokenizer.json changed by `edit`.
fs::path tokenizer_with(const test::TempDir& dir, const std::function<void(json&)>& edit) {
  const fs::path out = dir / "tok";
  fs::create_directories(out);
  for (const char* f : {"tokenizer_config.json", "config.json"})
    fs::copy_file(fs::path(test::stories()) / f, out / f, fs::copy_options::overwrite_existing);
  json t = json::parse(test::read_text(fs::path(test::stories()) / "tokenizer.json"));
  edit(t);
  test::write_file(out / "tokenizer.json", t.dump());
  return out;
}

std::vector<std::string> tokenize(const fs::path& model) { return {"tokenize", "--model", model.string(), "--text", "hi"}; }

TEST(Robustness, TokenizerVocabularyIsChecked) {
  test::TempDir dir;
  fs::path tok = tokenizer_with(dir, [](json& t) {
    json& v = t["model"]["vocab"];
    const json first = v.begin().value();
    std::next(v.begin()).value() = first;  // the second token on the first one's id
  });
  expect_failure(tokenize(tok), 1, {(tok / "tokenizer.json").string(), "both have id"});
  tok = tokenizer_with(dir, [](json& t) {
    t["model"]["vocab"] = json::object();
    t["model"]["merges"] = json::array();
  });
  expect_failure(tokenize(tok), 1, {(tok / "tokenizer.json").string(), "\"vocab\" is empty"});
  tok = tokenizer_with(dir, [](json& t) {
    json& v = t["model"]["vocab"];
    for (auto it = v.begin(); it != v.end();) it = it.key().starts_with("<0x") ? v.erase(it) : std::next(it);
  });
  expect_failure(tokenize(tok), 1, {(tok / "tokenizer.json").string(), "byte_fallback", "no byte token"});
}

}  // namespace
}  // namespace loft
