// Perplexity of a text file, defined so other tools can reproduce it: each non-empty line is one
// document, tokenized as [BOS] + ids and truncated to the model's max_position_embeddings; the
// summed negative log-likelihood of tokens 1..n-1 (each predicted from its prefix) over all
// documents, divided by the number of predicted tokens, is nll; ppl = exp(nll).
#pragma once
#include <filesystem>

#include "engine/train/batch.h"
#include "tokenizer/tokenizer.h"

namespace loft::eval {

struct PerplexityResult {
  int64_t documents = 0;
  int64_t tokens = 0;  // predicted tokens
  double nll = 0;      // mean negative log-likelihood per predicted token (nats)
  double ppl = 0;
};

struct PerplexityOptions {
  int64_t max_tokens = 2048;      // per document, BOS included (the model's context length)
  int64_t batch_tokens = 8192;    // tokens per forward pass (rows of max_tokens, packed)
};

// Streams `file` line by line (CRLF tolerated). Documents are packed into rows with document
// masking, which gives exactly the per-document losses (positions restart per document).
PerplexityResult perplexity(TrainableModel& model, const Tokenizer& tok,
                            const std::filesystem::path& file, Device device,
                            const PerplexityOptions& opt);

}  // namespace loft::eval
