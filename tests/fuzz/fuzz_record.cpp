// One dataset record (a JSONL line or a JSON array element) read as every format: detection,
// then alpaca, messages, sharegpt, prompt_completion, text and gsm8k; and a plain-text document.
#include "datasets/record.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = loft::fuzz::text(data, size);
  using loft::data::RecordFormat;
  // A bad record is a BadRecord (skipped or reported by the loader), never anything else.
  auto record = [](auto&& f) {
    try {
      f();
    } catch (const loft::data::BadRecord&) {
    }
  };
  nlohmann::json r;
  bool parsed = false;
  record([&] {
    r = loft::data::parse_json_record(text);
    parsed = true;
  });
  if (parsed) {
    loft::data::detect_format(r);
    for (RecordFormat f : {RecordFormat::alpaca, RecordFormat::messages, RecordFormat::sharegpt,
                           RecordFormat::prompt_completion, RecordFormat::text, RecordFormat::gsm8k})
      record([&] { loft::data::to_conversation(r, f); });
  }
  record([&] { loft::data::text_conversation(std::string(text)); });
  return 0;
}
