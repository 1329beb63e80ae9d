#include "app/model_loading.h"

#include <random>

#include "models/llama/loading.h"

namespace loft::app {

LoadedModel load_model_with_adapter(const std::string& model_dir, const std::string& adapter_dir,
                                    const std::string& method, Device device, std::ostream& note) {
  std::mt19937_64 rng(0);
  LoadedModel out;
  if (adapter_dir.empty()) {
    MethodOptions m;  // no targets: every projection frozen, stored the method's way
    m.method = method.empty() ? "lora" : method;
    out.model = llama::load_model(model_dir, device, make_linear_factory(m, rng));
    out.method = m.method;
  } else {
    // The model the adapter was trained on (its loft record), unless --method overrides it.
    PeftAdapter a = load_peft_adapter(adapter_dir);
    const MethodOptions m = llama::method_options_for(a, method, adapter_dir, note);
    out.model = llama::load_model(model_dir, device, make_linear_factory(m, rng));
    llama::apply_adapter(*out.model, a, adapter_dir);
    out.method = m.method;
  }
  return out;
}

}  // namespace loft::app
