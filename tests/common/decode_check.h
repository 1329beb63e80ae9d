// The KV-cache decoding check shared by tests/models (CPU: decode vs full forward) and tests/gpu
// (CUDA vs the CPU): the test models and one fixed schedule of steps that covers a packed prefill
// of prompts of 1, 7 and 33 tokens, one-token decode steps, sequences finishing at different
// steps, a freed slot re-filled with a new prompt while the others decode (a prefill through the
// cached path), and a 3-token continuation with all its rows returned.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/llama/model.h"

namespace loft::test {

// "stories260K-hf" or "wide-random" (test data models/, tests/data/README.md) with frozen projections, or "gqa-llama3":
// random weights, 8 query heads over 2 kv heads of dim 64, llama3 rope scaling (θ 500000, factor
// 8, original context 64, so the scaling bends the frequencies these short tests reach).
std::unique_ptr<llama::LlamaModel> decode_test_model(const std::string& name, Device device,
                                                     DType dtype);

struct DecodeRow {
  std::vector<int32_t> prefix;  // the sequence up to and including the token at this row
  std::vector<float> logits;    // what the decoder returned for it
};
// Runs the schedule (its tokens drawn from a fixed seed, the same on every backend).
std::vector<DecodeRow> run_decode_schedule(llama::LlamaModel& model);

// Largest ‖decoded − full‖/‖full‖ over the rows, full = the last row of LlamaModel::logits over
// the row's prefix (a full re-forward of the growing sequence).
double worst_vs_full_forward(llama::LlamaModel& model, const std::vector<DecodeRow>& rows);
// Largest row-wise relative error of `a` against `b` (same schedule).
double worst_between(const std::vector<DecodeRow>& a, const std::vector<DecodeRow>& b);

// transformers' generate(do_sample=False, eos_token_id=None) tokens in reference/<name>_greedy.json
// (24 after each of two prompts), reproduced token for token by the model of models/<name> decoding
// in f32 on `device` through the KV cache (gtest expectations; skips without the data).
void expect_greedy_matches_transformers(const std::string& name, Device device);

}  // namespace loft::test
