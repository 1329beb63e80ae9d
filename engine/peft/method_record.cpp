#include "engine/peft/method_record.h"

#include <algorithm>
#include <cmath>

#include "engine/peft/json_field.h"

namespace loft {

namespace fs = std::filesystem;

namespace {

// Per-method options: each method's object is written only for that method.
nlohmann::json halo_to_json(const HaloOptions& h) {
  return {{"level", h.level}, {"format", halo_format_name(h.format)},
          {"backbone", backbone_name(h.backbone)}};
}

HaloOptions halo_from_json(const nlohmann::json& loft, const fs::path& file) {
  if (!loft.contains("halo") || !loft["halo"].is_object())
    throw Error(cat(file.string(), ": field 'loft.halo' is missing or not an object"));
  const nlohmann::json& j = loft["halo"];
  HaloOptions h;
  h.level = json_field<int>(j, "level", file, "loft.halo.");
  if (h.level < 0 || h.level > 2)
    throw Error(cat(file.string(), ": field 'loft.halo.level' must be 0, 1 or 2, got ", h.level));
  const std::string format = json_field<std::string>(j, "format", file, "loft.halo.");
  if (format != "fp8" && format != "int8")
    throw Error(
        cat(file.string(), ": field 'loft.halo.format' must be fp8 or int8, got '", format, "'"));
  h.format = parse_halo_format(format);
  if (j.contains("backbone")) {  // absent in records written before the NF4 backbone: dense
    const std::string backbone = json_field<std::string>(j, "backbone", file, "loft.halo.");
    if (backbone != "dense" && backbone != "nf4")
      throw Error(cat(file.string(), ": field 'loft.halo.backbone' must be dense or nf4, got '",
                      backbone, "'"));
    h.backbone = parse_halo_backbone(backbone);
  }
  return h;
}

}  // namespace

std::string halo_format_name(quant::LowpFormat format) {
  switch (format) {
    case quant::LowpFormat::E4M3:
      return "fp8";
    case quant::LowpFormat::INT8:
      return "int8";
    default:
      throw Error("HALO format is neither fp8 nor int8");
  }
}

nlohmann::json method_options_to_json(const MethodOptions& opt) {
  nlohmann::json j = {{"format_version", kMethodRecordVersion},
                      {"method", opt.method},
                      {"rank", opt.lora.rank},
                      {"alpha", opt.lora.alpha},
                      {"targets", opt.targets}};
  if (opt.method == "halo") j["halo"] = halo_to_json(opt.halo);
  if (opt.method == "falqon")
    j["falqon"] = {{"topk", opt.falqon.topk},
                   {"buffer", falqon_buffer_name(opt.falqon.buffer)}};  // the SVD seed is not needed: A's codes travel in the method state
  return j;
}

MethodOptions method_options_from_json(const nlohmann::json& j, const fs::path& file) {
  if (!j.is_object()) throw Error(cat(file.string(), ": field 'loft' must be an object"));
  if (!j.contains("format_version"))
    throw Error(
        cat(file.string(), ": field 'loft.format_version' is missing (a record from before ",
            "loft recorded method options; delete the \"loft\" object to load it as LoRA)"));
  const int version = json_field<int>(j, "format_version", file, "loft.");
  if (version < 1 || version > kMethodRecordVersion)
    throw Error(cat(file.string(), ": field 'loft.format_version' is ", version,
                    "; this loft reads 1 to ", kMethodRecordVersion));
  MethodOptions opt;
  opt.method = json_field<std::string>(j, "method", file, "loft.");
  const auto& names = method_names();
  if (std::find(names.begin(), names.end(), opt.method) == names.end())
    throw Error(cat(file.string(), ": field 'loft.method' is '", opt.method,
                    "', not one of lora, qlora, falqon, halo"));
  opt.lora.rank = json_field<int>(j, "rank", file, "loft.");
  if (opt.lora.rank <= 0)
    throw Error(cat(file.string(), ": field 'loft.rank' must be positive, got ", opt.lora.rank));
  opt.lora.alpha = json_field<float>(j, "alpha", file, "loft.");
  if (!std::isfinite(opt.lora.alpha))
    throw Error(cat(file.string(), ": field 'loft.alpha' is not finite"));
  const auto& all = all_lora_targets();
  for (const std::string& t : json_field<std::vector<std::string>>(j, "targets", file, "loft.")) {
    if (std::find(all.begin(), all.end(), t) == all.end())
      throw Error(
          cat(file.string(), ": field 'loft.targets' has '", t,
              "', not one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"));
    opt.targets.insert(t);
  }
  if (opt.targets.empty()) throw Error(cat(file.string(), ": field 'loft.targets' is empty"));
  if (opt.method == "halo") opt.halo = halo_from_json(j, file);
  if (opt.method == "falqon") {
    if (!j.contains("falqon") || !j["falqon"].is_object())
      throw Error(cat(file.string(), ": field 'loft.falqon' is missing or not an object"));
    const nlohmann::json& f = j["falqon"];
    opt.falqon.topk = json_field<int>(f, "topk", file, "loft.falqon.");
    if (opt.falqon.topk < 0)
      throw Error(cat(file.string(), ": field 'loft.falqon.topk' must be >= 0, got ", opt.falqon.topk));
    const std::string buffer = json_field<std::string>(f, "buffer", file, "loft.falqon.");
    if (buffer != "reset" && buffer != "accumulate")
      throw Error(cat(file.string(), ": field 'loft.falqon.buffer' must be reset or accumulate, got '",
                      buffer, "'"));
    opt.falqon.buffer = parse_falqon_buffer(buffer);
  }
  return opt;
}

}  // namespace loft
