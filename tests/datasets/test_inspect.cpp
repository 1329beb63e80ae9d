// `loft data inspect`'s numbers: exact percentiles from the length histogram, statistics that agree
// with what the data loader actually produces, and renderings whose marked spans are the trained
// tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "datasets/data_loader.h"
#include "datasets/inspect.h"
#include "engine/core/error.h"
#include "tests/common/test_util.h"
#include "tests/datasets/fake_tokenizer.h"

namespace loft::data {
namespace {

// Nearest rank on a sorted copy: the definition LengthStats promises.
int64_t reference_percentile(std::vector<int64_t> v, double p) {
  std::sort(v.begin(), v.end());
  const auto rank = size_t(std::ceil(p / 100.0 * double(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

TEST(LengthStats, MatchesSortedReferenceAtSeveralSizes) {
  std::mt19937 rng(3);
  for (size_t n : {1, 2, 3, 4, 7, 100, 172, 1001}) {
    std::uniform_int_distribution<int64_t> len(1, n < 10 ? 5 : 3000);  // small range: many ties
    std::vector<int64_t> v(n);
    LengthStats s;
    for (auto& x : v) s.add(x = len(rng));
    EXPECT_EQ(s.count(), int64_t(n));
    EXPECT_EQ(s.min(), *std::min_element(v.begin(), v.end()));
    EXPECT_EQ(s.max(), *std::max_element(v.begin(), v.end()));
    int64_t total = 0;
    for (int64_t x : v) total += x;
    EXPECT_EQ(s.total(), total);
    EXPECT_DOUBLE_EQ(s.mean(), double(total) / double(n));
    for (double p : {1.0, 25.0, 50.0, 90.0, 99.0, 100.0})
      EXPECT_EQ(s.percentile(p), reference_percentile(v, p)) << "n=" << n << " p" << p;
    for (int64_t limit : {int64_t(0), int64_t(3), int64_t(1500)})
      EXPECT_EQ(s.count_above(limit), std::count_if(v.begin(), v.end(), [&](int64_t x) { return x > limit; }));
  }
}

TEST(LengthStats, SmallCasesAndEmpty) {
  LengthStats s;
  EXPECT_EQ(s.percentile(50), 0);
  EXPECT_EQ(s.max(), 0);
  EXPECT_EQ(s.mean(), 0.0);
  for (int64_t x : {4, 1, 3, 2}) s.add(x);
  EXPECT_EQ(s.percentile(50), 2);
  EXPECT_EQ(s.percentile(75), 3);
  EXPECT_EQ(s.percentile(76), 4);
  EXPECT_EQ(s.percentile(100), 4);
  EXPECT_THROW(s.percentile(0), Error);
  EXPECT_THROW(s.add(-1), Error);
}

// The marked text without markers and control labels.
std::string unmarked(std::string s) {
  for (std::string_view m : {kTrainedOpen, kTrainedClose, std::string_view("<bos>"), std::string_view("<eos>")})
    for (size_t at = s.find(m); at != std::string::npos; at = s.find(m, at)) s.erase(at, m.size());
  return s;
}

TEST(Inspect, MarkedSpansAreTheTrainedTokensOfRealExamples) {
  const auto tok = load_tokenizer(test::data_path("models/stories260K-hf"));
  InspectOptions opt;
  opt.examples = 20;
  const FileInspection r = inspect_file(test::data_path("alpaca/alpaca_small.json"), opt, *tok);
  ASSERT_EQ(r.shown.size(), 20u);
  EXPECT_TRUE(r.shown[0].where.ends_with("alpaca_small.json:2")) << r.shown[0].where;
  // Re-tokenize the same records to know the truth per token.
  DataConfig c;
  c.train = {{test::data_path("alpaca/alpaca_small.json")}};
  Source src(c.train[0], c, Split::all, 0, *tok);
  for (const ShownExample& e : r.shown) {
    TokenizedExample ex = tokenize_conversation(src.next()->conv, ChatTemplate::alpaca, *tok, false);
    EXPECT_EQ(e.tokens, int64_t(ex.size()));
    EXPECT_EQ(e.trained, ex.trained_count());
    truncate_example(ex, size_t(opt.seq));
    EXPECT_EQ(unmarked(e.text), tok->decode(ex.ids)) << e.text;
    // One trained span: the response and the EOS that ends it.
    const size_t open = e.text.find(kTrainedOpen);
    ASSERT_NE(open, std::string::npos) << e.text;
    EXPECT_EQ(e.text.find(kTrainedOpen, open + 1), std::string::npos) << e.text;
    // The folder's tokenizer.json decodes BOS as "<s>", then the "▁" of "▁Below" as a space.
    EXPECT_TRUE(e.text.starts_with("<s> Below is an instruction")) << e.text;
    if (e.tokens <= opt.seq) {
      EXPECT_TRUE(e.text.ends_with("</s>]]")) << e.text;
      std::vector<int32_t> response;
      for (size_t i = 0; i < ex.size(); ++i)
        if (ex.trained[i] && ex.ids[i] != tok->eos_id()) response.push_back(ex.ids[i]);
      const std::string span = e.text.substr(open + kTrainedOpen.size());
      // decode() strips the leading space at a sequence start; inside the example it is kept. A
      // byte-fallback run just before the response (the "\n" of "### Response:\n") is held by
      // the stream decoder until the run ends (its validity is decided as a whole, as tokenizers
      // does), so it lands after the marker.
      const std::string tail = " " + tok->decode(response) + "</s>]]";
      ASSERT_TRUE(span.ends_with(tail)) << span;
      EXPECT_EQ(span.substr(0, span.size() - tail.size()).find_first_not_of('\n'), std::string::npos) << span;
    }
  }
}

TEST(Inspect, TrainOnInputsMarksEverythingButTheFirstToken) {
  test::ByteTokenizer tok;
  test::TempDir dir;
  test::write_file(dir / "a.jsonl", "{\"prompt\": \"2+2=\", \"completion\": \"4\"}\n");
  InspectOptions opt;
  FileInspection r = inspect_file(dir / "a.jsonl", opt, tok);
  ASSERT_EQ(r.shown.size(), 1u);
  EXPECT_EQ(r.shown[0].text, "<s>2+2=[[4</s>]]");
  opt.train_on_inputs = true;
  r = inspect_file(dir / "a.jsonl", opt, tok);
  EXPECT_EQ(r.shown[0].text, "<s>[[2+2=4</s>]]");
  EXPECT_EQ(r.trained_tokens, 6);
}

// Statistics must describe what training gets: compare with the data loader over the same file.
void expect_agrees_with_loader(const std::filesystem::path& path, const Tokenizer& tok, int64_t seq) {
  InspectOptions opt;
  opt.seq = seq;
  opt.examples = 0;
  const FileInspection r = inspect_file(path, opt, tok);
  EXPECT_TRUE(r.shown.empty());

  DataConfig c;
  c.train = {{path}};
  c.seq = seq;
  c.packing = false;
  c.shuffle_buffer = 0;
  DataLoader loader = DataLoader::training(c, tok);
  int64_t kept_tokens = 0, kept_trained = 0;
  while (auto b = loader.next()) {
    kept_trained += b->trained_tokens;
    kept_tokens += std::count_if(b->doc_ids.begin(), b->doc_ids.end(), [](int32_t d) { return d >= 0; });
  }
  const DataStats st = loader.stats();
  EXPECT_EQ(r.lengths.count(), st.examples + st.dropped_untrained) << path;
  EXPECT_EQ(r.truncated, st.truncated) << path;
  EXPECT_EQ(r.truncated, r.lengths.count_above(seq)) << path;
  EXPECT_EQ(r.no_trained_left, st.dropped_untrained) << path;
  EXPECT_EQ(r.kept_trained, kept_trained) << path;
  // The loader drops examples left with no trained token; their tokens are kept by inspect only.
  if (st.dropped_untrained == 0) {
    EXPECT_EQ(r.kept_tokens, kept_tokens) << path;
  }
  EXPECT_LE(r.kept_tokens, r.lengths.total());
  EXPECT_LE(r.kept_trained, r.trained_tokens);
}

TEST(Inspect, StatisticsAgreeWithTheDataLoaderOnRealFiles) {
  const auto tok = load_tokenizer(test::data_path("models/stories260K-hf"));
  expect_agrees_with_loader(test::data_path("alpaca/alpaca_small.json"), *tok, 256);
  expect_agrees_with_loader(test::data_path("alpaca/alpaca_small.json"), *tok, 4096);
  expect_agrees_with_loader(test::data_path("tinystories/tinystories_sample.txt"), *tok, 100);
  const auto llama2 = load_sentencepiece(test::data_path("tokenizers/llama2/tokenizer.model"));
  expect_agrees_with_loader(test::data_path("gsm8k/train.jsonl"), *llama2, 128);
}

TEST(Inspect, Gsm8kNumbersWithTheLlama2Tokenizer) {
  const auto tok = load_sentencepiece(test::data_path("tokenizers/llama2/tokenizer.model"));
  InspectOptions opt;
  opt.seq = 256;
  const FileInspection r = inspect_file(test::data_path("gsm8k/train.jsonl"), opt, *tok);
  EXPECT_EQ(r.format, RecordFormat::gsm8k);
  EXPECT_EQ(r.chat_template, ChatTemplate::alpaca);
  EXPECT_EQ(r.lengths.count(), 7473);
  EXPECT_EQ(r.shown.size(), 3u);
  EXPECT_LE(r.lengths.min(), r.lengths.percentile(50));
  EXPECT_LE(r.lengths.percentile(50), r.lengths.percentile(90));
  EXPECT_LE(r.lengths.percentile(99), r.lengths.max());
  EXPECT_GT(r.truncated, 0);  // about a third of the problems are longer than 256 llama2 tokens
  EXPECT_LT(r.truncated, r.lengths.count());
  EXPECT_EQ(r.truncated, r.lengths.count_above(256));
  std::ostringstream out;
  print_inspection(out, r, opt);
  EXPECT_TRUE(test::contains(out.str(), "examples       7473\n"));
  EXPECT_TRUE(test::contains(out.str(), "p50 " + std::to_string(r.lengths.percentile(50)) + ","));
  EXPECT_TRUE(test::contains(out.str(), std::to_string(r.truncated) + " examples truncated"));
}

TEST(Inspect, BadRecordsFailNamingFileAndLineOrAreCounted) {
  test::ByteTokenizer tok;
  test::TempDir dir;
  test::write_file(dir / "a.jsonl", "{\"text\": \"one\"}\n{\"text\": 5}\n{\"text\": \"three\"}\n");
  InspectOptions opt;
  try {
    inspect_file(dir / "a.jsonl", opt, tok);
    ADD_FAILURE() << "a bad record must fail by default";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "a.jsonl:2:"));
  }
  opt.on_bad_record = BadRecordPolicy::skip;
  const FileInspection r = inspect_file(dir / "a.jsonl", opt, tok);
  EXPECT_EQ(r.lengths.count(), 2);
  EXPECT_EQ(r.skipped_bad, 1);
  EXPECT_TRUE(test::contains(r.first_skip_reason, "a.jsonl:2:"));
  opt.seq = 1;
  EXPECT_THROW(inspect_file(dir / "a.jsonl", opt, tok), UsageError);
  opt.seq = 16;
  opt.examples = -1;
  EXPECT_THROW(inspect_file(dir / "a.jsonl", opt, tok), UsageError);
  EXPECT_THROW(inspect_file(dir / "missing.jsonl", InspectOptions{}, tok), UsageError);
}

}  // namespace
}  // namespace loft::data
