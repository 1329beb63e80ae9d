// tokenizer.json (BPE model, added tokens, normalizer, pre-tokenizer, decoder, post-processor)
// and tokenizer_config.json.
#include "engine/io/json_read.h"
#include "tests/fuzz/fuzz_util.h"
#include "tokenizer/tokenizer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loft::fuzz::expect_clean([&] {
    const nlohmann::json j = loft::parse_json(loft::fuzz::text(data, size), "tokenizer.json");
    loft::fuzz::expect_clean([&] { loft::tokenizer_json_from(j, "tokenizer.json"); });
    loft::tokenizer_config_from(j, "tokenizer_config.json");
  });
  return 0;
}
