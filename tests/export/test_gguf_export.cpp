// --format gguf and gguf-lora through the command: the file the GGUF reader reads back holds the
// bf16 export's merged weights (q/k rows permuted back), Llama metadata and the tokenizer
// (SentencePiece for stories260K, byte-level BPE with merges for a Llama-3-shaped checkpoint);
// the LoRA file holds the adapter's A/B and alpha, FALQON's the same SVD fit --format peft writes.
#include <fstream>

#include "engine/io/safetensors_checkpoint.h"
#include "engine/tensor/dtype.h"
#include "export/gguf/gguf_encode.h"
#include "export/gguf/gguf_reader.h"
#include "export/gguf/llama_tensors.h"
#include "tests/common/llama3_checkpoint.h"
#include "tests/export/export_fixture.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using gguf::File;

std::vector<float> tensor_values(const fs::path& file, const File& f, const std::string& name) {
  const gguf::TensorInfo& t = f.tensor(name);
  return gguf::decode_tensor(t.type, gguf::read_tensor_bytes(file, f, t));
}

// The inverse of convert_hf_to_gguf.py's permute(w, n_head) on `rows` rows of `cols` values.
std::vector<float> unpermute(const std::vector<float>& p, int64_t rows, int64_t cols, int64_t n_head) {
  const int64_t half = rows / n_head / 2;
  std::vector<float> w(p.size());
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t i = 0; i < half; ++i)
        for (int64_t c = 0; c < cols; ++c)
          w[size_t(((h * 2 + s) * half + i) * cols + c)] = p[size_t(((h * half + i) * 2 + s) * cols + c)];
  return w;
}

// Every tensor of the GGUF file against the bf16 export in `bf16_dir`: same set (plus
// rope_freqs for llama3 rope), shapes reversed, values after undoing the q/k permutation equal
// (`rel` 0) or within `rel` in relative Frobenius norm (another rounding of the same fp32 merge).
// Norms stay F32 in GGUF (as llama.cpp keeps them): compared after bf16 rounding.
void expect_matches_bf16_export(const fs::path& file, const fs::path& bf16_dir, double rel) {
  const File f = gguf::read_gguf(file);
  const SafetensorsCheckpoint ck = SafetensorsCheckpoint::open(bf16_dir);
  const llama::LlamaConfig cfg = llama::load_llama_config(bf16_dir);
  const std::vector<gguf::LlamaTensor> plan = gguf::llama_tensors(cfg);
  const bool rope_freqs = cfg.rope_scaling.type == "llama3";
  ASSERT_EQ(f.tensors.size(), plan.size() + (rope_freqs ? 1 : 0));
  EXPECT_EQ(ck.names().size(), plan.size());
  for (const gguf::LlamaTensor& t : plan) {
    SCOPED_TRACE(t.hf_name);
    EXPECT_EQ(f.tensor(t.gguf_name).ne, std::vector<int64_t>(t.shape.rbegin(), t.shape.rend()));
    std::vector<float> got = tensor_values(file, f, t.gguf_name);
    if (f.tensor(t.gguf_name).type == gguf::TensorType::F32)
      for (float& x : got) x = bf16_to_f32(f32_to_bf16(x));
    if (t.permute != gguf::Permute::None)
      got = unpermute(got, t.shape[0], t.shape[1], gguf::permute_heads(cfg, t.permute));
    const std::vector<float> want = ck.tensor(t.hf_name).to_float_vector();
    if (rel == 0) {
      EXPECT_EQ(got, want);
      continue;
    }
    ASSERT_EQ(got.size(), want.size());
    double diff = 0, ref = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      diff += double(got[i] - want[i]) * double(got[i] - want[i]);
      ref += double(want[i]) * double(want[i]);
    }
    EXPECT_LE(std::sqrt(diff / ref), rel);
  }
}

TEST(GgufExport, StoriesMergedLoraMatchesTheBf16ExportWithSentencePieceVocab) {
  test::TempDir dir;
  test::train_adapter("lora", test::stories_dir(), dir / "a", 2);
  const std::vector<std::string> common{"--model", test::stories_dir().string(), "--adapter", (dir / "a").string()};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), common.begin(), common.end());
    return more;
  };
  test::run_export(with({"--format", "bf16", "--out", (dir / "b").string()}));
  // A folder --out gets model.gguf (default f16); a .gguf --out is the file itself.
  const auto r = test::run_export(with({"--format", "gguf", "--out", (dir / "g").string()}));
  EXPECT_NE(r.out.find("-> gguf f16"), std::string::npos) << r.out;
  ASSERT_TRUE(fs::exists(dir / "g" / "model.gguf"));
  test::run_export(with({"--format", "gguf", "--gguf-type", "bf16", "--out", (dir / "m.gguf").string()}));
  expect_matches_bf16_export(dir / "m.gguf", dir / "b", 0);
  expect_matches_bf16_export(dir / "g" / "model.gguf", dir / "b", 0.005);  // f16 vs bf16 rounding

  const File f = gguf::read_gguf(dir / "g" / "model.gguf");
  EXPECT_EQ(f.at("general.architecture").get_string("a"), "llama");
  EXPECT_EQ(f.at("general.name").get_string("n"), "stories260K-hf-lora");
  EXPECT_EQ(f.at("general.file_type").get<uint32_t>("t"), uint32_t(gguf::FileType::MostlyF16));
  EXPECT_EQ(f.at("tokenizer.ggml.model").get_string("m"), "llama");
  EXPECT_EQ(f.at("tokenizer.ggml.tokens").get_strings("t").size(), 512u);
  EXPECT_EQ(f.at("tokenizer.ggml.scores").get_array<float>("s").size(), 512u);
  EXPECT_EQ(f.at("tokenizer.ggml.bos_token_id").get<uint32_t>("b"), 1u);
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight").type, gguf::TensorType::F16);
  EXPECT_EQ(f.tensor("blk.0.attn_norm.weight").type, gguf::TensorType::F32);

  // q8_0: the projections whose rows are a multiple of 32 quantized, within Q8_0's rounding.
  test::run_export(with({"--format", "gguf", "--gguf-type", "q8_0", "--out", (dir / "q.gguf").string()}));
  expect_matches_bf16_export(dir / "q.gguf", dir / "b", 0.01);
  EXPECT_EQ(gguf::read_gguf(dir / "q.gguf").tensor("blk.0.attn_q.weight").type, gguf::TensorType::Q8_0);
}

TEST(GgufExport, Llama3ShapedBaseHasBpeVocabMergesAndRopeFreqs) {
  LOFT_REQUIRE_DATA("tokenizers/llama3");
  test::TempDir dir;
  test::write_llama3_checkpoint(dir / "l3", {.tied = true});
  test::run_export({"--model", (dir / "l3").string(), "--format", "bf16", "--out", (dir / "b").string()});
  const auto r = test::run_export({"--model", (dir / "l3").string(), "--format", "gguf", "--gguf-type", "bf16",
                                   "--out", (dir / "l3.gguf").string()});
  EXPECT_NE(r.out.find("base model -> gguf bf16"), std::string::npos) << r.out;
  expect_matches_bf16_export(dir / "l3.gguf", dir / "b", 0);
  const File f = gguf::read_gguf(dir / "l3.gguf");
  EXPECT_EQ(f.at("tokenizer.ggml.model").get_string("m"), "gpt2");
  EXPECT_EQ(f.at("tokenizer.ggml.tokens").get_strings("t").size(), size_t(test::kLlama3Vocab));
  EXPECT_GT(f.at("tokenizer.ggml.merges").get_strings("m").size(), 100000u);
  EXPECT_EQ(f.at("tokenizer.ggml.bos_token_id").get<uint32_t>("b"), uint32_t(test::kBeginOfText));
  EXPECT_EQ(f.at("tokenizer.ggml.eos_token_id").get<uint32_t>("e"), uint32_t(test::kEotId));  // Instruct's
  EXPECT_NE(f.at("tokenizer.chat_template").get_string("c").find("start_header_id"), std::string::npos);
  EXPECT_NO_THROW(f.tensor("rope_freqs.weight"));
  EXPECT_THROW(f.tensor("output.weight"), Error) << "tied: llama.cpp reuses token_embd";
}

TEST(GgufExport, LoraAdapterRoundTripsAandBandAlpha) {
  test::TempDir dir;
  test::train_adapter("lora", test::stories_dir(), dir / "a", 2);
  const auto r = test::run_export({"--model", test::stories_dir().string(), "--adapter", (dir / "a").string(),
                                   "--format", "gguf-lora", "--out", (dir / "o").string()});
  EXPECT_NE(r.out.find("gguf-lora: gap 0%"), std::string::npos) << r.out;  // its own A and B
  const fs::path file = dir / "o" / "adapter.gguf";
  const File f = gguf::read_gguf(file);
  const PeftAdapter a = load_peft_adapter(dir / "a");
  const llama::LlamaConfig cfg = llama::load_llama_config(test::stories_dir());
  EXPECT_EQ(f.at("general.type").get_string("t"), "adapter");
  EXPECT_EQ(f.at("adapter.lora.alpha").get<float>("a"), a.alpha);
  ASSERT_EQ(f.tensors.size(), 2 * a.modules.size());
  EXPECT_EQ(a.modules.size(), size_t(7 * cfg.num_layers));
  for (const gguf::LlamaTensor& t : gguf::llama_tensors(cfg)) {
    const auto m = a.modules.find(t.hf_name.substr(0, t.hf_name.size() - 7));
    if (m == a.modules.end()) continue;
    SCOPED_TRACE(t.hf_name);
    EXPECT_EQ(f.tensor(t.gguf_name + ".lora_a").type, gguf::TensorType::F32);
    EXPECT_EQ(tensor_values(file, f, t.gguf_name + ".lora_a"), m->second.first.to_float_vector());
    std::vector<float> b = tensor_values(file, f, t.gguf_name + ".lora_b");
    if (t.permute != gguf::Permute::None) b = unpermute(b, t.shape[0], a.rank, gguf::permute_heads(cfg, t.permute));
    EXPECT_EQ(b, m->second.second.to_float_vector());
  }
}

TEST(GgufExport, FalqonLoraIsThePeftExportsFit) {
  test::TempDir dir;
  test::train_adapter("falqon", test::stories_dir(), dir / "a", 2);
  const std::vector<std::string> common{"--model", test::stories_dir().string(), "--adapter", (dir / "a").string()};
  auto peft = common, lora = common, merged = common;
  peft.insert(peft.end(), {"--format", "peft", "--out", (dir / "p").string()});
  lora.insert(lora.end(), {"--format", "gguf-lora", "--out", (dir / "a.gguf").string()});
  merged.insert(merged.end(), {"--format", "gguf", "--out", (dir / "m.gguf").string()});
  test::run_export(peft);
  const auto r = test::run_export(lora);
  EXPECT_NE(r.out.find("gguf-lora: falqon adapter, rank 4, alpha 4 (best rank-4 fit"), std::string::npos) << r.out;
  const PeftAdapter p = load_peft_adapter(dir / "p");
  const File f = gguf::read_gguf(dir / "a.gguf");
  EXPECT_EQ(f.at("adapter.lora.alpha").get<float>("a"), p.alpha);
  EXPECT_EQ(tensor_values(dir / "a.gguf", f, "blk.1.ffn_down.weight.lora_a"),
            p.modules.at("model.layers.1.mlp.down_proj").first.to_float_vector());
  EXPECT_NE(test::run_export(merged).out.find("FALQON projections decoded exactly"), std::string::npos);
}

TEST(GgufExport, OutputFileContract) {
  test::TempDir dir;
  const std::string m = test::stories_dir().string();
  const auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"export", "--model", m});
    return test::run_cli_captured(args);
  };
  EXPECT_EQ(run({"--format", "bf16", "--gguf-type", "f16", "--out", (dir / "x").string()}).code, 2);
  EXPECT_EQ(run({"--format", "gguf", "--gguf-type", "q4_k", "--out", (dir / "x").string()}).code, 2);
  EXPECT_EQ(run({"--format", "gguf-lora", "--out", (dir / "x.gguf").string()}).code, 2) << "needs --adapter";
  std::ofstream(dir / "m.gguf") << "old";
  auto r = run({"--format", "gguf", "--out", (dir / "m.gguf").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "--overwrite"));
  r = run({"--format", "gguf", "--out", (dir / "m.gguf").string(), "--overwrite"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::contains(r.err, "is not a GGUF file")) << r.err;
  EXPECT_EQ(test::read_text(dir / "m.gguf"), "old");
  std::ofstream(dir / "m.gguf") << "GGUF: an earlier export, as far as --overwrite can tell";
  r = run({"--format", "gguf", "--out", (dir / "m.gguf").string(), "--overwrite"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NO_THROW(gguf::read_gguf(dir / "m.gguf"));
  EXPECT_EQ(run({"--format", "gguf", "--out", (dir / "no" / "m.gguf").string()}).code, 2);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1)
      << "only m.gguf: no temporary left behind";
}

}  // namespace
}  // namespace loft
