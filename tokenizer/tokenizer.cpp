#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <system_error>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/io/json_read.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace loft {

std::vector<int32_t> Tokenizer::encode_with_special(std::string_view text) const {
  std::vector<int32_t> ids;
  if (adds_bos() && bos_id() >= 0) ids.push_back(bos_id());
  const std::vector<int32_t> body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  if (adds_eos() && eos_id() >= 0) ids.push_back(eos_id());
  return ids;
}

namespace {

// A folder without tokenizer.json: BOS is prepended when config.json names a bos_token_id (a
// folder without config.json keeps SentencePiece's own BOS).
bool config_has_bos_token_id(const std::filesystem::path& config) {
  if (!std::filesystem::exists(config)) return true;
  const nlohmann::json j = read_json_file(config);
  return j.is_object() && j.contains("bos_token_id") && !j["bos_token_id"].is_null();
}

}  // namespace

// The ids of the special added tokens, sorted.
static std::vector<int32_t> sorted_special_ids(const Tokenizer& tok) {
  std::vector<int32_t> special;
  for (const AddedToken& t : tok.added_tokens())
    if (t.special) special.push_back(t.id);
  std::sort(special.begin(), special.end());
  return special;
}

std::string Tokenizer::decode_skip_special(const std::vector<int32_t>& ids) const {
  const std::vector<int32_t> special = sorted_special_ids(*this);
  std::vector<int32_t> kept;
  kept.reserve(ids.size());
  for (const int32_t id : ids)
    if (!std::binary_search(special.begin(), special.end(), id)) kept.push_back(id);
  return decode(kept);
}

namespace {
class SkipSpecialStreamDecoder final : public StreamDecoder {
 public:
  SkipSpecialStreamDecoder(std::unique_ptr<StreamDecoder> inner, std::vector<int32_t> special)
      : inner_(std::move(inner)), special_(std::move(special)) {}
  std::string push(int32_t id) override {
    return std::binary_search(special_.begin(), special_.end(), id) ? std::string() : inner_->push(id);
  }
  std::string finish() override { return inner_->finish(); }

 private:
  std::unique_ptr<StreamDecoder> inner_;
  std::vector<int32_t> special_;  // sorted
};
}  // namespace

std::unique_ptr<StreamDecoder> Tokenizer::stream_decoder_skip_special() const {
  return std::make_unique<SkipSpecialStreamDecoder>(stream_decoder(), sorted_special_ids(*this));
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec))
    throw Error(cat("model folder ", model_dir, " does not exist or is not a folder"));
  // transformers prefers the fast tokenizer (tokenizer.json) when both files are there.
  if (fs::exists(model_dir / "tokenizer.json", ec)) return load_tokenizer_json(model_dir);
  if (fs::exists(model_dir / "tokenizer.model", ec)) {
    auto tok = std::make_unique<SentencePieceTokenizer>(model_dir / "tokenizer.model");
    tok->set_adds_bos(config_has_bos_token_id(model_dir / "config.json"));
    return tok;
  }
  throw Error(cat("model folder ", model_dir,
                  " has no tokenizer (neither tokenizer.json nor tokenizer.model)"));
}

}  // namespace loft
