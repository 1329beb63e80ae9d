#include "export/gguf_export.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <ostream>
#include <span>

#include "engine/core/error.h"
#include "engine/core/progress.h"
#include "export/gguf/gguf_llama_writer.h"
#include "export/gguf/gguf_lora_writer.h"
#include "engine/io/output_paths.h"
#include "export/output_dir.h"

namespace loft::exporter {

namespace fs = std::filesystem;

namespace {

// Only an earlier export may be replaced by a file --out: a file that starts as GGUF does.
bool is_gguf_file(const fs::path& file) { return file_head(file, 4) == "GGUF"; }

// The last component of a folder path ("models/llama/" -> "llama"), for general.name.
std::string folder_name(const fs::path& dir) {
  fs::path p = fs::absolute(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  return p.filename().string();
}

std::span<const float> f32_values(const Tensor& t, const std::string& what) {
  LOFT_CHECK(t.dtype() == DType::F32 && t.device().is_cpu(), what, ": expected an F32 host tensor, got ", t.str());
  return {t.ptr<float>(), size_t(t.numel())};
}

// llama.cpp's llama architecture, which Mistral converts to, attends to every earlier key: it
// reproduces a windowed model only while a sequence fits the window (LlamaCpp.Families measures
// both sides of that line).
void warn_window(const llama::LlamaConfig& cfg, std::ostream& log) {
  if (cfg.sliding_window <= 0) return;
  log << "export: warning: this " << cfg.model_type << " model attends to the last " << cfg.sliding_window
      << " tokens; llama.cpp's " << gguf::gguf_architecture(cfg) << " architecture has no sliding window"
      << " and attends to all of them, so its results equal this model's only for sequences of at most "
      << cfg.sliding_window << " tokens\n";
}

}  // namespace

bool is_gguf_format(const std::string& format) { return format == "gguf" || format == "gguf-lora"; }

bool gguf_out_is_file(const fs::path& out) {
  std::string ext = out.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".gguf";
}

gguf::OutType gguf_out_type(const ExportOptions& opt) {
  if (opt.gguf_type.empty()) return opt.format == "gguf-lora" ? gguf::OutType::F32 : gguf::OutType::F16;
  const std::optional<gguf::OutType> t = gguf::out_type_from_name(opt.gguf_type);
  if (!t) throw UsageError(cat("--gguf-type: '", opt.gguf_type, "' is not f16, bf16, q8_0 or f32"));
  return *t;
}

GgufModelReport write_gguf_model(const MergedSource& src, const fs::path& file, gguf::OutType type,
                                 const std::string& name, std::ostream* progress) {
  gguf::LlamaWriter w(file, src.config(), src.model_dir(), type, name);
  const size_t n = src.tensors().size();
  Progress bar(progress, "export gguf", int64_t(n), "tensors");
  GgufModelReport r;
  for (size_t i = 0; i < n; ++i) {
    const MergedTensor t = src.read(i);
    const Tensor& v = t.value;
    if (v.dtype() == DType::F32) {
      w.add(t.info.name, f32_values(v, t.info.name), t.info.shape);
    } else if (v.dtype() == DType::BF16) {
      w.add_bf16(t.info.name, {v.ptr<uint16_t>(), size_t(v.numel())}, t.info.shape);
    } else {  // F16 embeddings or norms
      w.add(t.info.name, v.to_float_vector(), t.info.shape);
    }
    if (t.fp8.defined()) ++r.exact_fp8;
    ++r.tensors;
    bar.update(int64_t(i + 1), cat("layer ", t.info.layer));
  }
  bar.finish();
  w.finish();
  return r;
}

void write_gguf_lora(const PeftExport& e, const llama::LlamaConfig& cfg, const fs::path& file,
                     gguf::OutType type, const std::string& name) {
  // PEFT module "model.layers.0.self_attn.q_proj" adapts the weight "<module>.weight"; loft's
  // adapter loader refuses use_rslora, so lora_alpha / r is the scale llama.cpp must apply.
  std::vector<gguf::LoraTarget> targets;
  for (const auto& [module, ab] : e.adapter.modules) targets.push_back({module + ".weight", ab.first.size(0)});
  gguf::LoraWriter w(file, cfg, targets, e.adapter.alpha, type, name);
  for (const auto& [module, ab] : e.adapter.modules) {
    const auto& [a, b] = ab;
    w.add(module + ".weight", f32_values(a, module + ".lora_A"), a.shape(), f32_values(b, module + ".lora_B"),
          b.shape());
  }
  w.finish();
}

void run_gguf_export(const ExportOptions& opt, std::ostream& log, std::ostream* progress) {
  const bool lora = opt.format == "gguf-lora";
  const gguf::OutType type = gguf_out_type(opt);
  const bool to_file = gguf_out_is_file(opt.out);
  OutputDir dir(opt.out, opt.overwrite, log,
                to_file ? std::optional<OutputDir::FileOut>({is_gguf_file, "a GGUF file"}) : std::nullopt);
  const fs::path file = to_file ? dir.file_path() : dir.path() / (lora ? "adapter.gguf" : "model.gguf");
  const MergedSource src(opt.model, opt.adapter, opt.method, log);
  const std::string name = folder_name(opt.model) + (src.method() ? "-" + src.method()->method : "");
  const std::string type_name(gguf::out_type_name(type));
  warn_window(src.config(), log);
  if (lora) {
    const PeftExport e = fit_peft_export(src, "export gguf-lora", progress);
    write_gguf_lora(e, src.config(), file, type, name);
    print_peft_gap(e, "gguf-lora", "GGUF LoRA", log);
    log << "export: " << src.describe() << " -> gguf-lora " << type_name << ", "
        << e.adapter.modules.size() << " adapted projections, rank " << e.adapter.rank
        << ", adapter.lora.alpha " << e.adapter.alpha << "\n";
  } else {
    const GgufModelReport r = write_gguf_model(src, file, type, name, progress);
    log << "export: " << src.describe() << " -> gguf " << type_name << ", " << r.tensors << " tensors, "
        << fs::file_size(file) << " bytes\n";
    if (r.exact_fp8 > 0)
      log << "export: " << r.exact_fp8 << " FALQON projections decoded exactly from their trained E4M3 "
          << "codes (GGUF has no FP8 type), then written as " << type_name << "\n";
  }
  const fs::path final_file = to_file ? dir.final_path() : dir.final_path() / file.filename();
  dir.commit();
  log << "export: wrote " << final_file.string() << "\n";
}

}  // namespace loft::exporter
