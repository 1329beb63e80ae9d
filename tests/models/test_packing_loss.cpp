// Packing with document masking gives the same per-example loss, and the same LoRA gradients, as
// running each example alone: real Alpaca and TinyStories examples, packed by the datasets Packer,
// through stories260K (F32, CPU backend) with LoRA adapters whose B is non-zero.
#include <gtest/gtest.h>

#include "datasets/packer.h"
#include "datasets/source.h"
#include "engine/io/safetensors_checkpoint.h"
#include "engine/peft/lora_linear.h"
#include "models/llama/model.h"
#include "models/llama/weights.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

std::unique_ptr<llama::LlamaModel> lora_model(const std::filesystem::path& dir) {
  const auto cfg = llama::load_llama_config(dir);
  auto weights = llama::load_llama_weights(SafetensorsCheckpoint::open(dir), cfg, DType::F32, Device::cpu());
  std::mt19937_64 init(1);
  auto model = std::make_unique<llama::LlamaModel>(
      cfg, std::move(weights), [&](const std::string& name, const std::string&, Tensor w) {
        return std::make_unique<LoraLinear>(name, std::move(w), LoraOptions{8, 16.0f}, init);
      });
  // A non-zero B, so the adapter changes the forward pass and both A and B get gradients.
  std::mt19937 rng(5);
  for (const auto& [name, lin] : model->linears()) {
    auto& lora = dynamic_cast<LoraLinear&>(*lin);
    lora.set_adapter(test::random_tensor(lora.lora_a().value.shape(), rng, -0.2f, 0.2f),
                     test::random_tensor(lora.lora_b().value.shape(), rng, -0.1f, 0.1f));
  }
  return model;
}

// The first `n` examples of a real file of at most `max_tokens` tokens, tokenized as training does.
std::vector<data::TokenizedExample> examples(const std::filesystem::path& path, const Tokenizer& tok, size_t n,
                                             size_t max_tokens) {
  data::DataConfig c;
  c.train = {{path}};
  data::Source src(c.train[0], c, data::Split::all, 0, tok);
  std::vector<data::TokenizedExample> out;
  while (out.size() < n) {
    auto rec = src.next();
    if (!rec) break;
    data::TokenizedExample ex = data::tokenize_conversation(rec->conv, src.chat_template(), tok, false);
    if (ex.size() <= max_tokens) out.push_back(std::move(ex));
  }
  return out;
}

ModelBatch to_model_batch(const data::PackedBatch& b) {
  return data::to_model_batch(b, Device::cpu());
}

// Where one example sits in a packed batch: row-major token range [begin, end).
struct Span {
  size_t begin, end;
};
std::vector<Span> example_spans(const data::PackedBatch& b) {
  std::vector<Span> spans;
  for (size_t i = 0; i < b.ids.size(); ++i) {
    if (b.doc_ids[i] < 0) continue;
    if (i % size_t(b.seq) == 0 || b.doc_ids[i] != b.doc_ids[i - 1]) spans.push_back({i, i});
    spans.back().end = i + 1;
  }
  return spans;
}

std::vector<std::vector<float>> grads_of(llama::LlamaModel& m) {
  std::vector<std::vector<float>> g;
  for (Param* p : m.params()) g.push_back(p->grad.to_float_vector());
  return g;
}
void zero_grads(llama::LlamaModel& m) {
  for (Param* p : m.params()) p->grad.zero_();
}

TEST(PackingLoss, PackedDocumentsMatchEachExampleAloneInLossAndGradients) {
  const auto dir = test::data_path("models/stories260K-hf");
  const auto tok = load_tokenizer(dir);
  auto model = lora_model(dir);

  // Whole Alpaca examples (prompt untrained, response + EOS trained) and TinyStories texts cut to
  // varied lengths (every token trained but BOS).
  auto exs = examples(test::data_path("alpaca/alpaca_small.json"), *tok, 10, 260);
  size_t cut = 45;
  for (auto& ex : examples(test::data_path("tinystories/tinystories_sample.txt"), *tok, 5, 512)) {
    data::truncate_example(ex, cut += 17);
    exs.push_back(std::move(ex));
  }
  ASSERT_EQ(exs.size(), 15u);

  constexpr int64_t kSeq = 512;
  data::Packer packer(kSeq, 64, /*packing=*/true, tok->eos_id());
  for (const auto& ex : exs) packer.add(ex);
  const data::PackedBatch packed = packer.flush();
  ASSERT_EQ(packed.examples, int64_t(exs.size()));
  ASSERT_LE(2 * packed.rows, packed.examples) << "examples must share rows";
  const std::vector<Span> spans = example_spans(packed);
  ASSERT_EQ(spans.size(), exs.size());

  // Per-example loss from the packed batch: keep only that example's targets.
  const LossSums whole = model->evaluate(to_model_batch(packed));
  double sum_alone = 0;
  int64_t tokens_alone = 0;
  std::vector<data::PackedBatch> alone(exs.size());
  for (size_t k = 0; k < exs.size(); ++k) {
    ASSERT_EQ(std::vector<int32_t>(packed.ids.begin() + std::ptrdiff_t(spans[k].begin),
                                   packed.ids.begin() + std::ptrdiff_t(spans[k].end)),
              exs[k].ids);
    data::PackedBatch only = packed;
    for (size_t i = 0; i < only.targets.size(); ++i)
      if (i < spans[k].begin || i >= spans[k].end) only.targets[i] = data::PackedBatch::kIgnore;
    const LossSums in_pack = model->evaluate(to_model_batch(only));

    data::Packer single(int64_t(exs[k].size()), 1, /*packing=*/false, tok->eos_id());  // its own row, no padding
    single.add(exs[k]);
    alone[k] = single.flush();
    const LossSums by_itself = model->evaluate(to_model_batch(alone[k]));
    ASSERT_EQ(in_pack.tokens, exs[k].trained_count());
    ASSERT_EQ(by_itself.tokens, in_pack.tokens);
    EXPECT_NEAR(in_pack.loss_sum, by_itself.loss_sum, 1e-5 * std::abs(by_itself.loss_sum))
        << "example " << k << " (" << exs[k].size() << " tokens)";
    sum_alone += by_itself.loss_sum;
    tokens_alone += by_itself.tokens;
  }
  EXPECT_EQ(whole.tokens, tokens_alone);
  EXPECT_NEAR(whole.loss_sum, sum_alone, 1e-5 * sum_alone);
  std::string sizes;
  for (const auto& ex : exs) sizes += ' ' + std::to_string(ex.size());
  std::printf("[ packing ] example lengths:%s\n", sizes.c_str());
  std::printf("[ packing ] %zu examples in %ld rows of %ld: loss sum %.6f packed, %.6f alone\n", exs.size(),
              long(packed.rows), long(kSeq), whole.loss_sum, sum_alone);

  // Gradients: one packed forward_backward against the sum over the examples alone.
  const float scale = 1.0f / float(tokens_alone);
  zero_grads(*model);
  model->forward_backward(to_model_batch(packed), scale);
  const auto packed_grads = grads_of(*model);
  zero_grads(*model);
  for (const data::PackedBatch& b : alone) model->forward_backward(to_model_batch(b), scale);
  const auto alone_grads = grads_of(*model);
  const auto params = model->params();
  ASSERT_EQ(packed_grads.size(), 2u * 7u * size_t(model->config().num_layers));
  double worst = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    double norm = 0;
    for (float v : alone_grads[i]) norm += double(v) * v;
    ASSERT_GT(norm, 0) << params[i]->name << ": the adapter must get a gradient";
    const double err = test::rel_error(packed_grads[i], alone_grads[i]);
    EXPECT_LT(err, 1e-4) << params[i]->name;
    worst = std::max(worst, err);
  }
  std::printf("[ packing ] worst relative gradient difference over %zu LoRA tensors: %.3g\n", params.size(), worst);
}

// Without document masking the packed loss would differ: the check above can fail.
TEST(PackingLoss, WithoutDocumentMaskingPackedLossDiffers) {
  const auto dir = test::data_path("models/stories260K-hf");
  const auto tok = load_tokenizer(dir);
  auto model = lora_model(dir);
  auto exs = examples(test::data_path("tinystories/tinystories_sample.txt"), *tok, 3, 512);
  data::Packer packer(256, 1, true, tok->eos_id());
  for (auto& ex : exs) {
    data::truncate_example(ex, 80);
    packer.add(ex);
  }
  data::PackedBatch packed = packer.flush();
  ASSERT_EQ(packed.rows, 1);
  const double masked = model->evaluate(to_model_batch(packed)).loss_sum;
  data::PackedBatch one_doc = packed;
  for (int32_t& d : one_doc.doc_ids) d = 0;  // attention across examples, positions run on
  const double unmasked = model->evaluate(to_model_batch(one_doc)).loss_sum;
  EXPECT_GT(std::abs(masked - unmasked), 1e-3 * masked) << masked << " vs " << unmasked;
}

}  // namespace
}  // namespace loft
