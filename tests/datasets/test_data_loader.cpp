// The data loader end to end: real files, mixed formats and weights, epochs, validation split,
// bad records, truncation, padding, and exact resume from a saved position.
#include <gtest/gtest.h>

#include <set>

#include "datasets/data_loader.h"
#include "engine/core/error.h"
#include "tests/common/test_util.h"
#include "tests/datasets/fake_tokenizer.h"

namespace loft::data {
namespace {

using test::ByteTokenizer;
using test::TempDir;
using test::write_file;

std::vector<PackedBatch> drain(DataLoader& loader, size_t max_batches = SIZE_MAX) {
  std::vector<PackedBatch> out;
  while (out.size() < max_batches) {
    auto b = loader.next();
    if (!b) break;
    out.push_back(std::move(*b));
  }
  return out;
}

// The text of every example (document) in the batches, decoded with the byte tokenizer.
std::vector<std::string> documents(const std::vector<PackedBatch>& batches, const Tokenizer& tok) {
  std::vector<std::string> docs;
  for (const PackedBatch& b : batches)
    for (int64_t r = 0; r < b.rows; ++r)
      for (int64_t t = 0; t < b.seq; ++t) {
        const size_t i = size_t(r * b.seq + t);
        if (b.doc_ids[i] < 0) continue;
        if (b.positions[i] == 0) docs.emplace_back();
        docs.back() += tok.piece(b.ids[i]);
      }
  return docs;
}

// Invariants every batch must hold: targets are the next token of the same document.
void check_batch(const PackedBatch& b) {
  ASSERT_EQ(b.ids.size(), size_t(b.rows * b.seq));
  int64_t trained = 0;
  for (int64_t r = 0; r < b.rows; ++r)
    for (int64_t t = 0; t < b.seq; ++t) {
      const size_t i = size_t(r * b.seq + t);
      if (b.targets[i] == PackedBatch::kIgnore) continue;
      ++trained;
      ASSERT_LT(t + 1, b.seq);
      ASSERT_EQ(b.doc_ids[i + 1], b.doc_ids[i]);
      ASSERT_EQ(b.positions[i + 1], b.positions[i] + 1);
      ASSERT_EQ(b.targets[i], b.ids[i + 1]);
    }
  EXPECT_EQ(trained, b.trained_tokens);
}

DataConfig config_for(std::vector<DataSource> files, int64_t seq = 256, int64_t rows = 4) {
  DataConfig c;
  c.train = std::move(files);
  c.seq = seq;
  c.batch_rows = rows;
  c.shuffle_buffer = 64;
  c.seed = 7;
  return c;
}

TEST(DataLoader, RealAlpacaFileForTwoEpochs) {
  ByteTokenizer tok;
  DataConfig c = config_for({{test::data_path("alpaca/alpaca_small.json")}}, 2048, 8);
  c.epochs = 2;
  DataLoader loader = DataLoader::training(c, tok);
  EXPECT_EQ(loader.sources()[0]->format(), RecordFormat::alpaca);
  EXPECT_EQ(loader.sources()[0]->chat_template(), ChatTemplate::alpaca);
  const auto batches = drain(loader);
  for (const PackedBatch& b : batches) check_batch(b);
  const DataStats s = loader.stats();
  EXPECT_EQ(s.examples + s.dropped_untrained, 4000);
  EXPECT_EQ(loader.epoch(), 2);
  EXPECT_EQ(int64_t(documents(batches, tok).size()), s.examples);
  for (size_t i = 0; i + 1 < batches.size(); ++i) EXPECT_EQ(batches[i].rows, 8);
  // Packing fills rows: several examples per row (Alpaca examples are ~400 bytes).
  EXPECT_LT(int64_t(batches.size()) * 8 * 3, s.examples);
}

TEST(DataLoader, MixedFormatsEachWithItsTemplate) {
  ByteTokenizer tok;
  DataConfig c = config_for({{test::data_path("alpaca/alpaca_tiny.json")}, {test::data_path("gsm8k/test_first1000.jsonl"), 0.5},
                             {test::data_path("tinystories/tinystories_sample.txt"), 0.1}},
                            1024);
  DataLoader loader = DataLoader::training(c, tok);
  EXPECT_EQ(loader.sources()[1]->format(), RecordFormat::gsm8k);
  EXPECT_EQ(loader.sources()[2]->format(), RecordFormat::text);
  EXPECT_EQ(loader.sources()[2]->chat_template(), ChatTemplate::plain);
  const auto docs = documents(drain(loader), tok);
  size_t alpaca = 0, gsm = 0, story = 0;
  for (const auto& d : docs) {
    alpaca += d.starts_with("<s>Below is an instruction") && d.find("\n#### ") == std::string::npos;
    gsm += d.find("\n#### ") != std::string::npos;
    story += d.starts_with("<s>Once upon a time") || d.starts_with("<s>One day");
  }
  EXPECT_GT(alpaca, 0u);
  EXPECT_GT(gsm, 0u);
  EXPECT_GT(story, 0u);
}

TEST(DataLoader, WeightsSetTheMixture) {
  TempDir dir;
  std::string a, b;
  for (int i = 0; i < 400; ++i) a += "{\"text\": \"A" + std::to_string(i) + "\"}\n";
  for (int i = 0; i < 400; ++i) b += "{\"text\": \"B" + std::to_string(i) + "\"}\n";
  write_file(dir / "a.jsonl", a);
  write_file(dir / "b.jsonl", b);
  ByteTokenizer tok;
  DataLoader loader = DataLoader::training(config_for({{dir / "a.jsonl", 3.0}, {dir / "b.jsonl", 1.0}}), tok);
  const auto docs = documents(drain(loader, 100), tok);
  ASSERT_GT(docs.size(), 1000u);
  double share_a = 0;
  for (const auto& d : docs) share_a += d[3] == 'A';
  share_a /= double(docs.size());
  EXPECT_NEAR(share_a, 0.75, 0.04);
}

TEST(DataLoader, ValidationFractionSplitsRecordsDisjointly) {
  TempDir dir;
  std::string lines;
  for (int i = 0; i < 600; ++i) lines += "{\"prompt\": \"p" + std::to_string(i) + "\", \"completion\": \"c\"}\n";
  write_file(dir / "d.jsonl", lines);
  ByteTokenizer tok;
  DataConfig c = config_for({{dir / "d.jsonl"}});
  c.val_fraction = 0.2;
  EXPECT_TRUE(DataLoader::has_validation(c));
  DataLoader train = DataLoader::training(c, tok), val = DataLoader::validation(c, tok);
  const auto train_docs = documents(drain(train), tok), val_docs = documents(drain(val), tok);
  std::set<std::string> seen(train_docs.begin(), train_docs.end());
  for (const auto& d : val_docs) EXPECT_TRUE(seen.insert(d).second) << "in both splits: " << d;
  EXPECT_EQ(seen.size(), 600u);
  EXPECT_NEAR(double(val_docs.size()), 120, 40);
  // The same split every time (and so after a resume).
  DataLoader val2 = DataLoader::validation(c, tok);
  EXPECT_EQ(documents(drain(val2), tok), val_docs);
}

TEST(DataLoader, ValidationDataFilesAreReadInOrder) {
  ByteTokenizer tok;
  DataConfig c = config_for({{test::data_path("alpaca/alpaca_tiny.json")}}, 2048, 16);
  c.val = {{test::data_path("gsm8k/test_first1000.jsonl")}};
  DataLoader val = DataLoader::validation(c, tok);
  const auto docs = documents(drain(val), tok);
  ASSERT_EQ(docs.size(), 1000u);
  EXPECT_NE(docs[0].find("Janet"), std::string::npos) << "the first GSM8K test question comes first";
  DataConfig none = config_for({{test::data_path("alpaca/alpaca_tiny.json")}});
  EXPECT_FALSE(DataLoader::has_validation(none));
  EXPECT_THROW(DataLoader::validation(none, tok), UsageError);
}

TEST(DataLoader, BadRecordsFailWithFileAndLineOrAreSkippedAndCounted) {
  TempDir dir;
  write_file(dir / "bad.jsonl",
             "{\"instruction\": \"a\", \"output\": \"b\"}\n"
             "{\"instruction\": \"c\", \"output\": \"d\"}\n"
             "{\"instruction\": \"e\"}\n"
             "{not json\n"
             "{\"instruction\": \"f\", \"output\": \"bad \xff utf8\"}\n"
             "{\"instruction\": \"g\", \"output\": 5}\n"
             "{\"instruction\": \"h\", \"output\": \"i\"}\n");
  ByteTokenizer tok;
  DataConfig c = config_for({{dir / "bad.jsonl"}});
  DataLoader fail = DataLoader::training(c, tok);
  try {
    drain(fail);
    ADD_FAILURE() << "a bad record must fail by default";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:3: bad alpaca record: missing field 'output'"), std::string::npos)
        << e.what();
  }
  c.on_bad_record = BadRecordPolicy::skip;
  DataLoader skip = DataLoader::training(c, tok);
  drain(skip);
  const DataStats s = skip.stats();
  EXPECT_EQ(s.skipped_bad, 4);
  EXPECT_EQ(s.examples, 3);
  EXPECT_NE(s.summary().find("skipped 4 bad records (first: "), std::string::npos) << s.summary();
  EXPECT_NE(s.summary().find("bad.jsonl:3"), std::string::npos) << s.summary();
}

TEST(DataLoader, EmptyUndetectableAndAllBadFilesAreClearErrors) {
  TempDir dir;
  ByteTokenizer tok;
  write_file(dir / "empty.jsonl", "");
  DataLoader empty = DataLoader::training(config_for({{dir / "empty.jsonl"}}), tok);
  EXPECT_THROW(drain(empty), Error);
  write_file(dir / "odd.jsonl", "{\"foo\": 1}\n");
  try {
    DataLoader::training(config_for({{dir / "odd.jsonl"}}), tok);
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("odd.jsonl:1: cannot tell the record format (keys: foo)"), std::string::npos)
        << e.what();
  }
  write_file(dir / "allbad.jsonl", "{x\n{y\n");
  DataConfig c = config_for({{dir / "allbad.jsonl"}});
  c.on_bad_record = BadRecordPolicy::skip;
  DataLoader allbad = DataLoader::training(c, tok);
  try {
    drain(allbad);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("allbad.jsonl: no usable records (2 bad records skipped)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(DataLoader::training(DataConfig{}, tok), UsageError);
}

TEST(DataLoader, LongRecordsAreTruncatedAndPromptOnlyLeftoversDropped) {
  TempDir dir;
  write_file(dir / "long.jsonl", "{\"prompt\": \"" + std::string(100, 'p') + "\", \"completion\": \"short\"}\n" +
                                     "{\"prompt\": \"q\", \"completion\": \"" + std::string(100, 'c') + "\"}\n" +
                                     "{\"prompt\": \"\", \"completion\": \"\"}\n");
  ByteTokenizer tok;
  DataConfig c = config_for({{dir / "long.jsonl"}}, 32, 2);
  c.shuffle_buffer = 0;
  c.packing = false;
  DataLoader loader = DataLoader::training(c, tok);
  const auto batches = drain(loader);
  const DataStats s = loader.stats();
  EXPECT_EQ(s.truncated, 2);
  EXPECT_EQ(s.dropped_untrained, 1) << "the first one's response was cut off entirely";
  EXPECT_EQ(s.examples, 2) << "the empty completion still trains EOS";
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].rows, 2);
  EXPECT_EQ(batches[0].doc_ids[32 + 1], 0);
  EXPECT_EQ(batches[0].doc_ids[32 + 2], -1) << "BOS, EOS, then padding";
  EXPECT_EQ(batches[0].targets[32], ByteTokenizer::kEos);
  for (const PackedBatch& b : batches) check_batch(b);
}

// Runs `make()` uninterrupted, then again stopping after k batches, saving state() as text,
// restoring into a fresh loader and continuing: both must give the same batches.
void expect_exact_resume(const std::function<DataLoader()>& make, std::vector<size_t> stops) {
  DataLoader full = make();
  const auto expected = drain(full);
  ASSERT_GT(expected.size(), stops.back());
  for (size_t k : stops) {
    DataLoader first = make();
    auto got = drain(first, k);
    const std::string saved = first.state().dump();
    DataLoader second = make();
    second.restore(nlohmann::json::parse(saved));
    for (PackedBatch& b : drain(second)) got.push_back(std::move(b));
    ASSERT_EQ(got.size(), expected.size()) << "stopped after " << k;
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], expected[i]) << "batch " << i << ", stopped after " << k;
    EXPECT_EQ(second.stats().examples, full.stats().examples);
  }
}

TEST(DataLoader, ExactResumeAcrossEpochsMixturesAndCompressedFiles) {
  TempDir dir;
  std::string jsonl, text;
  for (int i = 0; i < 150; ++i)
    jsonl += "{\"messages\": [{\"role\": \"user\", \"content\": \"u" + std::to_string(i) +
             "\"}, {\"role\": \"assistant\", \"content\": \"" + std::string(size_t(i % 37), 'a') + "\"}]}\n";
  for (int i = 0; i < 40; ++i) text += "story " + std::to_string(i) + std::string(size_t(i % 11), '!') + "\n";
  write_file(dir / "chat.jsonl.zst", test::zstd_compress(jsonl));
  write_file(dir / "stories.txt", text);
  write_file(dir / "gsm.jsonl.zst", test::zstd_compress(test::read_file(test::data_path("gsm8k/train.jsonl"))));
  ByteTokenizer tok({"<|im_start|>", "<|im_end|>"});

  DataConfig c = config_for({{dir / "chat.jsonl.zst", 2.0}, {dir / "stories.txt", 1.0}}, 96, 3);
  c.epochs = 3;
  c.shuffle_buffer = 50;
  expect_exact_resume([&] { return DataLoader::training(c, tok); }, {1, 7, 40, 81});

  c.packing = false;
  c.shuffle_buffer = 1;
  expect_exact_resume([&] { return DataLoader::training(c, tok); }, {5, 60});

  DataConfig real = config_for({{test::data_path("alpaca/alpaca_small.json")}, {dir / "gsm.jsonl.zst"}}, 384, 4);
  real.val_fraction = 0.05;
  real.shuffle_buffer = 200;
  expect_exact_resume([&] { return DataLoader::training(real, tok); }, {3, 500});
}

TEST(DataLoader, RestoreRejectsAnotherConfiguration) {
  ByteTokenizer tok;
  DataConfig c = config_for({{test::data_path("alpaca/alpaca_tiny.json")}});
  DataLoader a = DataLoader::training(c, tok);
  drain(a, 2);
  DataConfig other_seq = c;
  other_seq.seq = 128;
  DataLoader b = DataLoader::training(other_seq, tok);
  EXPECT_THROW(b.restore(a.state()), UsageError);
  DataLoader d = DataLoader::training(config_for({{test::data_path("gsm8k/test_first1000.jsonl")}}), tok);
  EXPECT_THROW(d.restore(a.state()), UsageError);
  DataLoader e = DataLoader::training(c, tok);
  EXPECT_THROW(e.restore(nlohmann::json{{"version", 1}}), UsageError);
}

TEST(DataConfig, OptionParsingAndValidation) {
  EXPECT_EQ(parse_data_spec("a.jsonl").weight, 1.0);
  const DataSource s = parse_data_spec("dir/b.jsonl.zst:2.5");
  EXPECT_EQ(s.path, "dir/b.jsonl.zst");
  EXPECT_EQ(s.weight, 2.5);
  EXPECT_EQ(parse_data_spec("c:/x.json").path, "c:/x.json");
  EXPECT_THROW(parse_data_spec("a.jsonl:0"), UsageError);
  EXPECT_THROW(parse_data_spec("a.jsonl:-1"), UsageError);
  EXPECT_EQ(parse_bad_record_policy("skip"), BadRecordPolicy::skip);
  EXPECT_THROW(parse_bad_record_policy("ignore"), UsageError);
  DataConfig c = config_for({{"x.jsonl"}});
  c.val_fraction = 1.0;
  EXPECT_THROW(validate(c), UsageError);
  c.val_fraction = 0.1;
  c.val = {{"v.jsonl"}};
  EXPECT_THROW(validate(c), UsageError);
  ByteTokenizer plain, llama3({"<|start_header_id|>"}), chatml({"<|im_start|>"}), mistral({"[INST]", "[/INST]"});
  EXPECT_EQ(default_template(RecordFormat::messages, plain), ChatTemplate::llama2);
  EXPECT_EQ(default_template(RecordFormat::messages, mistral), ChatTemplate::mistral_v3);
  EXPECT_EQ(default_template(RecordFormat::messages, llama3), ChatTemplate::llama3);
  EXPECT_EQ(default_template(RecordFormat::sharegpt, chatml), ChatTemplate::chatml);
  EXPECT_EQ(default_template(RecordFormat::gsm8k, plain), ChatTemplate::alpaca);
  EXPECT_EQ(default_template(RecordFormat::text, plain), ChatTemplate::plain);
  // The model's own chat template (tokenizer_config.json) wins for chats and instruction data, so
  // an Alpaca instruction becomes the user turn of a chat model; text stays a continuation.
  for (RecordFormat f : {RecordFormat::messages, RecordFormat::sharegpt, RecordFormat::alpaca, RecordFormat::gsm8k})
    EXPECT_EQ(default_template(f, chatml, ChatTemplate::llama31), ChatTemplate::llama31) << record_format_name(f);
  EXPECT_EQ(default_template(RecordFormat::text, llama3, ChatTemplate::llama3), ChatTemplate::plain);
  EXPECT_EQ(default_template(RecordFormat::prompt_completion, llama3, ChatTemplate::llama3), ChatTemplate::plain);
}

TEST(DataLoader, TemplateOriginSaysWhereEachSourcesTemplateCameFrom) {
  ByteTokenizer tok;
  DataConfig c = config_for({{test::data_path("alpaca/alpaca_tiny.json")}, {test::data_path("tinystories/tinystories_sample.txt")}});
  EXPECT_EQ(DataLoader::training(c, tok).sources()[0]->template_origin(), TemplateOrigin::format);
  c.model_template = ChatTemplate::llama3;
  DataLoader loader = DataLoader::training(c, tok);
  EXPECT_EQ(loader.sources()[0]->chat_template(), ChatTemplate::llama3);
  EXPECT_EQ(loader.sources()[0]->template_origin(), TemplateOrigin::model);
  EXPECT_EQ(loader.sources()[1]->template_origin(), TemplateOrigin::format);
  c.chat_template = ChatTemplate::chatml;
  EXPECT_EQ(DataLoader::training(c, tok).sources()[0]->template_origin(), TemplateOrigin::option);
  EXPECT_EQ(DataLoader::training(c, tok).sources()[0]->chat_template(), ChatTemplate::chatml);
}

}  // namespace
}  // namespace loft::data

namespace loft::data {
namespace {

TEST(DataLoader, DemoDatasetLoadsAsAlpaca) {
  // The checkout this test was built from (tests/datasets/ is two levels below its root).
  const auto demo = test::source_dir() / "examples" / "demo.jsonl";
  test::ByteTokenizer tok;
  DataConfig c;
  c.train = {{demo}};
  c.seq = 1024;
  DataLoader loader = DataLoader::training(c, tok);
  EXPECT_EQ(loader.sources()[0]->format(), RecordFormat::alpaca);
  while (loader.next()) {
  }
  EXPECT_EQ(loader.stats().examples, 36);
  EXPECT_EQ(loader.stats().skipped_bad + loader.stats().truncated + loader.stats().dropped_untrained, 0);
}

}  // namespace
}  // namespace loft::data
