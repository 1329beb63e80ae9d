// Writes the merged model as Hugging Face safetensors, streamed from a MergedSource one tensor at
// a time: bf16 (every tensor bf16), or FP8 (the 7 projections of every layer E4M3 with scales in
// the scheme's layout, embeddings/norms/lm_head bf16). Shards hold at most max_shard_bytes of data
// (a projection stays with its scale): one shard is `model.safetensors`, more are
// `model-0000i-of-0000n.safetensors` with `model.safetensors.index.json`
// ({"metadata": {"total_size"}, "weight_map"}), as transformers' save_pretrained names them.
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>

#include "export/merged_source.h"
#include "models/llama/fp8_config.h"

namespace loft::exporter {

struct ModelWriteOptions {
  std::optional<llama::Fp8Checkpoint> fp8;  // nullopt: bf16
  uint64_t max_shard_bytes = 5'000'000'000;  // transformers' default "5GB"
  std::ostream* progress = nullptr;          // the progress line with ETA (stderr)
};

struct ModelWriteReport {
  int64_t shards = 0;
  uint64_t bytes = 0;  // tensor data written
  // ||written − merged||_F / ||merged||_F over all projections: the quantization effect (FP8:
  // the E4M3 rounding; bf16: the bf16 rounding). 0 for FALQON's own codes.
  double projection_rel_error = 0;
  int64_t exact_fp8 = 0;  // projections written with the trained codes bit for bit (FALQON)
};

ModelWriteReport write_merged_model(const MergedSource& src, const std::filesystem::path& out,
                                    const ModelWriteOptions& opt);

}  // namespace loft::exporter
