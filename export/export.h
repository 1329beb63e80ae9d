// `loft export`: the trained model (or, without an adapter, the base) written in the formats
// people serve, one tensor at a time into an atomic output folder (docs/export.md):
//   fp8        Hugging Face safetensors with FP8 E4M3 projections: compressed-tensors
//              float-quantized per channel (default, FP8_DYNAMIC), per tensor, or transformers'
//              fp8 128x128 blocks (--fp8-layout channel|tensor|block); FALQON's own codes exactly
//   bf16       merged bf16 safetensors, sharded with an index
//   peft       a PEFT LoRA adapter reproducing the trained model (FALQON: an SVD fit), gap reported
//   gguf       one llama.cpp GGUF v3 file of the merged model (--gguf-type f16|bf16|q8_0|f32)
//   gguf-lora  the adapter alone as a llama.cpp LoRA GGUF (the --format peft adapter, same gap
//              report); both write `--out` itself when it ends in .gguf, else DIR/model.gguf or
//              DIR/adapter.gguf (export/gguf_export.h)
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace loft::exporter {

struct ExportOptions {
  std::filesystem::path model, adapter, out;
  std::string method;               // overrides the adapter's recorded method ("" = recorded)
  std::string format;               // fp8, bf16, peft, gguf, gguf-lora
  std::string fp8_layout = "channel";
  std::string gguf_type;            // f32, f16, bf16, q8_0 ("" = f16 for gguf, f32 for gguf-lora)
  bool overwrite = false;
  uint64_t max_shard_bytes = 5'000'000'000;
};

// "fp8", "bf16", "peft", "gguf", "gguf-lora".
const std::vector<std::string>& export_formats();

// Usage errors (exit 2), before anything is read: an unknown --format, --fp8-layout or
// --gguf-type, --fp8-layout or --gguf-type with another format, peft/gguf-lora without --adapter,
// --max-shard-size 0.
void check_export_options(const ExportOptions& opt);

// Runs the export: a summary to `log` (stdout), the progress line with ETA to `progress`
// (stderr, may be null). Errors name the file, tensor or option; the output folder appears only
// when everything was written.
void run_export(const ExportOptions& opt, std::ostream& log, std::ostream* progress);

}  // namespace loft::exporter
