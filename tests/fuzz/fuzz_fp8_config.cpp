// The FP8 quantization_config reader alone (transformers fp8 and compressed-tensors), fed the
// input as the quantization_config object so the fuzzer need not build a whole config.json.
#include "engine/io/json_read.h"
#include "models/llama/fp8_config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loft::fuzz::expect_clean([&] {
    const nlohmann::json qc = loft::parse_json(loft::fuzz::text(data, size), "fuzz");
    loft::llama::parse_fp8_checkpoint(nlohmann::json{{"quantization_config", qc}}, "config.json");
  });
  return 0;
}
