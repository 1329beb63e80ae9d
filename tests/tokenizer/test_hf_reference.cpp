// loft's tokenizers against Hugging Face on 2,991 strings (tests/tokenizer/data/hf_tokenizer_reference.md says how
// they were made): the Llama 3 tokenizer.json, Qwen 3's when its ids are there, and the stories260K one (SentencePiece-style BPE)
// must give exactly the ids `tokenizers` gives, with and without transformers' special tokens, and
// decode them back as `tokenizers` does.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "datasets/byte_stream.h"
#include "tests/common/test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

std::vector<nlohmann::json> reference() {
  const fs::path file =
      test::source_dir() / "tests" / "tokenizer" / "data" / "hf_tokenizer_reference.jsonl.zst";
  const auto in = data::open_byte_stream(file);
  std::string all, buf(1 << 16, '\0');
  for (size_t n; (n = in->read(buf.data(), buf.size())) > 0;) all.append(buf, 0, n);
  std::vector<nlohmann::json> rows;
  for (size_t at = 0; at < all.size();) {
    const size_t end = all.find('\n', at);
    rows.push_back(nlohmann::json::parse(all.substr(at, end - at)));
    at = end == std::string::npos ? all.size() : end + 1;
  }
  return rows;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// Counts mismatches over all rows and reports the first few in full.
void check(const Tokenizer& tok, const std::string& ids_key, const std::string& special_key,
           const std::string& decoded_key) {
  const auto rows = reference();
  ASSERT_EQ(rows.size(), 2991u);
  int bad_ids = 0, bad_special = 0, bad_decode = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string text = rows[i]["text"];
    const auto want = rows[i][ids_key].get<std::vector<int32_t>>();
    const auto got = tok.encode(text);
    if (got != want && ++bad_ids <= 5)
      ADD_FAILURE() << "row " << i << " " << nlohmann::json(text).dump() << "\n want " << show(want) << "\n  got "
                    << show(got);
    if (!special_key.empty()) {
      const auto want_s = rows[i][special_key].get<std::vector<int32_t>>();
      if (tok.encode_with_special(text) != want_s && ++bad_special <= 3)
        ADD_FAILURE() << "row " << i << " with special tokens: want " << show(want_s);
    }
    const std::string want_text = rows[i][decoded_key];
    if (tok.decode(want) != want_text && ++bad_decode <= 3)
      ADD_FAILURE() << "row " << i << " decode: want " << nlohmann::json(want_text).dump() << " got "
                    << nlohmann::json(tok.decode(want)).dump();
  }
  EXPECT_EQ(bad_ids, 0);
  EXPECT_EQ(bad_special, 0);
  EXPECT_EQ(bad_decode, 0);
}

TEST(HfReference, Llama3TokenizerJsonMatchesTokenizersOn2991Strings) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  const auto tok = load_tokenizer(test::data_path("tokenizers/llama3"));
  EXPECT_FALSE(tok->adds_bos());
  check(*tok, "llama3_ids", "", "llama3_decoded");
}

// Qwen 3's ids join the file when scripts/dev/hf_tokenize.py has been run on
// tests/data/tokenizers/qwen3 (hf_tokenizer_reference.md); until then test_bpe_qwen.cpp checks it
// against llama.cpp's references and round trips.
TEST(HfReference, Qwen3TokenizerJsonMatchesTokenizersOn2991Strings) {
  if (!reference().front().contains("qwen3_ids"))
    GTEST_SKIP() << "hf_tokenizer_reference.jsonl.zst has no qwen3_ids yet (scripts/dev/hf_tokenize.py "
                    "tests/data/tokenizers/qwen3 on a machine with tokenizers)";
  const auto tok = load_tokenizer(test::data_path("tokenizers/qwen3"));
  check(*tok, "qwen3_ids", "qwen3_special_ids", "qwen3_decoded");
}

TEST(HfReference, Stories260KTokenizerJsonMatchesTokenizersOn2991Strings) {
  const auto tok = load_tokenizer(test::data_path("models/stories260K-hf"));
  EXPECT_TRUE(tok->adds_bos());
  check(*tok, "stories_ids", "stories_special_ids", "stories_decoded");
}

}  // namespace
}  // namespace loft
