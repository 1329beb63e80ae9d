// config.json (with its FP8 quantization_config) and generation_config.json.
#include "engine/io/json_read.h"
#include "models/llama/config.h"
#include "models/llama/generation_config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(loft::fuzz::text(data, size));
  loft::fuzz::expect_clean([&] { loft::llama::LlamaConfig::from_json_text(text, "config.json"); });
  loft::fuzz::expect_clean(
      [&] { loft::llama::GenerationConfig::from_json_text(text, "generation_config.json"); });
  return 0;
}
