// The registry: one line per method below. Explicit rather than static-init self-registration,
// which a static library drops when nothing else references the method's object file.
#include <algorithm>
#include <charconv>

#include "engine/core/checked.h"
#include "engine/core/error.h"
#include "engine/peft/method_spec.h"

// Each entry X(name) is a spec defined as name_spec() in engine/methods/name/name_spec.cpp.
#define LOFT_METHODS(X) \
  X(lora)               \
  X(qlora)              \
  X(falqon)             \
  X(halo)               \
  X(hot)

namespace loft {

#define LOFT_DECLARE_SPEC(n) const MethodSpec& n##_spec();
LOFT_METHODS(LOFT_DECLARE_SPEC)
#undef LOFT_DECLARE_SPEC

const std::vector<const MethodSpec*>& method_specs() {
#define LOFT_LIST_SPEC(n) &n##_spec(),
  static const std::vector<const MethodSpec*> specs{LOFT_METHODS(LOFT_LIST_SPEC)};
#undef LOFT_LIST_SPEC
  return specs;
}

const MethodSpec* find_method_spec(const std::string& name) {
  for (const MethodSpec* s : method_specs())
    if (s->name() == name) return s;
  return nullptr;
}

std::string method_name_list(const char* last_separator) {
  const auto& specs = method_specs();
  std::string out;
  for (size_t i = 0; i < specs.size(); ++i)
    out += (i == 0 ? "" : i + 1 == specs.size() ? last_separator : ", ") + specs[i]->name();
  return out;
}

const MethodSpec& method_spec(const std::string& name) {
  if (const MethodSpec* s = find_method_spec(name)) return *s;
  throw UsageError(cat("--method: '", name, "' is not one of ", method_name_list()));
}

bool MethodSpec::takes_flag(const std::string& flag) const {
  for (const MethodFlag& f : flags())
    if (f.name == flag) return true;
  return false;
}

int64_t ProjectionSizes::lora() const { return memory_add(rank_in, rank_out); }

// The estimate's sizes come from config.json and the command line (engine/core/checked.h).
constexpr std::string_view kEstimate =
    "the memory estimate (the model's sizes, batch, seq or rank are too large)";

int64_t memory_mul(int64_t a, int64_t b) { return checked_mul(a, b, kEstimate); }

int64_t memory_add(int64_t a, int64_t b) { return checked_add(a, b, kEstimate); }

int parse_int_flag(const std::string& flag, const std::string& v) {
  int out = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size())
    throw UsageError(cat(flag, ": '", v, "' is not an integer"));
  return out;
}

}  // namespace loft
