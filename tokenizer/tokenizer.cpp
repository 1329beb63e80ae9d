#include "tokenizer/tokenizer.h"

#include <system_error>

#include "engine/core/error.h"

namespace loft {

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
