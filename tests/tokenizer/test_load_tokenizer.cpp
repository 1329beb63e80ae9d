// load_tokenizer / load_sentencepiece: real model folders load (tokenizer.json first, as
// transformers); missing, unsupported and corrupt tokenizer files give one-line errors naming the
// folder or file, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "engine/core/error.h"
#include "tests/common/test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

using ::testing::HasSubstr;

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string load_error(const std::filesystem::path& dir) {
  try {
    load_tokenizer(dir);
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << "load_tokenizer(" << dir << ") did not throw";
  return "";
}

// Both test models carry tokenizer.json beside tokenizer.model: transformers (and loft) take the
// tokenizer.json, whose decode writes special tokens out.
TEST(LoadTokenizer, ModelFoldersPreferTheirTokenizerJson) {
  LOFT_REQUIRE_DATA("models/wide-random");
  for (const char* dir : {"models/stories260K-hf", "models/wide-random"}) {
    const auto tok = load_tokenizer(test::data_path(dir));
    EXPECT_EQ(tok->kind(), "bpe sentencepiece-style") << dir;
    EXPECT_EQ(tok->vocab_size(), 512) << dir;
    EXPECT_EQ(tok->bos_id(), 1);
    EXPECT_EQ(tok->eos_id(), 2);
    EXPECT_EQ(tok->encode("Once upon a time"), (std::vector<int32_t>{403, 407, 261, 378}));
    EXPECT_EQ(tok->decode({1, 403, 407, 261, 378, 2}), "<s> Once upon a time</s>");
    EXPECT_EQ(tok->decode_skip_special({1, 403, 407, 261, 378, 2}), "Once upon a time");
  }
}

// Without tokenizer.json the SentencePiece model loads; BOS follows config.json's bos_token_id.
TEST(LoadTokenizer, FolderWithOnlyTokenizerModelUsesSentencePiece) {
  test::TempDir dir;
  write_file(dir / "tokenizer.model", read_file(test::data_path("models/stories260K/tok512.model")));
  auto tok = load_tokenizer(dir.path());
  EXPECT_EQ(tok->kind(), "sentencepiece");
  EXPECT_EQ(tok->decode({1, 403, 407, 261, 378, 2}), "Once upon a time");
  EXPECT_TRUE(tok->adds_bos());  // no config.json: SentencePiece's own BOS
  write_file(dir / "config.json", R"({"bos_token_id": 1, "eos_token_id": 2})");
  EXPECT_EQ(load_tokenizer(dir.path())->encode_with_special("Once"), (std::vector<int32_t>{1, 403}));
  write_file(dir / "config.json", R"({"bos_token_id": null, "eos_token_id": 2})");
  tok = load_tokenizer(dir.path());
  EXPECT_FALSE(tok->adds_bos());
  EXPECT_EQ(tok->encode_with_special("Once"), (std::vector<int32_t>{403}));
}

TEST(LoadTokenizer, EmptyFolderIsNamed) {
  test::TempDir dir;
  const std::string msg = load_error(dir.path());
  EXPECT_THAT(msg, HasSubstr(dir.path().string()));
  EXPECT_THAT(msg, HasSubstr("no tokenizer"));
}

TEST(LoadTokenizer, MissingFolderIsNamed) {
  test::TempDir dir;
  const std::string msg = load_error(dir / "nope");
  EXPECT_THAT(msg, HasSubstr((dir / "nope").string()));
  EXPECT_THAT(msg, HasSubstr("does not exist"));
}

TEST(LoadTokenizer, OnlyTokenizerJsonLoadsIt) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  test::TempDir dir;
  write_file(dir / "tokenizer.json", read_file(test::data_path("tokenizers/llama3/tokenizer.json")));
  EXPECT_EQ(load_tokenizer(dir.path())->kind(), "bpe byte-level");
  write_file(dir / "tokenizer.json", R"({"model": {"type": "BPE"}})");
  const std::string msg = load_error(dir.path());
  EXPECT_THAT(msg, HasSubstr((dir / "tokenizer.json").string()));
  EXPECT_THAT(msg, HasSubstr("\"vocab\" must be an object"));
}

TEST(LoadTokenizer, TokenizerJsonWinsOverTokenizerModel) {
  test::TempDir dir;
  write_file(dir / "tokenizer.json", "{}");
  const auto tok512 = test::data_path("models/stories260K/tok512.model");
  write_file(dir / "tokenizer.model", read_file(tok512));
  // The broken tokenizer.json is what loads (and fails), as transformers would use it.
  EXPECT_THAT(load_error(dir.path()), HasSubstr("model: missing"));
}

TEST(LoadTokenizer, CorruptModelFilesAreNamed) {
  const std::string real = read_file(test::data_path("tokenizers/llama2/tokenizer.model"));
  ASSERT_GT(real.size(), 1000u);
  std::mt19937 rng(99);
  std::string garbage(4096, '\0');
  for (char& c : garbage) c = char(rng() & 0xFF);
  const std::pair<const char*, std::string> corrupt[] = {
      {"empty", ""},
      {"text", "this is not a protobuf\n"},
      {"random bytes", garbage},
      {"truncated", real.substr(0, real.size() / 2)},
      {"tail only", real.substr(real.size() / 2)},
  };
  for (const auto& [what, bytes] : corrupt) {
    test::TempDir dir;
    const auto file = dir / "tokenizer.model";
    write_file(file, bytes);
    const std::string msg = load_error(dir.path());
    EXPECT_THAT(msg, HasSubstr(file.string())) << what;
    EXPECT_THAT(msg, HasSubstr("SentencePiece")) << what;
  }
}

TEST(LoadTokenizer, TokenizerModelThatIsAFolderIsNamed) {
  test::TempDir dir;
  std::filesystem::create_directory(dir / "tokenizer.model");
  EXPECT_THAT(load_error(dir.path()), HasSubstr((dir / "tokenizer.model").string()));
}

TEST(LoadSentencePiece, MissingFileIsNamed) {
  test::TempDir dir;
  try {
    load_sentencepiece(dir / "missing.model");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir / "missing.model").string()));
  }
}

}  // namespace
}  // namespace loft
