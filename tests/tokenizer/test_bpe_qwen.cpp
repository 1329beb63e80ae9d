// The real Qwen 3 tokenizer.json (byte-level BPE with an NFC normalizer and a Split pre-tokenizer
// that cuts digits one by one; tests/data/tokenizers/qwen3) against independent references:
// llama.cpp's test strings and the ids Hugging Face gave for them (models/ggml-vocab-qwen2.gguf.inp
// and .out: Qwen's BPE is the same since Qwen 1.5), the special tokens of the chat format, NFC,
// and decode(encode(text)) on the 2,991 strings of hf_tokenizer_reference.jsonl.zst.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>

#include "datasets/byte_stream.h"
#include "tests/common/test_util.h"
#include "tests/tokenizer/bpe_test_util.h"
#include "tokenizer/tokenizer.h"

namespace loft {
namespace {

const Tokenizer& qwen3() {
  static const std::unique_ptr<Tokenizer> tok = load_tokenizer(test::data_path("tokenizers/qwen3"));
  return *tok;
}

std::string read_all(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string nfc(const std::string& s) {
  auto* out = reinterpret_cast<char*>(utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str())));
  std::string r(out);
  std::free(out);
  return r;
}

// llama.cpp's format: the texts separated by "\n__ggml_vocab_test__\n", one line of ids per text.
TEST(BpeQwen, LlamaCppVocabTestIds) {
  const std::string inp = read_all(test::data_path("reference/llamacpp_vocab_qwen2.inp"));
  std::istringstream out(read_all(test::data_path("reference/llamacpp_vocab_qwen2.out")));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t at = 0, next; (next = inp.find(sep, at)) != std::string::npos; at = next + sep.size())
    texts.push_back(inp.substr(at, next - at));
  ASSERT_EQ(texts.size(), 46u);
  size_t i = 0;
  for (std::string line; std::getline(out, line); ++i) {
    ASSERT_LT(i, texts.size());
    SCOPED_TRACE("text: " + nlohmann::json(texts[i]).dump());
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    EXPECT_EQ(qwen3().encode(texts[i]), ids);
    EXPECT_EQ(qwen3().decode(ids), texts[i]);
    EXPECT_EQ(test::stream_all(qwen3(), ids), texts[i]);
  }
  EXPECT_EQ(i, texts.size());
}

TEST(BpeQwen, SpecialTokensAndIds) {
  const Tokenizer& tok = qwen3();
  EXPECT_EQ(tok.kind(), "bpe byte-level");
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.bos_id(), -1) << "bos_token is null";
  EXPECT_FALSE(tok.adds_bos());
  EXPECT_EQ(tok.eos_id(), 151645) << "tokenizer_config.json's eos_token <|im_end|>";
  EXPECT_EQ(tok.pad_id(), 151643);
  EXPECT_EQ(tok.special_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok.special_id("<|endoftext|>"), 151643);
  // <think> is an added token that is not special: matched whole, kept by skip-special decoding.
  const std::vector<int32_t> ids = tok.encode("<|im_start|>user\nHi<|im_end|>\n<think>\n\n</think>\n\nOK");
  EXPECT_EQ(ids, (std::vector<int32_t>{151644, 872, 198, 13048, 151645, 198, 151667, 271, 151668, 271, 3925}));
  EXPECT_EQ(tok.decode_skip_special(ids), "user\nHi\n<think>\n\n</think>\n\nOK");
  EXPECT_EQ(tok.added_tokens().size(), 26u);
  // Digits one by one; whitespace runs, code and CJK as the pre-tokenizer cuts them.
  EXPECT_EQ(tok.encode("12345"), (std::vector<int32_t>{16, 17, 18, 19, 20}));
  EXPECT_EQ(tok.decode(tok.encode("def f(x):\n\treturn x  **  2\n\n\n")), "def f(x):\n\treturn x  **  2\n\n\n");
}

// The NFC normalizer composes before BPE: a decomposed "é" is the composed one's token, and
// decoding gives the normalized text, as tokenizers does.
TEST(BpeQwen, NfcNormalizes) {
  const Tokenizer& tok = qwen3();
  EXPECT_EQ(tok.encode("caf" "e\xCC\x81"), tok.encode("caf\xC3\xA9"));
  EXPECT_EQ(tok.decode(tok.encode("caf" "e\xCC\x81")), "caf\xC3\xA9");
  EXPECT_EQ(tok.encode("\xE2\x84\xAB"), tok.encode("\xC3\x85")) << "Angstrom sign -> A with ring";
  EXPECT_EQ(tok.encode("<|im_start|>e\xCC\x81"), (std::vector<int32_t>{151644, tok.encode("\xC3\xA9")[0]}));
}

TEST(BpeQwen, DecodeOfEncodeIsTheNormalizedTextOn2991Strings) {
  const auto in = data::open_byte_stream(test::tokenizer_test_data("hf_tokenizer_reference.jsonl.zst"));
  std::string all, buf(1 << 16, '\0');
  for (size_t n; (n = in->read(buf.data(), buf.size())) > 0;) all.append(buf, 0, n);
  std::istringstream lines(all);
  int rows = 0, bad = 0;
  for (std::string line; std::getline(lines, line); ++rows) {
    const std::string text = nlohmann::json::parse(line)["text"];
    if (qwen3().decode(qwen3().encode(text)) != nfc(text) && ++bad <= 3)
      ADD_FAILURE() << "row " << rows << ": " << nlohmann::json(text).dump();
  }
  EXPECT_EQ(rows, 2991);
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace loft
