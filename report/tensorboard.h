// TensorBoard event files (`finetune --tensorboard`): RUN/tb/events.out.tfevents.<time>.<host>,
// TFRecord-framed tensorboard.Event messages: first the file_version event "brain.Event:2", then
// one event per step whose Summary holds that step's scalars as simple_value (tags such as
// train/loss). Each record is flushed as it is written, so TensorBoard follows a live run.
//
// The messages are encoded here in protobuf's wire format (report/tensorboard_event.proto is the
// schema, field numbers as TensorBoard's event.proto/summary.proto) rather than with libprotobuf:
// libsentencepiece.so bundles its own, older protobuf-lite and exports its symbols, which take the
// place of libprotobuf's in the loft binary (SerializeAsString crashed). Tests decode the output
// with protoc against the schema.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace loft::report {

using Scalars = std::vector<std::pair<std::string, double>>;  // (tag, value)

class TensorBoardWriter {
 public:
  // Creates the folder and a new event file in it (a resumed run adds a second file; TensorBoard
  // reads every file of the folder).
  explicit TensorBoardWriter(const std::filesystem::path& dir);
  void write(int64_t step, const Scalars& scalars);
  const std::filesystem::path& path() const { return path_; }

 private:
  void record(const std::string& event);
  std::filesystem::path path_;
  std::ofstream out_;
};

// One tensorboard.Event, serialized: the file_version event (step 0) or a step's scalar summary.
std::string file_version_event(double wall_time);
std::string scalars_event(double wall_time, int64_t step, const Scalars& scalars);

}  // namespace loft::report
