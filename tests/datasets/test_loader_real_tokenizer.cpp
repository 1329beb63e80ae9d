// The data loader with the real tokenizers (SentencePiece and tokenizer.json) on the real data files: every example's
// trained targets are exactly its response's tokens followed by EOS, and a zstd copy of a file
// yields the very same batches.
#include <gtest/gtest.h>

#include "datasets/data_loader.h"
#include "datasets/record_reader.h"
#include "tests/common/test_util.h"
#include "tests/datasets/fake_tokenizer.h"

namespace loft::data {
namespace {

std::vector<PackedBatch> drain(DataLoader loader) {
  std::vector<PackedBatch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  return out;
}

// Per example, in batch order: the target ids that are trained (targets != -100).
std::vector<std::vector<int32_t>> trained_targets(const std::vector<PackedBatch>& batches) {
  std::vector<std::vector<int32_t>> docs;
  for (const PackedBatch& b : batches)
    for (size_t i = 0; i < b.ids.size(); ++i) {
      if (b.doc_ids[i] < 0) continue;
      if (b.positions[i] == 0) docs.emplace_back();
      if (b.targets[i] != PackedBatch::kIgnore) docs.back().push_back(b.targets[i]);
    }
  return docs;
}

// The response of every record: JSON field `field`, or the whole text record when empty.
std::vector<std::string> responses(const std::filesystem::path& path, const std::string& field) {
  auto reader = open_record_reader(path, 1 << 20);
  std::vector<std::string> out;
  RawRecord raw;
  while (reader->next(raw))
    out.push_back(field.empty() ? raw.text : parse_json_record(raw.text).at(field).get<std::string>());
  return out;
}

DataConfig in_order(const std::filesystem::path& path, int64_t seq, bool packing) {
  DataConfig c;
  c.train = {{path}};
  c.seq = seq;
  c.batch_rows = 4;
  c.packing = packing;
  c.shuffle_buffer = 0;  // file order, so examples line up with records
  return c;
}

// The stories260K SentencePiece model's normaliser (remove_extra_whitespaces) collapses runs of
// spaces and drops leading/trailing ones; the Llama-2 tokenizer and the model folders'
// tokenizer.json (which load_tokenizer prefers) keep text as it is.
enum class Spaces { kept, collapsed };
std::string as_decoded(const std::string& text, Spaces spaces) {
  if (spaces == Spaces::kept) return text;
  std::string out;
  for (char c : text)
    if (c != ' ' || (!out.empty() && out.back() != ' ')) out += c;
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Loads `path` in order and checks each example's trained targets == encode(response) + EOS, and
// that they decode to the response.
void expect_responses_trained(const std::filesystem::path& path, const std::string& field, const Tokenizer& tok,
                              Spaces spaces, int64_t seq, bool packing) {
  const std::vector<std::string> want = responses(path, field);
  DataLoader loader = DataLoader::training(in_order(path, seq, packing), tok);
  std::vector<PackedBatch> batches;
  while (auto b = loader.next()) batches.push_back(std::move(*b));
  EXPECT_EQ(loader.stats().truncated, 0) << "choose a --seq that truncates nothing";
  const auto got = trained_targets(batches);
  ASSERT_EQ(got.size(), want.size()) << path;
  int64_t trained = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<int32_t> ids = tok.encode(want[i]);
    ids.push_back(tok.eos_id());
    ASSERT_EQ(got[i], ids) << path << " example " << i;
    ids.pop_back();
    ASSERT_EQ(tok.decode(ids), as_decoded(want[i], spaces)) << path << " example " << i;
    trained += int64_t(got[i].size());
  }
  int64_t batch_trained = 0;
  for (const PackedBatch& b : batches) batch_trained += b.trained_tokens;
  EXPECT_EQ(batch_trained, trained);
}

TEST(LoaderRealTokenizer, AlpacaTrainsExactlyTheOutputsAndEos) {
  const auto tok = load_tokenizer(test::data_path("models/stories260K-hf"));
  expect_responses_trained(test::data_path("alpaca/alpaca_small.json"), "output", *tok, Spaces::kept, 4096, true);
  const auto tok512 = load_sentencepiece(test::data_path("models/stories260K/tok512.model"));
  expect_responses_trained(test::data_path("alpaca/alpaca_small.json"), "output", *tok512, Spaces::collapsed, 4096,
                           true);
  const auto llama2 = load_sentencepiece(test::data_path("tokenizers/llama2/tokenizer.model"));
  expect_responses_trained(test::data_path("alpaca/alpaca_small.json"), "output", *llama2, Spaces::kept, 2048,
                           true);
}

TEST(LoaderRealTokenizer, Gsm8kTrainsExactlyTheAnswersAndEosWithTheLlama2Tokenizer) {
  const auto tok = load_sentencepiece(test::data_path("tokenizers/llama2/tokenizer.model"));
  expect_responses_trained(test::data_path("gsm8k/train.jsonl"), "answer", *tok, Spaces::kept, 1024, true);
}

TEST(LoaderRealTokenizer, TinyStoriesTrainsEachWholeStoryWithoutPacking) {
  const auto tok = load_tokenizer(test::data_path("models/stories260K-hf"));
  const auto path = test::data_path("tinystories/tinystories_sample.txt");
  expect_responses_trained(path, "", *tok, Spaces::kept, 1024, false);
  // Without packing each story has its own row and starts with BOS.
  const auto batches = drain(DataLoader::training(in_order(path, 1024, false), *tok));
  int64_t rows = 0;
  for (const PackedBatch& b : batches)
    for (int64_t r = 0; r < b.rows; ++r, ++rows) EXPECT_EQ(b.ids[size_t(r * b.seq)], tok->bos_id());
  EXPECT_EQ(rows, 5);
}

TEST(LoaderRealTokenizer, ZstdCopyOfGsm8kYieldsTheSameBatches) {
  const auto tok = load_tokenizer(test::data_path("models/stories260K-hf"));
  const auto plain = test::data_path("gsm8k/train.jsonl");
  test::TempDir dir;
  test::write_file(dir / "train.jsonl.zst", test::zstd_compress(test::read_file(plain)));
  DataConfig a = in_order(plain, 1024, true), b = in_order(dir / "train.jsonl.zst", 1024, true);
  a.shuffle_buffer = b.shuffle_buffer = 256;  // shuffled the same way from the same seed
  a.seed = b.seed = 11;
  const auto from_plain = drain(DataLoader::training(a, *tok));
  const auto from_zstd = drain(DataLoader::training(b, *tok));
  ASSERT_GT(from_plain.size(), 100u);
  ASSERT_EQ(from_plain.size(), from_zstd.size());
  for (size_t i = 0; i < from_plain.size(); ++i) ASSERT_TRUE(from_plain[i] == from_zstd[i]) << "batch " << i;
  int64_t examples = 0;
  for (const PackedBatch& x : from_plain) examples += x.examples;
  EXPECT_EQ(examples, 7473);
}

}  // namespace
}  // namespace loft::data
