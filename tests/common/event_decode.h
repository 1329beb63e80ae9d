// Decodes TensorBoard event files the way a reader independent of loft's encoder would: the
// TFRecord framing with CRC checks (report::read_tf_records), each record by
// `protoc --decode=tensorboard.Event` against report/tensorboard_event.proto.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace loft::test {

struct DecodedEvents {
  std::vector<std::string> text;  // protoc's text format of each record
  std::string file_version;       // of the first record
  std::vector<std::tuple<int64_t, std::string, double>> scalars;  // (step, tag, simple_value)
};

// nullopt when protoc is not installed (the caller skips).
std::optional<DecodedEvents> decode_event_file(const std::filesystem::path& file);
// protoc's text for one serialized Event; nullopt when protoc is absent or fails.
std::optional<std::string> protoc_decode_event(const std::string& bytes);

}  // namespace loft::test
