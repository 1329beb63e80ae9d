#include "export/metadata.h"

#include <fstream>

#include "engine/core/error.h"
#include "engine/io/atomic_file.h"

namespace loft::exporter {

namespace fs = std::filesystem;

const std::vector<std::string>& tokenizer_files() {
  static const std::vector<std::string> files{
      "tokenizer.json",     "tokenizer.model",  "tokenizer_config.json", "special_tokens_map.json",
      "added_tokens.json", "chat_template.jinja", "chat_template.json"};
  return files;
}

namespace {
void copy_into(const fs::path& from, const fs::path& out) {
  std::error_code ec;
  fs::copy_file(from, out / from.filename(), fs::copy_options::overwrite_existing, ec);
  if (ec) throw Error(cat(from.string(), ": cannot copy into ", out.string(), " (", ec.message(), ")"));
}
}  // namespace

void copy_generation_config(const fs::path& model_dir, const fs::path& adapter_dir,
                            const fs::path& out) {
  const std::string name = "generation_config.json";
  if (!adapter_dir.empty() && fs::exists(adapter_dir / name))
    copy_into(adapter_dir / name, out);
  else if (fs::exists(model_dir / name))
    copy_into(model_dir / name, out);
}

void write_model_metadata(const fs::path& model_dir, const fs::path& adapter_dir,
                          const fs::path& out,
                          const std::optional<nlohmann::json>& quantization_config) {
  const fs::path cfg_path = model_dir / "config.json";
  std::ifstream in(cfg_path);
  if (!in) throw Error(cat(cfg_path.string(), ": cannot read"));
  nlohmann::json cfg = nlohmann::json::parse(in, nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object())
    throw Error(cat(cfg_path.string(), ": not a JSON object"));
  if (quantization_config)
    cfg["quantization_config"] = *quantization_config;
  else
    cfg.erase("quantization_config");
  // Unquantized tensors are written bf16; transformers 5 spells the key "dtype", 4 "torch_dtype".
  if (cfg.contains("torch_dtype")) cfg["torch_dtype"] = "bfloat16";
  if (cfg.contains("dtype") || !cfg.contains("torch_dtype")) cfg["dtype"] = "bfloat16";
  write_file_atomic(out / "config.json", cfg.dump(2) + "\n");
  copy_generation_config(model_dir, adapter_dir, out);
  for (const std::string& f : tokenizer_files())
    if (fs::exists(model_dir / f)) copy_into(model_dir / f, out);
}

}  // namespace loft::exporter
