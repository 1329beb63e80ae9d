#include "export/export.h"

#include <algorithm>
#include <ostream>
#include <vector>

#include "engine/core/error.h"
#include "export/gguf_export.h"
#include "export/merged_source.h"
#include "export/metadata.h"
#include "export/model_writer.h"
#include "export/output_dir.h"
#include "export/peft_export.h"

namespace loft::exporter {

const std::vector<std::string>& export_formats() {
  static const std::vector<std::string> f{"fp8", "bf16", "peft", "gguf", "gguf-lora"};
  return f;
}

void check_export_options(const ExportOptions& opt) {
  const auto& f = export_formats();
  if (std::find(f.begin(), f.end(), opt.format) == f.end())
    throw UsageError(cat("--format: '", opt.format, "' is not one of fp8, bf16, peft, gguf, gguf-lora"));
  if (opt.fp8_layout != "channel" && opt.fp8_layout != "block" && opt.fp8_layout != "tensor")
    throw UsageError(cat("--fp8-layout: '", opt.fp8_layout, "' is not channel, block or tensor"));
  if (opt.fp8_layout != "channel" && opt.format != "fp8")
    throw UsageError(cat("--fp8-layout applies to --format fp8, not ", opt.format));
  if (!opt.gguf_type.empty() && !is_gguf_format(opt.format))
    throw UsageError(cat("--gguf-type applies to --format gguf or gguf-lora, not ", opt.format));
  if (is_gguf_format(opt.format)) gguf_out_type(opt);  // an unknown --gguf-type is a usage error
  if ((opt.format == "peft" || opt.format == "gguf-lora") && opt.adapter.empty())
    throw UsageError(cat("--format ", opt.format, " writes an adapter: --adapter DIR is required"));
  if (!opt.method.empty() && opt.adapter.empty())
    throw UsageError("--method applies to an adapter: without --adapter the base is exported");
  if (opt.max_shard_bytes == 0) throw UsageError("--max-shard-size must be positive");
}

void run_export(const ExportOptions& opt, std::ostream& log, std::ostream* progress) {
  check_export_options(opt);
  if (is_gguf_format(opt.format)) return run_gguf_export(opt, log, progress);
  OutputDir dir(opt.out, opt.overwrite, log);
  const MergedSource src(opt.model, opt.adapter, opt.method, log);
  if (opt.format == "peft") {
    write_peft_export(src, dir.path(), log, progress);
  } else {
    ModelWriteOptions w;
    w.max_shard_bytes = opt.max_shard_bytes;
    w.progress = progress;
    std::optional<nlohmann::json> qc;
    if (opt.format == "fp8") {
      w.fp8 = llama::fp8_export_scheme(opt.fp8_layout);
      qc = llama::quantization_config_json(*w.fp8);
    }
    const ModelWriteReport r = write_merged_model(src, dir.path(), w);
    write_model_metadata(opt.model, opt.adapter, dir.path(), qc);
    log << "export: " << src.describe() << " -> " << opt.format
        << (w.fp8 ? " (" + w.fp8->describe() + ")" : std::string()) << ", " << r.shards
        << (r.shards == 1 ? " shard, " : " shards, ") << r.bytes << " bytes of tensors\n";
    if (r.exact_fp8 > 0)
      log << "export: " << r.exact_fp8 << " FALQON projections written with their trained E4M3 "
          << "codes bit for bit (one scale each" << (opt.fp8_layout == "tensor" ? "" : ", repeated over the layout") << ")\n";
    log << "export: " << (w.fp8 ? "FP8" : "bf16") << " rounding of the merged projections: "
        << cat(std::round(r.projection_rel_error * 1e6) / 1e4, "%") << " (relative Frobenius)\n";
  }
  dir.commit();
  log << "export: wrote " << dir.final_path().string() << "\n";
}

}  // namespace loft::exporter
