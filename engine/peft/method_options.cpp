// What every method shares: the registry's names and defaults, the projection targets, and the
// checks that run before a model is built. Each method's own options live in its spec
// (engine/methods/<name>/).
#include <sstream>

#include "engine/core/error.h"
#include "engine/peft/method_spec.h"

namespace loft {

const std::vector<std::string>& method_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const MethodSpec* s : method_specs()) out.push_back(s->name());
    return out;
  }();
  return names;
}

const std::string& default_method() { return method_names().front(); }

MethodDefaults method_defaults(const std::string& method) { return method_spec(method).defaults(); }

const std::vector<std::string>& all_lora_targets() {
  static const std::vector<std::string> t{"q_proj", "k_proj",  "v_proj",  "o_proj",
                                          "gate_proj", "up_proj", "down_proj"};
  return t;
}

std::set<std::string> parse_lora_targets(const std::string& spec) {
  if (spec == "all") return {all_lora_targets().begin(), all_lora_targets().end()};
  std::set<std::string> out;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    bool known = false;
    for (const auto& t : all_lora_targets()) known |= t == item;
    if (!known)
      throw UsageError(cat("--lora-targets: '", item, "' is not one of q_proj, k_proj, v_proj, ",
                           "o_proj, gate_proj, up_proj, down_proj (or 'all')"));
    out.insert(item);
  }
  if (out.empty()) throw UsageError("--lora-targets: no projection named");
  return out;
}

void apply_method_invariants(MethodOptions& opt) { method_spec(opt.method).apply_invariants(opt); }

void validate_method_options(const MethodOptions& opt) {
  const MethodSpec& chosen = method_spec(opt.method);
  chosen.validate(opt);
  // Another method's option set to what only that method can do would be silently ignored.
  for (const MethodSpec* other : method_specs()) {
    if (other == &chosen) continue;
    for (const MethodFlag& f : other->flags()) {
      if (!f.refused_elsewhere || chosen.takes_flag(f.name)) continue;
      const std::string value = f.get(opt);
      if (value == f.default_text) continue;
      std::string takers;
      for (const MethodSpec* s : method_specs())
        if (s->takes_flag(f.name)) takers += (takers.empty() ? "" : ", ") + s->name();
      throw UsageError(cat(f.name, " ", value, " applies to --method ", takers, " only (got --method ",
                           opt.method, chosen.foreign_flag_note(f.name), ")"));
    }
  }
}

}  // namespace loft
