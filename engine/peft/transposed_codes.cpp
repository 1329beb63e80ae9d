#include "engine/peft/transposed_codes.h"

#include "engine/core/error.h"

namespace loft {

TransposedCodes parse_transposed_codes(const std::string& option, const std::string& name) {
  if (name == "auto") return TransposedCodes::auto_choice;
  if (name == "keep") return TransposedCodes::keep;
  if (name == "per-step") return TransposedCodes::per_step;
  throw UsageError(cat(option, ": '", name, "' is not auto, keep or per-step"));
}

const char* transposed_codes_name(TransposedCodes t) {
  switch (t) {
    case TransposedCodes::keep: return "keep";
    case TransposedCodes::per_step: return "per-step";
    default: return "auto";
  }
}

}  // namespace loft
