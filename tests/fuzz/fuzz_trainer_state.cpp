// A checkpoint's trainer_state.json (step counters and the packer's saved rows, restored as
// DataLoader::restore does) and one metrics.jsonl line as --resume reads them.
#include "datasets/packer.h"
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"
#include "engine/train/trainer.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = loft::fuzz::text(data, size);
  loft::fuzz::expect_clean([&] { loft::metrics_line_step(text, "metrics.jsonl:1"); });
  loft::fuzz::expect_clean([&] {
    const nlohmann::json j = loft::parse_json(text, "trainer_state.json");
    const loft::TrainerState s = loft::trainer_state_from(j, "trainer_state.json");
    loft::data::Packer packer(16, 2, true, 0);
    packer.restore(s.data.contains("packer") ? s.data["packer"] : s.data);
    while (!packer.empty()) packer.flush();
  });
  return 0;
}
