// Adapters rebuild the model they were trained on: a HALO (level 1, INT8) adapter evaluated with
// `loft evaluate --adapter` scores exactly what the trained model in memory scores (so the rotated
// INT8 backbone was rebuilt, not bf16 LoRA); an explicit --method overrides the record with a
// note; a PEFT-made adapter still evaluates as LoRA; `finetune --init-adapter` continues with the
// recorded method, and --resume refuses a command line that builds another method.
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/peft/halo_weight.h"
#include "engine/optim/adamw.h"
#include "eval/perplexity.h"
#include "models/llama/loading.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"
#include "tests/common/train_a_little.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

fs::path model_dir() { return test::data_path("models/stories260K-hf"); }

fs::path write_text(const test::TempDir& dir) {
  std::ofstream(dir / "t.txt") << "Once upon a time there was a little dog named Max.\n"
                                  "The cat sat on the mat and looked at the sun all day.\n"
                                  "Lily wanted to play in the park with her friends.\n";
  return dir / "t.txt";
}

// Perplexity of `file` as `loft evaluate` computes it.
double ppl_of(llama::LlamaModel& model, const fs::path& file) {
  const auto tok = load_tokenizer(model_dir());
  eval::PerplexityOptions po;
  po.max_tokens = model.config().max_position_embeddings;
  po.batch_tokens = std::max<int64_t>(8192, po.max_tokens);
  return eval::perplexity(model, *tok, file, Device::cpu(), po).ppl;
}

double cli_ppl(std::vector<std::string> extra, const fs::path& text, std::string* err = nullptr) {
  std::vector<std::string> args{"evaluate",    "--model", model_dir().string(), "--data",
                                text.string(), "--json",  "--device",           "cpu"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = test::run_cli_captured(args);
  EXPECT_EQ(r.code, 0) << r.err;
  if (err) *err = r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out)["ppl"].get<double>() : 0.0;
}

MethodOptions halo_int8() {
  MethodOptions m;
  m.method = "halo";
  m.lora = {4, 8.0f};
  m.targets = parse_lora_targets("all");
  m.get<HaloOptions>() = {1, quant::LowpFormat::INT8};
  return m;
}

TEST(AdapterMethod, HaloAdapterEvaluatesAsTheTrainedModel) {
  test::TempDir dir;
  const fs::path text = write_text(dir);
  std::mt19937_64 rng(3);
  auto model = llama::load_model(model_dir(), Device::cpu(), make_linear_factory(halo_int8(), rng));
  test::train_a_little(*model, 4);
  const double trained = ppl_of(*model, text);
  save_peft_adapter(dir / "halo",
                    llama::extract_adapter(*model, halo_int8(), model_dir().string()));
  EXPECT_EQ(load_peft_adapter(dir / "halo").method->method, "halo");

  const double evaluated = cli_ppl({"--adapter", (dir / "halo").string()}, text);
  EXPECT_NEAR(evaluated, trained, 1e-9 * trained);

  // The same A/B on the dense backbone (an explicit override) is another model, and says so.
  std::string err;
  const double as_lora =
      cli_ppl({"--adapter", (dir / "halo").string(), "--method", "lora"}, text, &err);
  EXPECT_TRUE(test::contains(err, "note: adapter")) << err;
  EXPECT_TRUE(test::contains(err, "halo (level 1, int8)")) << err;
  EXPECT_GT(std::abs(as_lora - trained), 1e-5 * trained)
      << "lora " << as_lora << " halo " << trained;
  std::mt19937_64 rng2(0);
  auto dense =
      llama::load_model(model_dir(), Device::cpu(),
                        make_linear_factory({"lora", halo_int8().lora, halo_int8().targets}, rng2));
  llama::apply_adapter(*dense, load_peft_adapter(dir / "halo"), dir / "halo");
  EXPECT_NEAR(as_lora, ppl_of(*dense, text), 1e-9 * as_lora);
}

TEST(AdapterMethod, PeftMadeAdapterStillEvaluatesAsLora) {
  test::TempDir dir;
  const fs::path text = write_text(dir);
  const fs::path golden = test::data_path("golden/adapter_stories260K");
  const PeftAdapter a = load_peft_adapter(golden);
  std::mt19937_64 rng(0);
  auto model = llama::load_model(model_dir(), Device::cpu(),
                                 make_linear_factory(llama::method_options_for(a), rng));
  llama::apply_adapter(*model, a, golden);
  std::string err;
  EXPECT_NEAR(cli_ppl({"--adapter", golden.string()}, text, &err), ppl_of(*model, text), 1e-9);
  EXPECT_FALSE(test::contains(err, "note:")) << err;
}

std::vector<std::string> finetune_args(const fs::path& out) {
  const fs::path demo =
      test::source_dir() / "examples" / "demo.jsonl";
  return {"finetune",
          "--model",
          model_dir().string(),
          "--data",
          demo.string(),
          "--out",
          out.string(),
          "--steps",
          "2",
          "--batch",
          "2",
          "--seq",
          "256",
          "--device",
          "cpu",
          "--seed",
          "1"};
}

TEST(AdapterMethod, InitAdapterContinuesWithTheRecordedMethod) {
  test::TempDir dir;
  std::mt19937_64 rng(3);
  auto model = llama::load_model(model_dir(), Device::cpu(), make_linear_factory(halo_int8(), rng));
  save_peft_adapter(dir / "halo",
                    llama::extract_adapter(*model, halo_int8(), model_dir().string()));

  auto args = finetune_args(dir / "run");
  args.insert(args.end(), {"--init-adapter", (dir / "halo").string()});
  const auto r = test::run_cli_captured(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "method     halo (level 1, int8, backbone dense, transposed codes per-step) r=4")) << r.out;
  const PeftAdapter out = load_peft_adapter(dir / "run" / "adapter");
  ASSERT_TRUE(out.method.has_value());
  EXPECT_EQ(out.method->method, "halo");
  EXPECT_EQ(out.method->get<HaloOptions>().format, quant::LowpFormat::INT8);

  // An explicit --method wins, with a note.
  args = finetune_args(dir / "run2");
  args.insert(args.end(), {"--init-adapter", (dir / "halo").string(), "--method", "qlora"});
  const auto r2 = test::run_cli_captured(args);
  ASSERT_EQ(r2.code, 0) << r2.err;
  EXPECT_TRUE(test::contains(r2.out, "method     qlora r=4")) << r2.out;
  EXPECT_TRUE(test::contains(r2.err, "note: adapter")) << r2.err;
  EXPECT_EQ(load_peft_adapter(dir / "run2" / "adapter").method->method, "qlora");
}

TEST(AdapterMethod, ResumeRefusesAnotherMethod) {
  test::TempDir dir;
  auto args = finetune_args(dir / "run");
  args.insert(args.end(), {"--save-every", "1", "--lora-rank", "4"});
  ASSERT_EQ(test::run_cli_captured(args).code, 0);
  args.insert(args.end(), {"--resume", "--method", "halo"});
  const auto r = test::run_cli_captured(args);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "--resume")) << r.err;
  EXPECT_TRUE(test::contains(r.err, "run_config.json")) << r.err;
}

}  // namespace
}  // namespace loft
