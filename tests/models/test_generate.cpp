// Generation with the KV cache against references, on the CPU (f32): llama2.c run.c's 255 greedy
// tokens of stories260K from BOS and from "Once upon a time" (and its logits at positions 0-3),
// and lm-evaluation-harness's greedy GSM8K generations (transformers, fp32) of both shipped models,
// token for token from the given context ids, and their text once the caller's stop-string hook
// has decoded it. Then the loop's own contracts: EOS, the caller's
// stop, continuous batching through fewer slots than prompts, and a request over the cache size.
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/llama/decode.h"
#include "models/llama/generate.h"
#include "tests/common/decode_check.h"
#include "tests/common/test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

using namespace llama;
using nlohmann::json;

std::unique_ptr<LlamaModel> model_named(const std::string& name) {
  return test::decode_test_model(name, Device::cpu(), DType::F32);
}

std::vector<json> read_jsonl(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<json> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  EXPECT_FALSE(out.empty()) << p;
  return out;
}

// run.c: tokens[p] is fed at position p; every token after the prompt is the argmax; 256 steps,
// stopping only on BOS (which did not happen).
TEST(Generate, Stories260kGreedyReproducesLlama2c) {
  std::ifstream in(test::data_path("reference/stories260K_greedy_reference.json"));
  const json ref = json::parse(in);
  auto model = model_named("stories260K-hf");
  KvCache cache = KvCache::for_model(*model, 2, 256);
  std::vector<std::vector<int32_t>> prompts, want;
  for (const json& c : ref["cases"]) {
    const auto prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
    const auto tokens = c["tokens"].get<std::vector<int32_t>>();
    ASSERT_EQ(tokens.size(), size_t(c["steps"].get<int>()));
    ASSERT_TRUE(std::equal(prompt.begin(), prompt.end(), tokens.begin()));
    prompts.push_back(prompt);
    want.emplace_back(tokens.begin() + int64_t(prompt.size()), tokens.end());
  }
  ASSERT_EQ(prompts.size(), 2u);
  ASSERT_EQ(want[0].size(), 255u);
  GenerateOptions opt;
  opt.max_new_tokens = 255;
  const auto got = generate(*model, cache, {prompts[0]}, opt);
  EXPECT_EQ(got[0].tokens, want[0]);
  opt.max_new_tokens = int64_t(want[1].size());
  const auto once = generate(*model, cache, {prompts[1]}, opt);
  EXPECT_EQ(once[0].tokens, want[1]);
  EXPECT_EQ(once[0].stop, StopReason::MaxTokens);

  // The logits run.c printed at positions 0-3 of the BOS case, through the cache step by step.
  const json& logits = ref["cases"][0]["logits"];
  const auto& toks = ref["cases"][0]["tokens"];
  cache.clear_all();
  double worst = 0;
  for (int p = 0; p < 4; ++p) {
    const Tensor row = decode_step(*model, cache, {Feed::last(0, {toks[p].get<int32_t>()})});
    worst = std::max(worst, test::rel_error(row.to_float_vector(),
                                            logits[std::to_string(p)].get<std::vector<float>>()));
  }
  ::testing::Test::RecordProperty("worst_logits_rel_error", cat(worst));
  EXPECT_LT(worst, 1e-5);
}

void check_gsm8k(const std::string& name) {
  const auto dir = test::data_path("reference/eval");
  const auto tokens = read_jsonl(dir / (name + "-gsm8k5_tokens.jsonl"));
  const auto outputs = read_jsonl(dir / (name + "-gsm8k5_outputs.jsonl"));
  ASSERT_EQ(tokens.size(), outputs.size());
  auto model = model_named(name);
  std::vector<std::vector<int32_t>> prompts;
  GenerateOptions opt;
  opt.max_new_tokens = 256;  // lm-eval's max_gen_toks
  for (int64_t e : model->config().eos_token_ids) opt.eos_ids.push_back(int32_t(e));
  for (size_t i = 0; i < tokens.size(); ++i) {
    prompts.push_back(tokens[i]["input_ids"].get<std::vector<int32_t>>());
    ASSERT_EQ(outputs[i]["stop_reason"], "max_gen_toks");  // no EOS and no stop string
    ASSERT_EQ(outputs[i]["n_generated_tokens"], 256);
  }
  // The stop strings, checked on the decoded text as lm-eval's caller would through on_token.
  const auto tok = load_tokenizer(test::data_path("models/" + name));
  const std::vector<std::string> until = {"Question:", "</s>", "<|im_end|>"};
  std::vector<std::unique_ptr<StreamDecoder>> dec;
  std::vector<std::string> text(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) dec.push_back(tok->stream_decoder_skip_special());
  const OnToken on_token = [&](size_t s, int32_t t) {
    text[s] += dec[s]->push(t);
    for (const std::string& u : until)
      if (text[s].find(u) != std::string::npos) return false;
    return true;
  };
  // The context was cut to max_length - max_gen_toks, so prompt + generation fills the model.
  KvCache cache = KvCache::for_model(*model, 4, model->config().max_position_embeddings);
  const auto got = generate(*model, cache, prompts, opt, on_token);
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ(got[i].tokens, tokens[i]["generated_ids"].get<std::vector<int32_t>>()) << name << " " << i;
    EXPECT_EQ(got[i].stop, StopReason::MaxTokens);
    text[i] += dec[i]->finish();
    for (const std::string& u : until) text[i] = text[i].substr(0, text[i].find(u));
    // lm-eval decodes the generation with skip_special_tokens=True; the text must match too.
    EXPECT_EQ(text[i], outputs[i]["generation"].get<std::string>()) << name << " " << i;
  }
}

TEST(Generate, Stories260kGsm8kReproducesLmEval) { check_gsm8k("stories260K-hf"); }
TEST(Generate, WideRandomGsm8kReproducesLmEval) {
  LOFT_REQUIRE_DATA("models/wide-random");
  check_gsm8k("wide-random");
}

TEST(Generate, StopsOnEosOrWhenTheCallerSaysAndBatchesThroughFewSlots) {
  auto model = model_named("stories260K-hf");
  KvCache wide = KvCache::for_model(*model, 5, 64), narrow = KvCache::for_model(*model, 2, 64);
  const std::vector<std::vector<int32_t>> prompts = {
      {1}, {1, 403, 407, 261, 378}, {1, 300}, {1, 280, 281, 282, 283, 284, 285}, {1, 403}};
  GenerateOptions opt;
  opt.max_new_tokens = 20;
  const auto all = generate(*model, wide, prompts, opt);
  const auto few = generate(*model, narrow, prompts, opt);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(all[i].tokens.size(), 20u);
    EXPECT_EQ(few[i].tokens, all[i].tokens) << i;
  }
  // EOS: the 3rd token of sequence 0 declared an end; kept in the output.
  opt.eos_ids = {all[0].tokens[2]};
  const auto eos = generate(*model, narrow, {prompts[0]}, opt);
  EXPECT_EQ(eos[0].stop, StopReason::Eos);
  EXPECT_EQ(eos[0].tokens.size(), size_t(std::find(all[0].tokens.begin(), all[0].tokens.end(),
                                                   all[0].tokens[2]) - all[0].tokens.begin() + 1));
  // The caller stops sequence 1 at its 5th token and sees every token of every sequence once.
  opt.eos_ids.clear();
  std::vector<std::vector<int32_t>> seen(prompts.size());
  const auto stopped = generate(*model, narrow, prompts, opt, [&](size_t s, int32_t t) {
    seen[s].push_back(t);
    return !(s == 1 && seen[s].size() == 5);
  });
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(seen[i], stopped[i].tokens) << i;
  EXPECT_EQ(stopped[1].stop, StopReason::Caller);
  EXPECT_EQ(stopped[1].tokens, std::vector<int32_t>(all[1].tokens.begin(), all[1].tokens.begin() + 5));
  EXPECT_EQ(stopped[3].tokens, all[3].tokens);
  EXPECT_STREQ(stop_reason_name(StopReason::Caller), "caller");
  for (int64_t s = 0; s < narrow.slots(); ++s) EXPECT_EQ(narrow.length(s), 0);
}

TEST(Generate, RequestOverTheCacheSizeIsAClearError) {
  auto model = model_named("stories260K-hf");
  KvCache cache = KvCache::for_model(*model, 2, 64);
  GenerateOptions opt;
  opt.max_new_tokens = 60;
  try {
    generate(*model, cache, {{1, 2, 3}, std::vector<int32_t>(10, 5)}, opt);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "prompt 1 has 10 tokens and asks for 60 new ones: 70 "
                                         "positions, but the KV cache holds 64 per sequence"));
  }
  EXPECT_THROW(generate(*model, cache, {{}}, opt), Error);
  opt.sampling.top_p = 0;
  EXPECT_THROW(generate(*model, cache, {{1}}, opt), Error);
}

}  // namespace
}  // namespace loft
