// adapter_config.json: PEFT's fields and loft's method record.
#include "engine/io/json_read.h"
#include "engine/peft/peft_adapter.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loft::fuzz::expect_clean([&] {
    const nlohmann::json j = loft::parse_json(loft::fuzz::text(data, size), "adapter_config.json");
    loft::peft_adapter_config_from(j, "adapter_config.json");
  });
  return 0;
}
