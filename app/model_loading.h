// The model an evaluation or generation runs: the base model alone (every projection frozen,
// stored the way --method, default lora, stores it), or base + adapter built for the adapter's
// recorded method (--method overrides it, with a note) and the adapter applied.
#pragma once
#include <iosfwd>
#include <memory>
#include <string>

#include "models/llama/config.h"
#include "models/llama/model.h"
#include "tokenizer/tokenizer.h"

namespace loft::app {

struct LoadedModel {
  std::unique_ptr<llama::LlamaModel> model;
  std::string method;  // the method the model was built for
};

LoadedModel load_model_with_adapter(const std::string& model_dir, const std::string& adapter_dir,
                                    const std::string& method, Device device, std::ostream& note);

// A tokenizer whose ids reach past the model's embedding rows (a 32k-vocab tokenizer beside a
// 512-vocab model) is refused here, before anything is loaded, naming both sizes.
void check_tokenizer_fits(const Tokenizer& tok, const llama::LlamaConfig& cfg,
                          const std::string& model_dir);

}  // namespace loft::app
