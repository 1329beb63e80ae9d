// TensorBoard event files: CRC-32C against its check value, TFRecord framing read back with CRCs
// checked (and a flipped byte caught), and events decoded by protoc against the schema with the
// field numbers of TensorBoard's event.proto/summary.proto.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "report/crc32c.h"
#include "report/tensorboard.h"
#include "report/tf_record.h"
#include "tests/common/event_decode.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;

TEST(Crc32c, MatchesTheCheckValues) {
  EXPECT_EQ(report::crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value (RFC 3720)
  EXPECT_EQ(report::crc32c(""), 0u);
  EXPECT_EQ(report::crc32c(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720 B.4: 32 bytes of zeros
  const uint32_t c = report::crc32c("abc");
  EXPECT_EQ(report::masked_crc32c("abc"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TfRecord, RoundTripsAndCatchesCorruption) {
  test::TempDir dir;
  const std::vector<std::string> records = {"", "a", std::string(300, 'x'), std::string("\0\xff\x01", 3)};
  {
    std::ofstream f(dir / "r.tfrecord", std::ios::binary);
    for (const auto& r : records) report::write_tf_record(f, r);
  }
  EXPECT_EQ(report::read_tf_records(dir / "r.tfrecord"), records);
  // Header: 8 length bytes + 4 CRC bytes; flip a data byte of the third record.
  std::string bytes;
  {
    std::ifstream f(dir / "r.tfrecord", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  const size_t third = (12 + 0 + 4) + (12 + 1 + 4);
  bytes[third + 12 + 10] ^= 1;
  {
    std::ofstream f(dir / "bad.tfrecord", std::ios::binary);
    f << bytes;
  }
  try {
    report::read_tf_records(dir / "bad.tfrecord");
    FAIL() << "corruption not caught";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "record at byte 33: data CRC mismatch"));
  }
  {
    std::ofstream f(dir / "torn.tfrecord", std::ios::binary);
    f << bytes.substr(0, third + 20);
  }
  EXPECT_THROW(report::read_tf_records(dir / "torn.tfrecord"), Error);
}

TEST(TensorBoard, WriterFileHoldsVersionThenEveryScalar) {
  test::TempDir dir;
  fs::path file;
  {
    report::TensorBoardWriter w(dir / "tb");
    file = w.path();
    w.write(1, {{"train/loss", 2.5}, {"train/lr", 1e-4}});
    w.write(2, {{"train/loss", 2.25}, {"val/loss", 3.0}});
  }
  EXPECT_TRUE(file.filename().string().starts_with("events.out.tfevents.")) << file;
  EXPECT_EQ(report::read_tf_records(file).size(), 3u);
  const auto d = test::decode_event_file(file);
  if (!d) GTEST_SKIP() << "protoc is not installed (scripts/setup.sh installs protobuf-compiler)";
  EXPECT_EQ(d->file_version, "brain.Event:2");
  EXPECT_TRUE(test::contains(d->text[0], "writer: \"loft\""));
  using S = std::tuple<int64_t, std::string, double>;
  ASSERT_EQ(d->scalars.size(), 4u);
  EXPECT_EQ(d->scalars[0], S(1, "train/loss", 2.5));
  EXPECT_EQ(std::get<1>(d->scalars[1]), "train/lr");
  EXPECT_NEAR(std::get<2>(d->scalars[1]), 1e-4, 1e-10);  // float32 on the wire
  EXPECT_EQ(d->scalars[2], S(2, "train/loss", 2.25));
  EXPECT_EQ(d->scalars[3], S(2, "val/loss", 3.0));
  // A second writer on the same folder (a resumed run) starts a file of its own.
  report::TensorBoardWriter again(dir / "tb");
  EXPECT_NE(again.path(), file);
}

}  // namespace
}  // namespace loft
