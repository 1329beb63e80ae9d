// Malformed safetensors files: every one fails at open with one line naming the file (and the
// tensor when one is at fault), never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "engine/io/safetensors_reader.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

// Writes an 8-byte length (given, or the header's size) + header text + `data_bytes` zero bytes.
std::filesystem::path write_raw(const test::TempDir& dir, const std::string& header,
                                size_t data_bytes, std::optional<uint64_t> len = std::nullopt) {
  const auto path = dir / "bad.safetensors";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t n = len.value_or(header.size());
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << std::string(data_bytes, '\0');
  return path;
}

// The error message of opening `path` (fails the test when it opens).
std::string open_error(const std::filesystem::path& path) {
  try {
    SafetensorsReader::open(path);
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line error: " << msg;
    EXPECT_NE(msg.find(path.string()), std::string::npos)
        << "error does not name the file: " << msg;
    return msg;
  }
  ADD_FAILURE() << "opening " << path << " did not fail";
  return "";
}

const std::string kGood = R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";

TEST(SafetensorsErrors, GoodBaselineOpens) {
  test::TempDir dir;
  const auto r = SafetensorsReader::open(write_raw(dir, kGood, 24));
  EXPECT_EQ(r.info("w").shape, (Shape{2, 3}));
  EXPECT_THROW(r.info("nope"), Error);
  EXPECT_THROW(r.tensor("nope"), Error);
}

TEST(SafetensorsErrors, MissingFileAndDirectory) {
  test::TempDir dir;
  EXPECT_TRUE(test::contains(open_error(dir / "absent.safetensors"), "cannot open"));
  std::filesystem::create_directory(dir / "d.safetensors");
  EXPECT_TRUE(test::contains(open_error(dir / "d.safetensors"), "not a regular file"));
}

TEST(SafetensorsErrors, TruncatedFiles) {
  test::TempDir dir;
  const auto path = dir / "short.safetensors";
  std::ofstream(path, std::ios::binary) << "abc";
  EXPECT_TRUE(test::contains(open_error(path), "truncated"));
  // Header claims more bytes than the file has.
  EXPECT_TRUE(
      test::contains(open_error(write_raw(dir, kGood, 0, kGood.size() + 100)), "truncated"));
  // Data area cut short: the tensor's offsets run past the end.
  const std::string msg = open_error(write_raw(dir, kGood, 20));
  EXPECT_TRUE(test::contains(msg, "'w'"));
  EXPECT_TRUE(test::contains(msg, "outside the data area"));
}

TEST(SafetensorsErrors, AbsurdHeaderLength) {
  test::TempDir dir;
  EXPECT_TRUE(
      test::contains(open_error(write_raw(dir, kGood, 24, uint64_t(1) << 40)), "not plausible"));
  EXPECT_TRUE(test::contains(open_error(write_raw(dir, "{}", 0, 1)), "not plausible"));
  EXPECT_TRUE(test::contains(open_error(write_raw(dir, "", 0, 0)), "not plausible"));
}

TEST(SafetensorsErrors, HeaderNotJsonOrNotObject) {
  test::TempDir dir;
  EXPECT_TRUE(
      test::contains(open_error(write_raw(dir, R"({"w": {"dtype": )", 0)), "not valid JSON"));
  EXPECT_TRUE(test::contains(open_error(write_raw(dir, "[1, 2, 3]", 0)), "not a JSON object"));
  EXPECT_TRUE(test::contains(open_error(write_raw(dir, R"({"w": 5})", 0)), "'w'"));
  EXPECT_TRUE(test::contains(open_error(write_raw(dir, R"({"__metadata__": {"a": 1}})", 0)),
                             "__metadata__"));
  EXPECT_TRUE(
      test::contains(open_error(write_raw(dir, R"({"__metadata__": [1]})", 0)), "__metadata__"));
}

TEST(SafetensorsErrors, MissingFieldsAndBadTypes) {
  test::TempDir dir;
  struct Case {
    std::string header, expect;
  };
  const Case cases[] = {
      {R"({"t":{"shape":[1],"data_offsets":[0,4]}})", "\"dtype\""},
      {R"({"t":{"dtype":"F32","data_offsets":[0,4]}})", "\"shape\""},
      {R"({"t":{"dtype":"F32","shape":[1]}})", "\"data_offsets\""},
      {R"({"t":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", "not a string"},
      {R"({"t":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", "not an array"},
      {R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "bad dimension"},
      {R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "bad dimension"},
      {R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "two non-negative integers"},
      {R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", "two non-negative integers"},
      {R"({"t":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", "unsupported dtype 'F64'"},
      {R"({"t":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", "unsupported dtype 'BOOL'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    const std::string msg = open_error(write_raw(dir, c.header, 8));
    EXPECT_TRUE(test::contains(msg, "tensor 't'"));
    EXPECT_TRUE(test::contains(msg, c.expect));
  }
}

TEST(SafetensorsErrors, OffsetsOutOfRangeOrReversed) {
  test::TempDir dir;
  std::string msg = open_error(
      write_raw(dir, R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[100,104]}})", 16));
  EXPECT_TRUE(test::contains(msg, "'t'"));
  EXPECT_TRUE(test::contains(msg, "outside the data area of 16 bytes"));
  msg = open_error(write_raw(dir, R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[8,4]}})", 16));
  EXPECT_TRUE(test::contains(msg, "begin after end"));
}

TEST(SafetensorsErrors, ShapeSpanMismatch) {
  test::TempDir dir;
  const std::string msg = open_error(
      write_raw(dir, R"({"t":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,8]}})", 16));
  EXPECT_TRUE(test::contains(msg, "'t'"));
  EXPECT_TRUE(test::contains(msg, "needs 12 bytes but data_offsets span 8"));
  // A shape whose byte size overflows 64 bits is rejected, not wrapped around.
  EXPECT_TRUE(test::contains(
      open_error(write_raw(
          dir, R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0)),
      "overflows"));
}

TEST(SafetensorsErrors, OverlappingTensors) {
  test::TempDir dir;
  const std::string msg =
      open_error(write_raw(dir,
                           R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},
                   "b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                           16));
  EXPECT_TRUE(test::contains(msg, "'a'"));
  EXPECT_TRUE(test::contains(msg, "'b'"));
  EXPECT_TRUE(test::contains(msg, "overlaps"));
  // Empty tensors share no bytes, so one sitting inside another's span is fine.
  SafetensorsReader::open(write_raw(dir,
                                    R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},
                   "e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})",
                                    16));
}

TEST(SafetensorsErrors, MisalignedDataIsCopiedNotMisread) {
  test::TempDir dir;
  // A header length of 7 mod 8 puts the data area at an odd address: the F32 is misaligned.
  std::string header = R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  while (header.size() % 8 != 7) header += ' ';
  ASSERT_NE((8 + header.size()) % 4, 0u);
  const auto path = dir / "mis.safetensors";
  {
    std::ofstream out(path, std::ios::binary);
    const uint64_t n = header.size();
    const float v = 3.25f;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header;
    out.write(reinterpret_cast<const char*>(&v), 4);
  }
  const Tensor t = SafetensorsReader::open(path).tensor("t");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 4, 0u);
  EXPECT_EQ(t.to_float_vector(), std::vector<float>{3.25f});
}

}  // namespace
}  // namespace loft
