// `loft export --format gguf|gguf-lora`: the trained model, or its adapter alone, as one llama.cpp
// GGUF v3 file, written natively by the export/gguf library (no Python, no subprocess).
//  - gguf: every tensor of the MergedSource streamed into gguf::LlamaWriter (q/k rows permuted as
//    llama.cpp expects, Llama metadata, the base folder's tokenizer and chat template) as
//    --gguf-type f16 (default), bf16, q8_0 or f32. FALQON's trained E4M3 codes are decoded exactly
//    (code x scale in fp32; GGUF has no FP8 type) and then written as that type.
//  - gguf-lora: the adapter `--format peft` computes (fit_peft_export: LoRA/QLoRA/HALO's own A and
//    B, FALQON's SVD fit), with the same gap report and warning, into gguf::LoraWriter
//    (.lora_a/.lora_b, adapter.lora.alpha = lora_alpha: llama.cpp applies W + alpha/r·B·A); f32 by
//    default, so the A/B values are kept exactly.
// Where the file goes: `--out` itself when it ends in .gguf (a llama.cpp user passes a file path),
// else `--out`/model.gguf or `--out`/adapter.gguf inside an atomic output folder. Either way the
// file appears only when complete (temp + rename); an existing one is replaced only with
// --overwrite.
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>

#include "export/export.h"
#include "export/gguf/llama_tensors.h"
#include "export/merged_source.h"
#include "export/peft_export.h"

namespace loft::exporter {

bool is_gguf_format(const std::string& format);  // gguf, gguf-lora

// --out names the file itself (it ends in .gguf, any case), not a folder.
bool gguf_out_is_file(const std::filesystem::path& out);

// The --gguf-type in effect: as given, else f16 for gguf and f32 for gguf-lora.
gguf::OutType gguf_out_type(const ExportOptions& opt);

// The whole GGUF export (options already checked): output placement, the source, the writer, the
// summary to `log` and the progress line to `progress`.
void run_gguf_export(const ExportOptions& opt, std::ostream& log, std::ostream* progress);

struct GgufModelReport {
  int64_t tensors = 0;
  int64_t exact_fp8 = 0;  // FALQON projections decoded from their trained codes
};

// Streams every tensor of `src` into `file` (general.name `name`); the file appears when complete.
GgufModelReport write_gguf_model(const MergedSource& src, const std::filesystem::path& file,
                                 gguf::OutType type, const std::string& name, std::ostream* progress);

// Writes the adapter of `e` (for a model of `cfg`) into `file`.
void write_gguf_lora(const PeftExport& e, const llama::LlamaConfig& cfg, const std::filesystem::path& file,
                     gguf::OutType type, const std::string& name);

}  // namespace loft::exporter
