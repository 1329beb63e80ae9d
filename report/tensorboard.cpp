#include "report/tensorboard.h"

#include <unistd.h>

#include <chrono>
#include <cstring>

#include "engine/core/error.h"
#include "report/tf_record.h"

namespace loft::report {

namespace fs = std::filesystem;

namespace {

// Protobuf wire format, the four encodings these messages use.
class Wire {
 public:
  void varint(uint64_t v) {
    while (v >= 0x80) out_ += char((v & 0x7f) | 0x80), v >>= 7;
    out_ += char(v);
  }
  void tag(int field, int wire_type) { varint(uint64_t(field) << 3 | uint64_t(wire_type)); }
  void fixed64(int field, double v) {  // double
    tag(field, 1);
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    for (int i = 0; i < 8; ++i) out_ += char(bits >> (8 * i));
  }
  void fixed32(int field, float v) {  // float
    tag(field, 5);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int i = 0; i < 4; ++i) out_ += char(bits >> (8 * i));
  }
  void int64(int field, int64_t v) {
    tag(field, 0);
    varint(uint64_t(v));
  }
  void bytes(int field, std::string_view s) {  // string, bytes and nested messages
    tag(field, 2);
    varint(s.size());
    out_ += s;
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// Field numbers of tensorboard/compat/proto/event.proto and summary.proto.
enum EventField { kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5, kSourceMetadata = 10 };
enum SummaryField { kValue = 1 };
enum ValueField { kTag = 1, kSimpleValue = 2 };
enum SourceMetadataField { kWriter = 1 };

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
  return buf;
}

}  // namespace

std::string file_version_event(double wall_time) {
  Wire source, e;
  source.bytes(kWriter, "loft");
  e.fixed64(kWallTime, wall_time);
  e.bytes(kFileVersion, "brain.Event:2");
  e.bytes(kSourceMetadata, source.str());
  return e.str();
}

std::string scalars_event(double wall_time, int64_t step, const Scalars& scalars) {
  Wire summary;
  for (const auto& [tag, value] : scalars) {
    Wire v;
    v.bytes(kTag, tag);
    v.fixed32(kSimpleValue, float(value));
    summary.bytes(kValue, v.str());
  }
  Wire e;
  e.fixed64(kWallTime, wall_time);
  e.int64(kStep, step);
  e.bytes(kSummary, summary.str());
  return e.str();
}

TensorBoardWriter::TensorBoardWriter(const fs::path& dir) {
  fs::create_directories(dir);
  const double now = wall_time();
  const std::string base = cat("events.out.tfevents.", int64_t(now), ".", host_name());
  path_ = dir / base;
  if (fs::exists(path_)) path_ = dir / cat(base, ".", getpid());  // two files in one second (resume)
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) throw Error(cat("cannot write ", path_.string()));
  record(file_version_event(now));
}

void TensorBoardWriter::write(int64_t step, const Scalars& scalars) { record(scalars_event(wall_time(), step, scalars)); }

void TensorBoardWriter::record(const std::string& event) {
  write_tf_record(out_, event);
  out_.flush();
  if (!out_) throw Error(cat("cannot write ", path_.string()));
}

}  // namespace loft::report
