// `loft export --format peft`: a PEFT LoRA adapter (adapter_model.safetensors +
// adapter_config.json, no loft record, so PEFT, vLLM and `loft evaluate --method lora` all apply
// it as W + (α/r)·B·A on the bf16 base) whose merged model is as close to the trained one as rank
// r allows:
//  - lora, qlora, halo (and adapters PEFT made): their own A and B (HALO's adapter path is
//    unrotated already; QLoRA's and HALO-nf4's were trained against an NF4 backbone, which the
//    gap below measures);
//  - falqon: the best rank-r fit of deq(trained codes) − W (truncated SVD; α = r, scaling 1).
// For every adapted projection the gap ||trained − (W + (α/r)·B·A)||_F / ||trained||_F is measured
// and reported per layer and over the model, beside the base's per-tensor FP8 rounding
// ||W − deq(Q(W))||_F / ||W||_F for scale; a gap above that rounding is reported as large, with
// the formats that carry the trained model exactly (fp8, bf16). export_report.json in the folder
// records the numbers. `--format gguf-lora` writes the same adapter, with the same report, as a
// llama.cpp LoRA GGUF (export/gguf_export.h).
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "export/merged_source.h"

namespace loft::exporter {

struct PeftGapReport {
  std::vector<double> layer_gap;  // per decoder layer, over its adapted projections
  double gap = 0;                 // over every adapted projection
  double max_projection_gap = 0;
  double base_fp8_rounding = 0;   // ||W − deq(Q(W))|| / ||W|| over the same projections
  bool fitted = false;            // FALQON: A/B are the SVD fit, not the trained tensors
  bool large() const { return gap > base_fp8_rounding; }
};

// The adapter a method's trained model exports as (plain LoRA on the base: PEFT's
// adapter_model.safetensors, or GGUF's .lora_a/.lora_b) and how far it is from the trained model.
struct PeftExport {
  PeftAdapter adapter;  // no loft record: applied as W + (alpha/r)·B·A
  PeftGapReport report;
  std::string method;
};

// Computes the adapter and its gap, one projection at a time (the progress line, tagged `task`,
// goes to `progress`). The source must have an adapter.
PeftExport fit_peft_export(const MergedSource& src, const std::string& task, std::ostream* progress);

// The gap report on the terminal, lines tagged `tag` ("peft: ..."), with the warning (naming the
// `kind` of adapter, "PEFT") when the adapter does not reproduce the trained model faithfully.
void print_peft_gap(const PeftExport& e, const std::string& tag, const std::string& kind, std::ostream& log);

// Writes the adapter and export_report.json into `out` (an existing folder) and prints the gap
// report to `log`; the progress line goes to `progress`. The source must have an adapter.
PeftGapReport write_peft_export(const MergedSource& src, const std::filesystem::path& out,
                                std::ostream& log, std::ostream* progress);

}  // namespace loft::exporter
