#include "datasets/tokenize.h"

#include <algorithm>

namespace loft::data {

int64_t TokenizedExample::trained_count() const {
  return std::count_if(trained.begin() + std::min<size_t>(1, trained.size()), trained.end(),
                       [](uint8_t t) { return t != 0; });
}

TokenizedExample tokenize_conversation(const Conversation& conv, ChatTemplate tmpl, const Tokenizer& tok,
                                       bool train_on_inputs, bool add_generation_prompt) {
  TokenizedExample ex;
  for (const TemplatePiece& p : render_template(tmpl, conv, tok, add_generation_prompt)) {
    const uint8_t trained = (p.response || train_on_inputs) ? 1 : 0;
    if (p.id >= 0) {
      ex.ids.push_back(p.id);
      ex.trained.push_back(trained);
      continue;
    }
    const std::vector<int32_t> ids = tok.encode(p.text);
    ex.ids.insert(ex.ids.end(), ids.begin(), ids.end());
    ex.trained.insert(ex.trained.end(), ids.size(), trained);
  }
  if (!ex.trained.empty()) ex.trained[0] = 0;  // nothing precedes the first token
  return ex;
}

bool truncate_example(TokenizedExample& ex, size_t max_tokens) {
  if (ex.ids.size() <= max_tokens) return false;
  ex.ids.resize(max_tokens);
  ex.trained.resize(max_tokens);
  return true;
}

nlohmann::json to_json(const TokenizedExample& ex) { return {{"ids", ex.ids}, {"trained", ex.trained}}; }

TokenizedExample tokenized_example_from_json(const nlohmann::json& j) {
  TokenizedExample ex{j.at("ids").get<std::vector<int32_t>>(), j.at("trained").get<std::vector<uint8_t>>()};
  if (ex.ids.size() != ex.trained.size()) throw nlohmann::json::other_error::create(501, "ids/trained size mismatch", &j);
  return ex;
}

}  // namespace loft::data
