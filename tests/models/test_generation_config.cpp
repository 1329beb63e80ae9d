// generation_config.json parsing, and the stop ids gathered from it, config.json and the tokenizer:
// their union in a stable order, validated against the vocabulary with errors naming the file.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "engine/core/error.h"
#include "models/llama/generation_config.h"
#include "tests/common/llama3_checkpoint.h"
#include "tests/common/test_util.h"
#include "tests/datasets/fake_tokenizer.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using llama::GenerationConfig;
using nlohmann::json;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GenerationConfig, ParsesIdsAndSamplingDefaults) {
  const GenerationConfig g = GenerationConfig::from_json_text(
      R"({"bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "pad_token_id": null,
          "do_sample": true, "temperature": 0.6, "top_p": 0.9, "top_k": 50, "max_new_tokens": 256,
          "transformers_version": "4.43.0"})",
      "g.json");
  EXPECT_EQ(g.bos_token_id, 128000);
  EXPECT_FALSE(g.pad_token_id);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(g.do_sample, true);
  EXPECT_EQ(g.temperature, 0.6);
  EXPECT_EQ(g.top_p, 0.9);
  EXPECT_EQ(g.top_k, 50);
  EXPECT_EQ(g.max_new_tokens, 256);
  EXPECT_EQ(g.to_json(), json::parse(R"({"bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
      "do_sample": true, "temperature": 0.6, "top_p": 0.9, "top_k": 50, "max_new_tokens": 256})"));
  const GenerationConfig one = GenerationConfig::from_json_text(R"({"eos_token_id": 2})", "g.json");
  EXPECT_EQ(one.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(one.to_json(), json::parse(R"({"eos_token_id": 2})"));
}

TEST(GenerationConfig, BadFieldsNameTheFileAndField) {
  const auto bad = [](const char* text) {
    return error_of([&] { GenerationConfig::from_json_text(text, "M/generation_config.json"); });
  };
  EXPECT_TRUE(test::contains(bad(R"({"eos_token_id": "</s>"})"), "M/generation_config.json: field eos_token_id"));
  EXPECT_TRUE(test::contains(bad(R"({"bos_token_id": [1, 2]})"), "field bos_token_id must be a single token id"));
  EXPECT_TRUE(test::contains(bad(R"({"top_p": 1.5})"), "field top_p must be in (0, 1]"));
  EXPECT_TRUE(test::contains(bad(R"({"temperature": -1})"), "field temperature"));
  EXPECT_TRUE(test::contains(bad(R"({"max_new_tokens": 0})"), "field max_new_tokens"));
  EXPECT_TRUE(test::contains(bad(R"({"do_sample": "yes"})"), "field do_sample"));
  EXPECT_TRUE(test::contains(bad("[1]"), "not a JSON object"));
  EXPECT_TRUE(test::contains(bad("{"), "M/generation_config.json: not valid JSON"));
}

// A folder with stories260K-hf's config.json, edited, and a generation_config.json.
struct Folder {
  test::TempDir dir;
  explicit Folder(const json& config_edits, const std::string& generation_config = "") {
    std::ifstream in(test::data_path("models/stories260K-hf/config.json"));
    json config = json::parse(in);
    config.merge_patch(config_edits);
    std::ofstream(dir / "config.json") << config.dump();
    if (!generation_config.empty()) std::ofstream(dir / "generation_config.json") << generation_config;
  }
};

TEST(GenerationSettings, StopIdsAreTheUnionInAStableOrder) {
  const test::ByteTokenizer tok;  // EOS 2, 259 ids
  Folder f(json{{"eos_token_id", {2, 5}}}, R"({"eos_token_id": [7, 2], "bos_token_id": 1, "temperature": 0.7})");
  llama::GenerationSettings s = llama::load_generation_settings(f.dir.path(), tok);
  EXPECT_EQ(s.stop_ids(), (std::vector<int32_t>{7, 2, 5}));
  EXPECT_EQ(s.stops[0].from, "generation_config.json");
  EXPECT_EQ(s.stops[2].from, "config.json");
  ASSERT_TRUE(s.file);
  EXPECT_EQ(s.file->temperature, 0.7);
  s.add_stop(5, "again");
  s.add_stop(9, "chat template llama3");
  EXPECT_EQ(s.stop_ids(), (std::vector<int32_t>{7, 2, 5, 9}));
  // What the adapter folder gets: the folder's own fields, eos_token_id = every stop id.
  EXPECT_EQ(s.to_generation_config_json(),
            json::parse(R"({"bos_token_id": 1, "eos_token_id": [7, 2, 5, 9], "temperature": 0.7})"));

  // No generation_config.json, and config.json without eos: the tokenizer's EOS alone.
  Folder bare(json{{"eos_token_id", nullptr}});
  const llama::GenerationSettings only_tok = llama::load_generation_settings(bare.dir.path(), tok);
  EXPECT_FALSE(only_tok.file);
  EXPECT_EQ(only_tok.stop_ids(), std::vector<int32_t>{test::ByteTokenizer::kEos});
  EXPECT_EQ(only_tok.stops[0].from, "tokenizer");
  // The real stories260K-hf folder: every source says 2.
  const auto stories = llama::load_generation_settings(test::data_path("models/stories260K-hf"), tok);
  EXPECT_EQ(stories.stop_ids(), std::vector<int32_t>{2});
}

TEST(GenerationSettings, IdsOutsideTheVocabularyNameTheFile) {
  const test::ByteTokenizer tok;  // 259 ids; stories260K-hf's config.json says vocab_size 512
  Folder gen(json::object(), R"({"eos_token_id": [2, 300]})");
  std::string e = error_of([&] { llama::load_generation_settings(gen.dir.path(), tok); });
  EXPECT_TRUE(test::contains(e, (gen.dir / "generation_config.json").string() + ": field eos_token_id: token id 300"));
  EXPECT_TRUE(test::contains(e, "outside the vocabulary (259 tokens in the tokenizer)"));
  Folder pad(json{{"vocab_size", 100}}, R"({"pad_token_id": 150})");
  e = error_of([&] { llama::load_generation_settings(pad.dir.path(), tok); });
  EXPECT_TRUE(test::contains(e, "generation_config.json: field pad_token_id: token id 150"));
  EXPECT_TRUE(test::contains(e, "(100 tokens in config.json vocab_size)"));
  Folder cfg(json{{"eos_token_id", {2, 4000}}});
  e = error_of([&] { llama::load_generation_settings(cfg.dir.path(), tok); });
  EXPECT_TRUE(test::contains(e, (cfg.dir / "config.json").string() + ": field eos_token_id: token id 4000"));
}

// An adapter folder's generation_config.json (what finetune writes) adds its trained end-of-turn id.
TEST(GenerationSettings, AdapterStopsJoinTheModels) {
  const test::ByteTokenizer tok;
  Folder model(json{{"eos_token_id", 2}});
  llama::GenerationSettings s = llama::load_generation_settings(model.dir.path(), tok);
  test::TempDir adapter;
  llama::add_adapter_stops(s, adapter.path(), 512);  // no file (a PEFT-made adapter): nothing
  EXPECT_EQ(s.stop_ids(), std::vector<int32_t>{2});
  std::ofstream(adapter / "generation_config.json") << R"({"eos_token_id": [2, 260]})";
  llama::add_adapter_stops(s, adapter.path(), 512);
  EXPECT_EQ(s.stop_ids(), (std::vector<int32_t>{2, 260}));
  EXPECT_EQ(s.stops[1].from, "adapter generation_config.json");
  std::ofstream(adapter / "generation_config.json") << R"({"eos_token_id": 600})";
  EXPECT_TRUE(test::contains(error_of([&] { llama::add_adapter_stops(s, adapter.path(), 512); }),
                             "generation_config.json: field eos_token_id: token id 600 is outside"));
}

// The Llama-3-shaped checkpoint: config.json and generation_config.json both list
// <|end_of_text|>, <|eom_id|>, <|eot_id|>; the Instruct tokenizer's EOS is <|eot_id|>.
TEST(GenerationSettings, Llama3StopIds) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  test::TempDir dir;
  test::write_llama3_checkpoint(dir.path());
  const auto tok = load_tokenizer(dir.path());
  const auto s = llama::load_generation_settings(dir.path(), *tok);
  EXPECT_EQ(s.stop_ids(), (std::vector<int32_t>{test::kEndOfText, test::kEomId, test::kEotId}));
  EXPECT_EQ(tok->eos_id(), test::kEotId);
}

}  // namespace
}  // namespace loft
