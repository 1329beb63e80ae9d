// KV-cache decoding on the CPU (f32): every logits row the decoder returns equals a full
// re-forward of the growing sequence (LlamaModel::logits) within 1e-5 relative, for the two
// shipped models and a random GQA model with llama3 rope scaling; a LoRA adapter decodes as its
// full forward does; every method's model decodes; the cache's limits are clear errors; forking a
// slot by prefix continues exactly as the original.
#include <random>

#include "engine/peft/method.h"
#include "engine/peft/peft_adapter.h"
#include "models/llama/decode.h"
#include "models/llama/loading.h"
#include "tests/common/decode_check.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

using namespace llama;

void check_model(const std::string& name) {
  auto model = test::decode_test_model(name, Device::cpu(), DType::F32);
  const auto rows = test::run_decode_schedule(*model);
  EXPECT_EQ(rows.size(), 3u + 10 + (7 + 3) + (4 + 1 + 4));  // prefill, then slots 1, 2 and 0
  const double worst = test::worst_vs_full_forward(*model, rows);
  ::testing::Test::RecordProperty("worst_rel_error", cat(worst));
  EXPECT_LT(worst, 1e-5) << name;
}

TEST(Decode, Stories260kMatchesFullForwardAtEveryStep) { check_model("stories260K-hf"); }
TEST(Decode, WideRandomMatchesFullForwardAtEveryStep) {
  LOFT_REQUIRE_DATA("models/wide-random");
  check_model("wide-random");
}
TEST(Decode, GqaLlama3RopeMatchesFullForwardAtEveryStep) { check_model("gqa-llama3"); }

TEST(Decode, LoraAdapterDecodesAsItsFullForward) {
  const auto dir = test::data_path("golden/adapter_stories260K");
  const PeftAdapter a = load_peft_adapter(dir);
  std::mt19937_64 rng(0);
  auto model = load_model(test::data_path("models/stories260K-hf"), Device::cpu(),
                          make_linear_factory(method_options_for(a), rng));
  apply_adapter(*model, a, dir);
  const auto rows = test::run_decode_schedule(*model);
  EXPECT_LT(test::worst_vs_full_forward(*model, rows), 1e-5);
  // The adapter changes what is decoded (it is not a zero adapter).
  auto base = test::decode_test_model("stories260K-hf", Device::cpu(), DType::F32);
  EXPECT_GT(test::worst_between(rows, test::run_decode_schedule(*base)), 1e-3);
}

// Every method's projections decode through their own forward. Methods that quantize activations
// with one scale per tensor (FALQON's and HALO's FP8) round a token differently when it shares
// the tensor with other tokens, so decode and full forward differ by that rounding, as two
// training batches of other composition would. Their bound is the method's own rounding noise:
// how far its full forward lies from the dense model's (its adapter starts at zero), doubled for
// the two independent roundings compared. Dense methods match as tightly as the base model.
TEST(Decode, EveryMethodsModelDecodes) {
  LOFT_REQUIRE_DATA("models/wide-random");
  auto dense = test::decode_test_model("wide-random", Device::cpu(), DType::F32);
  for (const std::string& method : method_names()) {
    SCOPED_TRACE(method);
    MethodOptions opt;
    opt.method = method;
    opt.lora = {8, 16.0f};
    opt.targets = parse_lora_targets("all");
    apply_method_invariants(opt);
    std::mt19937_64 rng(3);
    auto model = load_model(test::data_path("models/wide-random"), Device::cpu(),
                            make_linear_factory(opt, rng));
    const auto rows = test::run_decode_schedule(*model);
    const double worst = test::worst_vs_full_forward(*model, rows);
    double noise = 0;  // the method's full forward against the dense model's
    for (const auto& r : rows) {
      const int64_t n = int64_t(r.prefix.size());
      const ModelBatch b = make_batch(r.prefix, r.prefix, {}, 1, n, Device::cpu());
      noise = std::max(noise, test::rel_error(model->logits(b).slice(n - 1, 1),
                                              dense->logits(b).slice(n - 1, 1)));
    }
    ::testing::Test::RecordProperty("worst_rel_error_" + method, cat(worst));
    ::testing::Test::RecordProperty("method_noise_" + method, cat(noise));
    EXPECT_LT(worst, method == "falqon" || method == "halo" ? 2 * noise : 1e-5);
  }
}

TEST(Decode, RequestsBeyondTheCacheAreClearErrors) {
  auto model = test::decode_test_model("stories260K-hf", Device::cpu(), DType::F32);
  KvCache cache = KvCache::for_model(*model, 2, 8);
  EXPECT_EQ(cache.bytes(), KvCache::bytes_for(model->config(), 2, 8, DType::F32));
  EXPECT_EQ(cache.bytes(), size_t(2 * 5 * 2 * 8 * 4 * 8 * 4));
  try {
    decode_step(*model, cache, {Feed::last(1, std::vector<int32_t>(9, 5))});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "KV cache full: slot 1 holds 0 positions and needs 9"));
    EXPECT_TRUE(test::contains(e.what(), "sized for 8 positions per sequence"));
  }
  EXPECT_EQ(cache.length(1), 0);
  decode_step(*model, cache, {Feed::last(1, std::vector<int32_t>(6, 5))});
  EXPECT_THROW(decode_step(*model, cache, {Feed::last(1, {1, 2, 3})}), Error);
  EXPECT_EQ(cache.length(1), 6);  // a refused step changes nothing
  EXPECT_THROW(decode_step(*model, cache, {Feed::last(2, {1})}), Error);  // no slot 2
  EXPECT_THROW(decode_step(*model, cache, {Feed::last(0, {1}), Feed::last(0, {2})}), Error);
  EXPECT_THROW(decode_step(*model, cache, {Feed::last(0, {512})}), Error);  // not in the vocab
  EXPECT_THROW(KvCache::for_model(*model, 0, 8), Error);
  // A cache beyond the machine's memory (or 2^64 bytes) is refused before anything is allocated.
  for (const int64_t slots : {int64_t(1) << 40, int64_t(1) << 62}) {
    try {
      KvCache::for_model(*model, slots, 1 << 20);
      ADD_FAILURE() << slots;
    } catch (const UsageError& e) {
      EXPECT_TRUE(test::contains(e.what(), "the KV cache for ")) << e.what();
      EXPECT_TRUE(test::contains(e.what(), "lower --slots")) << e.what();
    }
  }
}

// A slot forked from another's prefix continues exactly as the original does.
TEST(Decode, ForkedPrefixContinuesLikeTheOriginal) {
  LOFT_REQUIRE_DATA("models/wide-random");
  auto model = test::decode_test_model("wide-random", Device::cpu(), DType::F32);
  KvCache cache = KvCache::for_model(*model, 3, 32);
  const std::vector<int32_t> prompt = {1, 40, 41, 42, 43, 44, 45, 46, 47, 48};
  decode_step(*model, cache, {Feed::last(0, prompt)});
  cache.copy_prefix(0, 1, 6);  // the first 6 positions only
  EXPECT_EQ(cache.length(1), 6);
  const std::vector<int32_t> rest(prompt.begin() + 6, prompt.end());
  const Tensor a = decode_step(*model, cache, {Feed::last(1, rest)});
  const Tensor b = decode_step(*model, cache, {Feed::last(2, prompt)});
  EXPECT_LT(test::rel_error(a, b), 1e-6);
  cache.truncate(0, 3);
  EXPECT_EQ(cache.length(0), 3);
  EXPECT_THROW(cache.copy_prefix(0, 1, 4), Error);
}

}  // namespace
}  // namespace loft
