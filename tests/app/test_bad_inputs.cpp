// One test per class of bad input from issue 13: each gives one bounded line on stderr and exit 1
// (runtime) or 2 (usage), never a crash, a hang, an "internal error" or silent acceptance.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"
#include "engine/io/safetensors_reader.h"
#include "engine/peft/peft_adapter.h"
#include "models/llama/config.h"
#include "models/llama/memory_estimate.h"
#include "tests/common/cli_capture.h"
#include "tests/common/cli_expect.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

std::string model_dir() { return test::data_path("models/stories260K-hf").string(); }
std::string demo() {
  return (test::source_dir() / "examples" / "demo.jsonl").string();
}
void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}
std::string deep(int levels, const std::string& inner = "1") {
  return std::string(size_t(levels), '[') + inner + std::string(size_t(levels), ']');
}
using test::expect_one_line;
using test::finetune;

// Deep nesting is refused by depth, not by overflowing the stack; errors never dump the value.
TEST(BadInputs, DeepNestingAndHugeValuesStayBounded) {
  std::string error;
  EXPECT_FALSE(try_parse_json(deep(100000), error));
  EXPECT_TRUE(test::contains(error, "nested deeper than")) << error;
  EXPECT_TRUE(try_parse_json(deep(kMaxJsonDepth), error).has_value());
  const nlohmann::json big = nlohmann::json::parse(deep(kMaxJsonDepth));
  EXPECT_LT(brief(big).size(), 100u);
  EXPECT_LT(brief(nlohmann::json(std::string(1 << 20, 'x'))).size(), 100u);
  // config.json with a deep value in a field: a bounded one-line error.
  test::TempDir dir;
  write(dir / "config.json", R"({"hidden_size": )" + deep(100000) + "}");
  try {
    llama::load_llama_config(dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 300u);
  }
  // A safetensors header whose shape nests 100k levels deep.
  const std::string header = R"({"w": {"dtype": "F32", "shape": )" + deep(100000) + R"(, "data_offsets": [0, 4]}})";
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  file += header + "abcd";
  EXPECT_THROW(parse_safetensors_header("x.safetensors", reinterpret_cast<const unsigned char*>(file.data()), file.size()),
               Error);
}

// Typed reads: number overflow, wrong types and out-of-range integers name the file and field.
TEST(BadInputs, TypedFieldsRefuseOverflowWrongTypesAndRange) {
  std::string error;
  EXPECT_FALSE(try_parse_json(R"({"a": 1e999})", error));
  EXPECT_FALSE(try_parse_json("[1, 2] junk", error));
  const nlohmann::json j = nlohmann::json::parse(R"({"r": 4294967304, "s": "8", "u": 18446744073709551615})");
  const JsonFields f(j, "adapter_config.json");
  try {
    f.int32("r");
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "adapter_config.json: field r must be an integer from")) << e.what();
  }
  EXPECT_THROW(f.integer("s"), Error);
  EXPECT_THROW(f.integer("u"), Error);
  test::TempDir dir;
  write(dir / "a" / "adapter_config.json",
        R"({"peft_type": "LORA", "r": 4294967304, "lora_alpha": 16, "target_modules": ["q_proj"]})");
  try {
    load_peft_adapter(dir / "a");
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "field r must be an integer from 1 to 2147483647")) << e.what();
  }
  write(dir / "b" / "adapter_config.json", R"({"peft_type": 5, "r": 8})");
  EXPECT_THROW(load_peft_adapter(dir / "b"), Error);
}

// Sizes are checked before allocating: config bounds, and overflow-free memory estimates.
TEST(BadInputs, SizesAreBoundedBeforeAllocating) {
  const std::string base =
      R"({"hidden_size": 64, "intermediate_size": 172, "num_attention_heads": 8, "vocab_size": 512, )";
  for (const char* bad : {R"("num_hidden_layers": 100000000})", R"("num_hidden_layers": 5, "max_position_embeddings": 1000000000000})",
                          R"("num_hidden_layers": 5, "vocab_size": 9223372036854775807})"}) {
    try {
      llama::LlamaConfig::from_json_text(base + bad, "config.json");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_TRUE(test::contains(e.what(), "config.json: field ")) << e.what();
    }
  }
  llama::LlamaConfig c = llama::LlamaConfig::from_json_text(base + R"("num_hidden_layers": 5})", "config.json");
  c.vocab_size = INT64_MAX;  // a config built in code: the estimate refuses, never goes negative
  EXPECT_THROW(llama::estimate_training_memory(c, {}), UsageError);
}

TEST(BadInputs, OptionValuesAreCheckedAndNameTheRealOption) {
  test::TempDir dir;
  for (const auto& [opt, value] : std::vector<std::pair<std::string, std::string>>{
           {"--lr", "-1"}, {"--lr", "nan"}, {"--steps", "-1"}, {"--steps", "0"}, {"--lora-alpha", "-1"},
           {"--warmup", "-5"}, {"--max-grad-norm", "nan"}, {"--save-every", "-1"}, {"--batch", "-1"},
           {"--batch", "1e12"}, {"--seq", "1e9"}, {"--shuffle-buffer", "1e12"}, {"--epochs", "1e12"},
           {"--lora-rank", "4294967304"}, {"--nccl-timeout", "0"}, {"--nccl-timeout", "-5"},
           {"--nccl-timeout", "nan"}, {"--check-replicas-every", "-1"}, {"--check-replicas-every", "x"},
           {"--grad-bucket-mib", "-1"}, {"--grad-bucket-mib", "5000"}, {"--grad-bucket-mib", "x"}}) {
    auto args = finetune(dir / "run", {opt, value});
    const auto r = test::run_cli_captured(args);
    EXPECT_EQ(r.code, 2) << opt << " " << value << ": " << r.err;
    EXPECT_TRUE(test::contains(r.err, opt)) << opt << " " << value << ": " << r.err;
    EXPECT_FALSE(test::contains(r.err, "--batch-size")) << r.err;
    EXPECT_FALSE(test::contains(r.err, "At Most 1")) << r.err;  // checked, not given twice
  }
  // --seq beyond the model's positions (512) is refused against the checkpoint.
  expect_one_line(test::run_cli_captured(finetune(dir / "run2", {"--seq", "4096"})), 2, "max_position_embeddings");
  // A flag given a value that is not a boolean.
  expect_one_line(test::run_cli_captured(finetune(dir / "run3", {"--checkpoints-on-gpu=maybe"})), 2,
                  "--checkpoints-on-gpu");
  const auto r = test::run_cli_captured({"evaluate", "--model", model_dir(), "--task", "bogus"});
  expect_one_line(r, 2, "ppl, mmlu, gsm8k, gsm8k-cot");
}

TEST(BadInputs, BinaryConfigFileAndTrailingJunk) {
  test::TempDir dir;
  write(dir / "bin.toml", std::string("\x7f" "ELF\x02\x01\x01\0\0\0", 10));
  auto args = finetune(dir / "run");
  args.insert(args.begin() + 1, {"--config", (dir / "bin.toml").string()});
  expect_one_line(test::run_cli_captured(args), 2, "not a text TOML/INI/YAML file");
  write(dir / "data.json", R"([{"text": "hello there"}] trailing)");
  auto junk = finetune(dir / "run3");
  junk[4] = (dir / "data.json").string();
  expect_one_line(test::run_cli_captured(junk), 1, "after the JSON array");
}

TEST(BadInputs, NumberOverflowInARecordIsABadRecord) {
  test::TempDir dir;
  write(dir / "d.jsonl", "{\"text\": \"a b c\"}\n{\"text\": 1e999}\n");
  auto args = finetune(dir / "run");
  args[4] = (dir / "d.jsonl").string();
  expect_one_line(test::run_cli_captured(args), 1, "d.jsonl:2");
  args[6] = (dir / "run2").string();
  args.insert(args.end(), {"--on-bad-record", "skip"});
  EXPECT_EQ(test::run_cli_captured(args).code, 0);
}

TEST(BadInputs, OversizedRecordIsAClearError) {
  test::TempDir dir;
  write(dir / "big.jsonl", "{\"text\": \"" + std::string(size_t(3) << 20, 'a') + "\"}\n");
  auto args = finetune(dir / "run");
  args[4] = (dir / "big.jsonl").string();
  expect_one_line(test::run_cli_captured(args), 1, "record size limit");
}

TEST(BadInputs, RunFolderReuseIsRefusedUnlessResumeOrOverwrite) {
  test::TempDir dir;
  ASSERT_EQ(test::run_cli_captured(finetune(dir / "run")).code, 0);
  const auto again = test::run_cli_captured(finetune(dir / "run"));
  expect_one_line(again, 2, "already holds a run");
  EXPECT_TRUE(test::contains(again.err, "--resume")) << again.err;
  EXPECT_TRUE(test::contains(again.err, "--overwrite")) << again.err;
  write(dir / "run" / "checkpoints" / ".tmp-step-9-123" / "x", "partial");
  write(dir / "run" / "metrics.jsonl.tmp.4242", "partial");
  ASSERT_EQ(test::run_cli_captured(finetune(dir / "run", {"--overwrite"})).code, 0);
  EXPECT_FALSE(fs::exists(dir / "run" / "checkpoints" / ".tmp-step-9-123"));
  EXPECT_FALSE(fs::exists(dir / "run" / "metrics.jsonl.tmp.4242"));
  EXPECT_EQ(test::read_jsonl(dir / "run" / "metrics.jsonl").size(), 2u);  // the new run's only
  write(dir / "file", "x");
  expect_one_line(test::run_cli_captured(finetune(dir / "file")), 2, "is a file, not a folder");
  fs::create_directories(dir / "ro");
  ::chmod((dir / "ro").c_str(), 0555);
  if (::geteuid() != 0) expect_one_line(test::run_cli_captured(finetune(dir / "ro" / "run")), 1, "--out");
  ::chmod((dir / "ro").c_str(), 0755);
}

TEST(BadInputs, WrongTypesInResumeFilesAreOneLineErrors) {
  test::TempDir dir;
  auto args = finetune(dir / "run", {"--save-every", "1", "--steps", "3"});
  ASSERT_EQ(test::run_cli_captured(args).code, 0);
  write(dir / "run" / "metrics.jsonl", "{\"step\": \"one\"}\n");
  args.push_back("--resume");
  expect_one_line(test::run_cli_captured(args), 1, "metrics.jsonl:1: field step");
  write(dir / "run" / "checkpoints" / "step-2" / "trainer_state.json", R"({"step": [1], "data": {}})");
  expect_one_line(test::run_cli_captured(args), 1, "trainer_state.json: field step");
}

TEST(BadInputs, NonFiniteWeightsAndVocabMismatchAreCaughtAtLoad) {
  test::TempDir dir;
  fs::copy(model_dir(), dir / "m", fs::copy_options::recursive);
  for (const auto& e : fs::directory_iterator(dir / "m"))
    if (e.path().extension() == ".safetensors") {
      const SafetensorsReader r = SafetensorsReader::open(e.path());
      const SafetensorsEntry& w = r.info("model.norm.weight");
      fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
      std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
      uint64_t header = 0;
      f.read(reinterpret_cast<char*>(&header), 8);
      const float nan = NAN;
      f.seekp(std::streamoff(8 + header + w.begin));
      f.write(reinterpret_cast<const char*>(&nan), sizeof nan);  // F32 in this checkpoint
    }
  const auto r = test::run_cli_captured({"evaluate", "--model", (dir / "m").string(), "--task", "ppl",
                                         "--data", demo(), "--device", "cpu"});
  expect_one_line(r, 1, "model.norm.weight holds NaN or Inf");
  // A 512-vocab model beside a larger tokenizer: refused before loading, naming both sizes.
  fs::remove_all(dir / "m");
  fs::copy(model_dir(), dir / "m", fs::copy_options::recursive);
  std::ifstream in(dir / "m" / "config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  cfg["vocab_size"] = 100;
  write(dir / "m" / "config.json", cfg.dump());
  expect_one_line(test::run_cli_captured({"evaluate", "--model", (dir / "m").string(), "--task", "ppl",
                                          "--data", demo(), "--device", "cpu"}),
                  1, "the tokenizer has 512 tokens but the model's vocab_size is 100");
}

}  // namespace
}  // namespace loft
