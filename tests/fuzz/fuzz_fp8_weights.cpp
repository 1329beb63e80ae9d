// The FP8 weight reader: a whole safetensors file (FP8 codes beside their scales and zero points)
// read weight by weight as each FP8 scheme loft supports would read it (transformers fp8 with
// 128x128 blocks, compressed-tensors per channel and per tensor). The input is written to a file
// in /dev/shm first, as SafetensorsCheckpoint maps files.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/io/safetensors_checkpoint.h"
#include "models/llama/fp8_checkpoint.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

const std::vector<loft::llama::Fp8Checkpoint>& schemes() {
  static const std::vector<loft::llama::Fp8Checkpoint> all = [] {
    using nlohmann::json;
    const auto group = [](const char* strategy) {
      return json{{"group_0", {{"weights", {{"type", "float"}, {"num_bits", 8}, {"strategy", strategy},
                                            {"symmetric", true}}}}}};
    };
    std::vector<loft::llama::Fp8Checkpoint> out;
    for (const json& qc : {json{{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {128, 128}}},
                           json{{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {1, 3}}},
                           json{{"quant_method", "compressed-tensors"}, {"format", "float-quantized"},
                                {"config_groups", group("channel")}},
                           json{{"quant_method", "compressed-tensors"}, {"format", "float-quantized"},
                                {"config_groups", group("tensor")}}})
      out.push_back(*loft::llama::parse_fp8_checkpoint(json{{"quantization_config", qc}}, "config.json"));
    return out;
  }();
  return all;
}

// This process's scratch folder, removed at a normal exit (libFuzzer's -max_total_time/-runs end);
// never destroyed, so the exit handler can still read it.
const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path* dir = [] {
    const std::filesystem::path base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    auto* d = new std::filesystem::path(base / ("loft-fuzz-fp8-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path& dir = scratch_dir();
  {
    std::ofstream out(dir / "model.safetensors", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  loft::fuzz::expect_clean([&] {
    const loft::SafetensorsCheckpoint ckpt = loft::SafetensorsCheckpoint::open(dir);
    for (const std::string& name : ckpt.names())
      for (const loft::llama::Fp8Checkpoint& q : schemes())
        loft::fuzz::expect_clean([&] { loft::llama::read_fp8_weight(ckpt, q, name); });
  });
  return 0;
}
