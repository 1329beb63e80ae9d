// engine/core/byte_size: the one size parser (--max-shard-size, --gpu-memory-limit, info --card).
#include <gtest/gtest.h>

#include "engine/core/byte_size.h"
#include "engine/core/error.h"

namespace loft {
namespace {

constexpr int64_t kGiB = int64_t(1) << 30;

TEST(ByteSize, Units) {
  EXPECT_EQ(parse_byte_size("24GiB", "--x"), 24 * kGiB);
  EXPECT_EQ(parse_byte_size("24gib", "--x"), 24 * kGiB);
  EXPECT_EQ(parse_byte_size("24G", "--x"), 24 * kGiB);  // bare letters are binary, as docker reads them
  EXPECT_EQ(parse_byte_size("24 GiB", "--x"), 24 * kGiB);
  EXPECT_EQ(parse_byte_size("24GB", "--x"), 24'000'000'000);
  EXPECT_EQ(parse_byte_size("16000MB", "--x"), 16'000'000'000);
  EXPECT_EQ(parse_byte_size("500mb", "--x"), 500'000'000);
  EXPECT_EQ(parse_byte_size("60KB", "--x"), 60'000);
  EXPECT_EQ(parse_byte_size("2KiB", "--x"), 2048);
  EXPECT_EQ(parse_byte_size("3M", "--x"), 3 << 20);
  EXPECT_EQ(parse_byte_size("1T", "--x"), 1024 * kGiB);
  EXPECT_EQ(parse_byte_size("2TB", "--x"), 2'000'000'000'000);
  EXPECT_EQ(parse_byte_size("1000", "--x"), 1000);
  EXPECT_EQ(parse_byte_size("1000B", "--x"), 1000);
  EXPECT_EQ(parse_byte_size("1.5GiB", "--x"), 3 * kGiB / 2);
  EXPECT_EQ(parse_byte_size("0.5KB", "--x"), 500);
  EXPECT_EQ(parse_byte_size("1.0005KB", "--x"), 1000);  // rounded down to whole bytes
  EXPECT_EQ(parse_byte_size("007GiB", "--x"), 7 * kGiB);
}

TEST(ByteSize, BadValuesNameTheOption) {
  for (const char* bad : {"", "GiB", "lots", "-1GiB", "+1GiB", "0", "0GiB", "0.0001", "1e9", "5XB",
                          "24 GiB ", " 24GiB", "24GiBs", "1.5", "1..5GiB", "nan", "inf", "0x10"}) {
    try {
      parse_byte_size(bad, "--gpu-memory-limit");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("--gpu-memory-limit: '", 0), 0u) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
}

TEST(ByteSize, Overflow) {
  EXPECT_EQ(parse_byte_size("9223372036854775807", "--x"), INT64_MAX);
  EXPECT_THROW(parse_byte_size("9223372036854775808", "--x"), UsageError);
  EXPECT_EQ(parse_byte_size("8388607TiB", "--x"), int64_t(8388607) << 40);
  EXPECT_THROW(parse_byte_size("8388608TiB", "--x"), UsageError);   // 2^63
  EXPECT_THROW(parse_byte_size("99999999999999999999TB", "--x"), UsageError);
  EXPECT_THROW(parse_byte_size(std::string(40, '9') + "GiB", "--x"), UsageError);
  try {
    parse_byte_size("20000000000GiB", "--x");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos) << e.what();
  }
}

TEST(ByteSize, FormatReadsBack) {
  EXPECT_EQ(format_byte_size(24 * kGiB), "24 GiB");
  EXPECT_EQ(format_byte_size(16'000'000'000), "16 GB");
  EXPECT_EQ(format_byte_size(1536 << 20), "1536 MiB");
  EXPECT_EQ(format_byte_size(1000), "1 KB");
  EXPECT_EQ(format_byte_size(1001), "1001 B");
  for (int64_t b : {int64_t(1), int64_t(999), 24 * kGiB, int64_t(16'000'000'000), int64_t(123456789),
                    int64_t(3) << 40, INT64_MAX})
    EXPECT_EQ(parse_byte_size(format_byte_size(b), "--x"), b) << format_byte_size(b);
}

}  // namespace
}  // namespace loft
