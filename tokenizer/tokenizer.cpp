#include "tokenizer/tokenizer.h"

#include <system_error>

#include "engine/core/error.h"

namespace loft {

std::vector<int32_t> Tokenizer::encode_with_special(std::string_view text) const {
  std::vector<int32_t> ids;
  if (adds_bos() && bos_id() >= 0) ids.push_back(bos_id());
  const std::vector<int32_t> body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  if (adds_eos() && eos_id() >= 0) ids.push_back(eos_id());
  return ids;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec))
    throw Error(cat("model folder ", model_dir, " does not exist or is not a folder"));
  if (fs::exists(model_dir / "tokenizer.model", ec))
    return load_sentencepiece(model_dir / "tokenizer.model");
  if (fs::exists(model_dir / "tokenizer.json", ec))
    throw Error(cat("model folder ", model_dir,
                    " has only tokenizer.json: Llama-3 tokenizer.json (BPE) is not supported yet; "
                    "loft needs a SentencePiece tokenizer.model"));
  throw Error(cat("model folder ", model_dir,
                  " has no tokenizer (neither tokenizer.model nor tokenizer.json)"));
}

}  // namespace loft
