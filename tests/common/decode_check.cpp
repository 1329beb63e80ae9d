#include "tests/common/decode_check.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/io/safetensors_checkpoint.h"
#include "engine/peft/frozen_linear.h"
#include "models/llama/bench_model.h"
#include "models/llama/decode.h"
#include "models/llama/generate.h"
#include "tests/common/test_util.h"

namespace loft::test {

using namespace llama;

namespace {

std::unique_ptr<AdaptedLinear> frozen(const std::string&, const std::string&, Tensor w) {
  return std::make_unique<FrozenLinear>(std::move(w));
}

LlamaConfig gqa_llama3_config() {
  LlamaConfig c = *bench_shape_config("tiny");
  c.hidden_size = 256;
  c.intermediate_size = 344;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.num_layers = 2;
  c.rope_theta = 500000.0;
  c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 64};
  return c;
}

}  // namespace

std::unique_ptr<LlamaModel> decode_test_model(const std::string& name, Device device, DType dtype) {
  if (name == "gqa-llama3") {
    const LlamaConfig c = gqa_llama3_config();
    return std::make_unique<LlamaModel>(c, random_llama_weights(c, dtype, device, 11), frozen);
  }
  const auto dir = data_path("models/" + name);
  const LlamaConfig c = load_llama_config(dir);
  return std::make_unique<LlamaModel>(
      c, load_llama_weights(SafetensorsCheckpoint::open(dir), c, dtype, device), frozen);
}

std::vector<DecodeRow> run_decode_schedule(LlamaModel& model) {
  std::mt19937 rng(2024);
  const int32_t vocab = int32_t(model.config().vocab_size);
  auto draw = [&](size_t n) {
    std::vector<int32_t> v(n);
    for (auto& x : v) x = int32_t(rng() % uint32_t(vocab));
    return v;
  };
  KvCache cache = KvCache::for_model(model, 3, 64);
  std::vector<std::vector<int32_t>> seq(3);
  std::vector<DecodeRow> out;
  // One step: feeds[i] = (slot, new tokens, rows asked); records every returned row.
  auto step = [&](std::vector<Feed> feeds) {
    const Tensor logits = decode_step(model, cache, feeds);
    const int64_t V = logits.size(1);
    const std::vector<float> all = logits.to_float_vector();
    int64_t r = 0;
    for (const Feed& f : feeds) {
      const size_t before = seq[size_t(f.slot)].size();
      auto& s = seq[size_t(f.slot)];
      s.insert(s.end(), f.tokens.begin(), f.tokens.end());
      for (int64_t row : f.rows) {
        DecodeRow d{{s.begin(), s.begin() + int64_t(before) + row + 1}, {}};
        d.logits.assign(all.begin() + r * V, all.begin() + (r + 1) * V);
        out.push_back(std::move(d));
        ++r;
      }
    }
  };
  step({Feed::last(0, draw(1)), Feed::last(1, draw(7)), Feed::last(2, draw(33))});
  for (int i = 1; i <= 10; ++i) {
    std::vector<Feed> feeds;
    if (i <= 4) feeds.push_back(Feed::last(0, draw(1)));  // slot 0 finishes after 4 tokens
    if (i == 6) {  // ... and takes a new 5-token prompt while the others decode
      cache.clear(0);
      seq[0].clear();
      feeds.push_back(Feed::last(0, draw(5)));
    }
    if (i > 6) feeds.push_back(Feed::last(0, draw(1)));
    feeds.push_back(Feed::last(1, draw(1)));
    if (i == 5) feeds.push_back({2, draw(3), {0, 1, 2}});  // a continuation, every row returned
    else if (i <= 8) feeds.push_back(Feed::last(2, draw(1)));  // slot 2 finishes after step 8
    step(std::move(feeds));
  }
  return out;
}

double worst_vs_full_forward(LlamaModel& model, const std::vector<DecodeRow>& rows) {
  double worst = 0;
  for (const DecodeRow& r : rows) {
    const int64_t n = int64_t(r.prefix.size());
    const ModelBatch b = make_batch(r.prefix, r.prefix, {}, 1, n, model.device());
    const Tensor full = model.logits(b).slice(n - 1, 1);
    worst = std::max(worst, rel_error(r.logits, full.to_float_vector()));
  }
  return worst;
}

double worst_between(const std::vector<DecodeRow>& a, const std::vector<DecodeRow>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_EQ(a[i].prefix, b[i].prefix) << "row " << i;
    worst = std::max(worst, rel_error(a[i].logits, b[i].logits));
  }
  return worst;
}

void expect_greedy_matches_transformers(const std::string& name, Device device) {
  const std::string ref = "reference/" + name + "_greedy.json";
  LOFT_REQUIRE_DATA("models/" + name);
  LOFT_REQUIRE_DATA(ref);
  std::ifstream in(data_path(ref));
  const nlohmann::json j = nlohmann::json::parse(in);
  auto model = decode_test_model(name, device, DType::F32);
  llama::KvCache cache = llama::KvCache::for_model(*model, 2, 128);
  for (const char* key : {"prompt0", "prompt1"}) {
    const auto prompt = j.at(key).at("prompt").get<std::vector<int32_t>>();
    const auto want = j.at(key).at("tokens").get<std::vector<int32_t>>();
    llama::GenerateOptions opt;
    opt.max_new_tokens = int64_t(want.size());
    EXPECT_EQ(llama::generate(*model, cache, {prompt}, opt)[0].tokens, want) << name << " " << key << " on " << device.str();
  }
}

}  // namespace loft::test
