// The evaluator's CSV reader (MMLU files): any column count, and the 6 columns MMLU needs.
#include "eval/csv.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(loft::fuzz::text(data, size));
  loft::fuzz::expect_clean([&] { loft::eval::parse_csv(text, "fuzz.csv", 0); });
  loft::fuzz::expect_clean([&] { loft::eval::parse_csv(text, "fuzz.csv", 6); });
  return 0;
}
