// The safetensors header: 8-byte length, JSON {name: {dtype, shape, data_offsets}}, data area.
#include "engine/io/safetensors_reader.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loft::fuzz::expect_clean([&] { loft::parse_safetensors_header("fuzz.safetensors", data, size); });
  return 0;
}
