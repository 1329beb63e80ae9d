#include "engine/peft/method.h"

#include "engine/peft/method_spec.h"

namespace loft {

LinearFactory make_linear_factory(const MethodOptions& opt, std::mt19937_64& rng) {
  validate_method_options(opt);
  return method_spec(opt.method).linear_factory(opt, rng);
}

}  // namespace loft
