#include "engine/peft/method_record.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"
#include "engine/peft/method_spec.h"

namespace loft {

namespace fs = std::filesystem;

nlohmann::json method_options_to_json(const MethodOptions& opt) {
  nlohmann::json j = {{"format_version", kMethodRecordVersion},
                      {"method", opt.method},
                      {"rank", opt.lora.rank},
                      {"alpha", opt.lora.alpha},
                      {"targets", opt.targets}};
  method_spec(opt.method).write_record(opt, j);
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
  const MethodSpec* spec = find_method_spec(opt.method);
  if (!spec) j.fail("method", cat("is ", brief(opt.method), ", not one of ", method_name_list()));
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
  spec->read_record(j, opt);
  return opt;
}

}  // namespace loft
