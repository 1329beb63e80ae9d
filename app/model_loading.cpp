#include "app/model_loading.h"

#include <random>

#include "engine/core/error.h"
#include "models/llama/loading.h"

namespace loft::app {

void check_tokenizer_fits(const Tokenizer& tok, const llama::LlamaConfig& cfg,
                          const std::string& model_dir) {
  if (tok.vocab_size() > cfg.vocab_size)
    throw Error(cat(model_dir, ": the tokenizer has ", tok.vocab_size(),
                    " tokens but the model's vocab_size is ", cfg.vocab_size,
                    " (config.json); the tokenizer belongs to another model"));
}

LoadedModel load_model_with_adapter(const std::string& model_dir, const std::string& adapter_dir,
                                    const std::string& method, Device device, std::ostream& note) {
  std::mt19937_64 rng(0);
  LoadedModel out;
  if (adapter_dir.empty()) {
    MethodOptions m;  // no targets: every projection frozen, stored the method's way
    if (!method.empty()) m.method = method;  // else the default method
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
