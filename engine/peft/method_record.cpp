#include "engine/peft/method_record.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"

namespace loft {

namespace fs = std::filesystem;

namespace {

// Per-method options: each method's object is written only for that method.
nlohmann::json halo_to_json(const HaloOptions& h) {
  return {{"level", h.level}, {"format", halo_format_name(h.format)},
          {"backbone", backbone_name(h.backbone)}};
}

HaloOptions halo_from_json(const JsonFields& loft) {
  const JsonFields j = loft.object("halo");
  HaloOptions h;
  h.level = j.int32("level", 0, 2);
  const std::string format = j.string("format");
  if (format != "fp8" && format != "int8")
    j.fail("format", cat("must be fp8 or int8, got ", brief(format)));
  h.format = parse_halo_format(format);
  if (j.has("backbone")) {  // absent in records written before the NF4 backbone: dense
    const std::string backbone = j.string("backbone");
    if (backbone != "dense" && backbone != "nf4")
      j.fail("backbone", cat("must be dense or nf4, got ", brief(backbone)));
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

MethodOptions method_options_from_json(const nlohmann::json& record, const fs::path& file) {
  if (!record.is_object()) throw Error(cat(file.string(), ": field loft must be an object"));
  const JsonFields j(record, file.string(), "loft.");
  if (!j.has("format_version"))
    j.fail("format_version", "is missing (a record from before loft recorded method options; "
                             "delete the \"loft\" object to load it as LoRA)");
  const int version = j.int32("format_version");
  if (version < 1 || version > kMethodRecordVersion)
    j.fail("format_version", cat("is ", version, "; this loft reads 1 to ", kMethodRecordVersion));
  MethodOptions opt;
  opt.method = j.string("method");
  const auto& names = method_names();
  if (std::find(names.begin(), names.end(), opt.method) == names.end())
    j.fail("method", cat("is ", brief(opt.method), ", not one of lora, qlora, falqon, halo"));
  opt.lora.rank = int(j.positive("rank", INT32_MAX));
  opt.lora.alpha = j.float32("alpha");
  const auto& all = all_lora_targets();
  for (const std::string& t : j.strings("targets")) {
    if (std::find(all.begin(), all.end(), t) == all.end())
      j.fail("targets", cat("has ", brief(t),
                            ", not one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"));
    opt.targets.insert(t);
  }
  if (opt.targets.empty()) j.fail("targets", "is empty");
  if (opt.method == "halo") opt.halo = halo_from_json(j);
  if (opt.method == "falqon") {
    const JsonFields f = j.object("falqon");
    opt.falqon.topk = f.int32("topk", 0);
    const std::string buffer = f.string("buffer");
    if (buffer != "reset" && buffer != "accumulate")
      f.fail("buffer", cat("must be reset or accumulate, got ", brief(buffer)));
    opt.falqon.buffer = parse_falqon_buffer(buffer);
  }
  return opt;
}

}  // namespace loft
