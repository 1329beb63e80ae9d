// Record readers: JSONL, JSON arrays, text, each plain and zstd-compressed; positions and seeks;
// edge cases (empty files, CRLF, 1 MB records, truncated .zst); the real files in tests/data.
#include <gtest/gtest.h>

#include "datasets/record_reader.h"
#include "engine/core/error.h"
#include "tests/common/test_util.h"
#include "tests/datasets/fake_tokenizer.h"

namespace loft::data {
namespace {

using test::TempDir;
using test::write_file;

struct Read {
  std::vector<std::string> texts;
  std::vector<uint64_t> lines;
  std::vector<ReaderPos> starts;
};

Read read_all(const std::filesystem::path& path, size_t max_bytes = 1 << 24) {
  auto reader = open_record_reader(path, max_bytes);
  Read r;
  RawRecord rec;
  while (reader->next(rec)) {
    r.texts.push_back(rec.text);
    r.lines.push_back(rec.line());
    r.starts.push_back(rec.start);
  }
  EXPECT_FALSE(reader->next(rec)) << "a finished reader stays finished";
  return r;
}

void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(RecordReaders, JsonlWithCrlfBlankLinesAndNoFinalNewline) {
  TempDir dir;
  write_file(dir / "a.jsonl", "{\"a\":1}\r\n\r\n  \n{\"a\":2}\n{\"a\":3}");
  const Read r = read_all(dir / "a.jsonl");
  EXPECT_EQ(r.texts, (std::vector<std::string>{"{\"a\":1}", "{\"a\":2}", "{\"a\":3}"}));
  EXPECT_EQ(r.lines, (std::vector<uint64_t>{1, 4, 5}));
}

TEST(RecordReaders, EmptyFilesHoldNoRecords) {
  TempDir dir;
  for (const char* name : {"e.jsonl", "e.json", "e.txt"}) {
    write_file(dir / name, "");
    EXPECT_TRUE(read_all(dir / name).texts.empty()) << name;
  }
  write_file(dir / "e.jsonl.zst", test::zstd_compress(""));
  EXPECT_TRUE(read_all(dir / "e.jsonl.zst").texts.empty());
  write_file(dir / "b.json", " [ ] ");
  EXPECT_TRUE(read_all(dir / "b.json").texts.empty());
}

TEST(RecordReaders, JsonArrayElementsWithNestingStringsAndEscapes) {
  TempDir dir;
  const std::string e1 = R"({"s": "a ] } , [ { \" \\", "n": [1, {"x": []}]})";
  const std::string e2 = "{\n  \"multi\": \"line\"\n}";
  write_file(dir / "a.json", "\xEF\xBB\xBF[\n  " + e1 + " ,\n" + e2 + ",\n \"str]\" , 42 ,{}]\n");
  const Read r = read_all(dir / "a.json");
  EXPECT_EQ(r.texts, (std::vector<std::string>{e1, e2, "\"str]\"", "42", "{}"}));
  EXPECT_EQ(r.lines, (std::vector<uint64_t>{2, 3, 6, 6, 6}));
}

TEST(RecordReaders, JsonArrayStructureErrorsNameFileAndLine) {
  TempDir dir;
  write_file(dir / "open.json", "[{\"a\": 1},\n{\"a\": 2}");
  expect_error([&] { read_all(dir / "open.json"); }, "open.json:2: the JSON array is not closed");
  write_file(dir / "cut.json", "[{\"a\": 1},\n{\"a\": \"x");
  expect_error([&] { read_all(dir / "cut.json"); }, "cut.json:2: the array element starting here is not closed");
  write_file(dir / "nocomma.json", "[{\"a\": 1}\n{\"a\": 2}]");
  expect_error([&] { read_all(dir / "nocomma.json"); }, "nocomma.json:2: expected ',' or ']'");
  write_file(dir / "obj.json", "x");
  expect_error([&] { read_all(dir / "obj.json"); }, "obj.json:1: expected '['");
}

TEST(RecordReaders, DotJsonHoldingJsonlIsReadAsJsonl) {
  TempDir dir;
  write_file(dir / "l.json", "{\"a\":1}\n{\"a\":2}\n");
  EXPECT_EQ(read_all(dir / "l.json").texts.size(), 2u);
}

TEST(RecordReaders, TextLinesAndDocuments) {
  TempDir dir;
  write_file(dir / "lines.txt", "first line\r\n\n   \nsecond line\nlast");
  EXPECT_EQ(read_all(dir / "lines.txt").texts, (std::vector<std::string>{"first line", "second line", "last"}));
  write_file(dir / "docs.txt", "Doc one\nstill one\n<|endoftext|>\n\n<|endoftext|>Doc two<|endoftext|>\nDoc three\n");
  const Read r = read_all(dir / "docs.txt");
  EXPECT_EQ(r.texts, (std::vector<std::string>{"Doc one\nstill one", "Doc two", "Doc three"}));
}

TEST(RecordReaders, RecordsOverTheSizeLimitAreErrorsWithTheLine) {
  TempDir dir;
  write_file(dir / "big.jsonl", "{}\n{\"t\": \"" + std::string(5000, 'x') + "\"}\n");
  expect_error([&] { read_all(dir / "big.jsonl", 1000); }, "big.jsonl:2: line is longer than 1000 bytes");
  write_file(dir / "big.json", "[{},\n{\"t\": \"" + std::string(5000, 'x') + "\"}]");
  expect_error([&] { read_all(dir / "big.json", 1000); }, "big.json:2: array element is longer than 1000");
}

TEST(RecordReaders, OneMegabyteRecordsPass) {
  TempDir dir;
  const std::string big = "{\"text\": \"" + std::string(1 << 20, 'y') + "\"}";
  write_file(dir / "m.jsonl", "{}\n" + big + "\n{}\n");
  write_file(dir / "m.json", "[{}, " + big + ", {}]");
  for (const char* name : {"m.jsonl", "m.json"}) {
    const Read r = read_all(dir / name);
    ASSERT_EQ(r.texts.size(), 3u) << name;
    EXPECT_EQ(r.texts[1], big) << name;
  }
}

TEST(RecordReaders, UnsupportedOrMissingFilesAreUsageErrors) {
  TempDir dir;
  write_file(dir / "x.csv", "a,b\n");
  EXPECT_THROW(open_record_reader(dir / "x.csv", 100), UsageError);
  EXPECT_THROW(open_record_reader(dir / "missing.jsonl", 100), UsageError);
}

// Every record read again from its start position gives the same text, plain and compressed,
// going backwards too (a zstd stream restarts from its beginning for that).
TEST(RecordReaders, SeekToARecordStartReadsItAgain) {
  TempDir dir;
  std::string jsonl, array = "[", text;
  for (int i = 0; i < 3000; ++i) {
    const std::string rec = "{\"i\": " + std::to_string(i) + ", \"pad\": \"" + std::string(size_t(i % 97), 'p') + "\"}";
    jsonl += rec + (i % 3 ? "\n" : "\r\n");
    array += (i ? ",\n" : "") + rec;
    text += "line " + std::to_string(i) + "\n";
  }
  array += "]";
  write_file(dir / "s.jsonl", jsonl);
  write_file(dir / "s.json", array);
  write_file(dir / "s.txt", text);
  write_file(dir / "s.jsonl.zst", test::zstd_compress(jsonl));
  write_file(dir / "s.json.zst", test::zstd_compress(array));
  for (const char* name : {"s.jsonl", "s.json", "s.txt", "s.jsonl.zst", "s.json.zst"}) {
    const Read all = read_all(dir / name);
    ASSERT_EQ(all.texts.size(), 3000u) << name;
    auto reader = open_record_reader(dir / name, 1 << 20);
    RawRecord rec;
    for (size_t i : {2999, 17, 1500, 0, 2998, 1}) {
      reader->seek(all.starts[i]);
      ASSERT_TRUE(reader->next(rec)) << name;
      EXPECT_EQ(rec.text, all.texts[i]) << name << " record " << i;
      EXPECT_EQ(rec.line(), all.lines[i]) << name;
      EXPECT_EQ(rec.start, all.starts[i]) << name;
    }
    // Resuming from a position() continues with the next record.
    reader->seek(all.starts[41]);
    reader->next(rec);
    const ReaderPos after = reader->position();
    auto other = open_record_reader(dir / name, 1 << 20);
    other->seek(after);
    ASSERT_TRUE(other->next(rec));
    EXPECT_EQ(rec.text, all.texts[42]) << name;
  }
  const Read compressed = read_all(dir / "s.jsonl.zst"), plain = read_all(dir / "s.jsonl");
  EXPECT_EQ(compressed.texts, plain.texts);
  EXPECT_EQ(compressed.lines, plain.lines);
}

TEST(RecordReaders, TruncatedOrCorruptZstdIsAnErrorNamingTheFile) {
  TempDir dir;
  std::string jsonl;
  for (int i = 0; i < 2000; ++i) jsonl += "{\"i\": " + std::to_string(i * 7919 % 10007) + "}\n";
  const std::string z = test::zstd_compress(jsonl);
  write_file(dir / "cut.jsonl.zst", z.substr(0, z.size() / 2));
  expect_error([&] { read_all(dir / "cut.jsonl.zst"); }, "cut.jsonl.zst: truncated zstd stream");
  write_file(dir / "end.jsonl.zst", z.substr(0, z.size() - 3));
  expect_error([&] { read_all(dir / "end.jsonl.zst"); }, "end.jsonl.zst: ");
  write_file(dir / "junk.jsonl.zst", "this is not zstd at all\n");
  expect_error([&] { read_all(dir / "junk.jsonl.zst"); }, "junk.jsonl.zst: corrupt zstd data");
}

TEST(RecordReaders, RealSharedDataFiles) {
  const Read alpaca = read_all(test::data_path("alpaca/alpaca_small.json"));
  EXPECT_EQ(alpaca.texts.size(), 2000u);
  EXPECT_EQ(alpaca.lines[0], 2u);
  EXPECT_EQ(read_all(test::data_path("alpaca/alpaca_tiny.json")).texts.size(), 100u);
  const Read gsm = read_all(test::data_path("gsm8k/train.jsonl"));
  EXPECT_EQ(gsm.texts.size(), 7473u);
  EXPECT_EQ(gsm.lines.back(), 7473u);
  const Read stories = read_all(test::data_path("tinystories/tinystories_sample.txt"));
  ASSERT_EQ(stories.texts.size(), 5u);
  EXPECT_TRUE(stories.texts[0].starts_with("Once upon a time there was a little boy named Ben."));
  EXPECT_TRUE(stories.texts[0].ends_with("And that's how Ben found an amazing vase in the store!"));
  for (const auto& s : stories.texts) EXPECT_EQ(s.find("<|endoftext|>"), std::string::npos);
}

}  // namespace
}  // namespace loft::data
