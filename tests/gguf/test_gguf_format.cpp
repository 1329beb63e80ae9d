// The GGUF container: writer -> reader round trip, the exact bytes of a tiny file, and the
// reader's refusal of malformed files.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "../common/test_util.h"
#include "export/gguf/gguf_reader.h"
#include "export/gguf/gguf_writer.h"

namespace loft::gguf {
namespace {

std::string file_bytes(const std::filesystem::path& p) {
  const std::vector<unsigned char> b = test::read_bytes(p);
  return std::string(b.begin(), b.end());
}

File parse_bytes(const std::string& bytes) {
  std::istringstream in(bytes);
  return parse_gguf(in, bytes.size(), "test.gguf");
}

std::string parse_error(const std::string& bytes) {
  try {
    parse_bytes(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GgufFormat, RoundTripsEveryValueTypeTensorInfoAndData) {
  test::TempDir dir;
  const auto path = dir / "all.gguf";
  Writer w(path);
  w.set("k.u8", Value::of<uint8_t>(200));
  w.set("k.i8", Value::of<int8_t>(-100));
  w.set("k.u16", Value::of<uint16_t>(60000));
  w.set("k.i16", Value::of<int16_t>(-30000));
  w.set("k.u32", Value::of<uint32_t>(4000000000u));
  w.set("k.i32", Value::of<int32_t>(-2000000000));
  w.set("k.f32", Value::of<float>(1.5f));
  w.set("k.bool", Value::of<bool>(true));
  w.set("k.str", Value::string("héllo"));
  w.set("k.u64", Value::of<uint64_t>(1ull << 60));
  w.set("k.i64", Value::of<int64_t>(-(1ll << 60)));
  w.set("k.f64", Value::of<double>(-0.125));
  w.set("k.arr_i32", Value::array(std::vector<int32_t>{1, -2, 3}));
  w.set("k.arr_f32", Value::array(std::vector<float>{0.5f, -1.0f}));
  w.set("k.arr_str", Value::string_array({"a", "", "ccc"}));
  w.set("k.arr_empty", Value::array(std::vector<uint8_t>{}));
  w.set("k.u8", Value::of<uint8_t>(201));  // replaced in place
  const int64_t s1[] = {3, 5}, s2[] = {7};
  w.add_tensor("t.a", s1, TensorType::F32);
  w.add_tensor("t.b", s2, TensorType::F32);
  w.begin();
  const std::vector<float> b{1, 2, 3, 4, 5, 6, 7};
  std::vector<float> a(15);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) * 0.25f;
  w.write_tensor(1, b.data(), b.size() * 4);  // out of order
  w.write_tensor(0, a.data(), a.size() * 4);
  w.finish();

  const File f = read_gguf(path);
  EXPECT_EQ(f.version, 3u);
  ASSERT_EQ(f.kv.size(), 16u);
  EXPECT_EQ(f.kv[0].first, "k.u8");
  EXPECT_EQ(f.at("k.u8").get<uint8_t>("k.u8"), 201);
  EXPECT_EQ(f.at("k.i8").get<int8_t>("k.i8"), -100);
  EXPECT_EQ(f.at("k.u16").get<uint16_t>("k.u16"), 60000);
  EXPECT_EQ(f.at("k.i16").get<int16_t>("k.i16"), -30000);
  EXPECT_EQ(f.at("k.u32").get<uint32_t>("k.u32"), 4000000000u);
  EXPECT_EQ(f.at("k.i32").get<int32_t>("k.i32"), -2000000000);
  EXPECT_EQ(f.at("k.f32").get<float>("k.f32"), 1.5f);
  EXPECT_TRUE(f.at("k.bool").get<bool>("k.bool"));
  EXPECT_EQ(f.at("k.str").get_string("k.str"), "héllo");
  EXPECT_EQ(f.at("k.u64").get<uint64_t>("k.u64"), 1ull << 60);
  EXPECT_EQ(f.at("k.i64").get<int64_t>("k.i64"), -(1ll << 60));
  EXPECT_EQ(f.at("k.f64").get<double>("k.f64"), -0.125);
  EXPECT_EQ(f.at("k.arr_i32").get_array<int32_t>("k.arr_i32"), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(f.at("k.arr_f32").get_array<float>("k.arr_f32"), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(f.at("k.arr_str").get_strings("k.arr_str"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_TRUE(f.at("k.arr_empty").get_array<uint8_t>("k.arr_empty").empty());
  EXPECT_TRUE(test::contains(f.at("k.u32").type_name(), "uint32"));
  try {
    f.at("k.u32").get<int32_t>("k.u32");
    FAIL() << "wrong type accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "GGUF key 'k.u32' is uint32, expected int32"));
  }

  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].ne, (std::vector<int64_t>{5, 3}));  // reversed row-major shape
  EXPECT_EQ(f.tensors[0].offset, 0u);
  EXPECT_EQ(f.tensors[1].offset, 64u);  // 60 bytes padded to 32
  EXPECT_EQ(f.data_offset % 32, 0u);
  const std::vector<uint8_t> ra = read_tensor_bytes(path, f, f.tensors[0]);
  const std::vector<uint8_t> rb = read_tensor_bytes(path, f, f.tensors[1]);
  EXPECT_EQ(0, std::memcmp(ra.data(), a.data(), 60));
  EXPECT_EQ(0, std::memcmp(rb.data(), b.data(), 28));
  EXPECT_EQ(f.file_size, f.data_offset + 64 + 32);  // the last tensor is padded too
}

// A file small enough to spell out byte by byte.
TEST(GgufFormat, TinyFileHasTheExactBytes) {
  test::TempDir dir;
  const auto path = dir / "tiny.gguf";
  Writer w(path);
  w.set("a", Value::of<uint32_t>(7));
  const int64_t shape[] = {2};
  w.add_tensor("t", shape, TensorType::F32);
  w.begin();
  const float data[] = {1.0f, -2.0f};
  w.write_tensor(0, data, sizeof data);
  w.finish();

  std::string want;
  want += std::string("GGUF", 4);
  want += std::string("\x03\0\0\0", 4);                      // version 3
  want += std::string("\x01\0\0\0\0\0\0\0", 8);              // 1 tensor
  want += std::string("\x01\0\0\0\0\0\0\0", 8);              // 1 KV
  want += std::string("\x01\0\0\0\0\0\0\0" "a", 9);          // key "a"
  want += std::string("\x04\0\0\0" "\x07\0\0\0", 8);         // uint32 7
  want += std::string("\x01\0\0\0\0\0\0\0" "t", 9);          // tensor name "t"
  want += std::string("\x01\0\0\0", 4);                      // n_dims 1
  want += std::string("\x02\0\0\0\0\0\0\0", 8);              // ne[0] = 2
  want += std::string("\0\0\0\0", 4);                        // F32
  want += std::string("\0\0\0\0\0\0\0\0", 8);                // offset 0
  ASSERT_EQ(want.size(), 74u);
  want += std::string(96 - 74, '\0');                        // pad to 32
  want += std::string("\x00\x00\x80\x3f" "\x00\x00\x00\xc0", 8);  // 1.0f, -2.0f
  want += std::string(24, '\0');                             // tensor padding
  EXPECT_EQ(file_bytes(path), want);
}

TEST(GgufFormat, CustomAlignmentIsWrittenAndUsed) {
  test::TempDir dir;
  const auto path = dir / "a64.gguf";
  Writer w(path);
  w.set_alignment(64);
  const int64_t s[] = {3};
  w.add_tensor("x", s, TensorType::F32);
  w.add_tensor("y", s, TensorType::F32);
  w.begin();
  const float v[] = {1, 2, 3};
  w.write_tensor(0, v, 12);
  w.write_tensor(1, v, 12);
  w.finish();
  const File f = read_gguf(path);
  EXPECT_EQ(f.alignment, 64u);
  EXPECT_EQ(f.at("general.alignment").get<uint32_t>("general.alignment"), 64u);
  EXPECT_EQ(f.data_offset % 64, 0u);
  EXPECT_EQ(f.tensors[1].offset, 64u);
  EXPECT_THROW(w.set_alignment(48), Error);
}

TEST(GgufFormat, WriterRefusesBadInput) {
  test::TempDir dir;
  Writer w(dir / "bad.gguf");
  const int64_t q8[] = {2, 33}, ok[] = {4}, zero[] = {0, 2};
  EXPECT_THROW(w.add_tensor("q", q8, TensorType::Q8_0), Error);  // 33 not a multiple of 32
  EXPECT_THROW(w.add_tensor("z", zero, TensorType::F32), Error);
  EXPECT_THROW(w.add_tensor(std::string(64, 'n'), ok, TensorType::F32), Error);
  w.add_tensor("t", ok, TensorType::F32);
  EXPECT_THROW(w.add_tensor("t", ok, TensorType::F32), Error);
  w.begin();
  const float v[4] = {};
  EXPECT_THROW(w.write_tensor(0, v, 12), Error);  // wrong size
  try {
    w.finish();
    FAIL() << "finished without tensor data";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), "tensor 't' was never written"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.gguf"));
}

// A valid tiny file to corrupt.
std::string tiny_file() {
  test::TempDir dir;
  Writer w(dir / "t.gguf");
  w.set("s", Value::string("abc"));
  w.set("arr", Value::array(std::vector<uint16_t>{1, 2}));
  const int64_t shape[] = {2, 32};
  w.add_tensor("w", shape, TensorType::Q8_0);
  w.begin();
  const std::string zeros(68, '\0');
  w.write_tensor(0, zeros.data(), zeros.size());
  w.finish();
  return file_bytes(dir / "t.gguf");
}

template <typename T>
std::string patched(std::string b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
  return b;
}

TEST(GgufFormat, ReaderValidatesEveryField) {
  const std::string good = tiny_file();
  ASSERT_NO_THROW(parse_bytes(good));
  // Offsets: header 24; key "s" at 24 (length) / 32, its type at 33, string at 37 -> 48; key "arr"
  // at 48, type at 59, element type at 63, count at 67, data -> 79; tensor name at 79, n_dims at
  // 88, dims at 92 / 100, type at 108, offset at 112.
  EXPECT_TRUE(test::contains(parse_error(good.substr(0, 3)), "magic needs 4 bytes"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint32_t>(good, 0, 0x12345678)), "not a GGUF file"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint32_t>(good, 4, 2)), "version 2 is not supported"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint64_t>(good, 8, 1ull << 40)), "tensor count"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint64_t>(good, 16, 1ull << 40)), "metadata count"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint64_t>(good, 24, 1ull << 62)), "metadata key 0"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint64_t>(good, 24, 0)), "metadata key 0 is empty"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint32_t>(good, 33, 13)), "unknown value type 13"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint64_t>(good, 37, 1000)), "value of 's'"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint32_t>(good, 63, 9)), "array of arrays"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint64_t>(good, 67, 1ull << 61)), "claims"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint64_t>(good, 79, 64)), "name has 64 bytes"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint32_t>(good, 88, 5)), "n_dims 5"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint64_t>(good, 92, 31)), "multiple of 32"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint64_t>(good, 100, 1ull << 40)), "runs past the end"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint64_t>(good, 100, ~0ull)), "beyond int64"));
  // fuzz_gguf: an F32 row of 2^62+3 elements is 2^64+12 bytes, which wrapped to 12 and was accepted.
  std::string f32 = patched<uint32_t>(patched<uint64_t>(patched<uint64_t>(good, 92, (1ull << 62) + 3), 100, 1), 108, 0);
  EXPECT_TRUE(test::contains(parse_error(f32), "F32 tensor's size overflows (dimension 0 is 4611686018427387907)"));
  EXPECT_THROW(tensor_bytes(TensorType::F64, std::vector<int64_t>{int64_t(1) << 61}), Error);
  EXPECT_EQ(tensor_bytes(TensorType::F64, std::vector<int64_t>{(int64_t(1) << 60) - 1}), ((uint64_t(1) << 60) - 1) * 8);
  EXPECT_TRUE(test::contains(parse_error(patched<uint32_t>(good, 108, 5)), "unknown ggml type 5"));
  EXPECT_TRUE(test::contains(parse_error(patched<uint64_t>(good, 112, 32)), "has offset 32, expected 0"));
  EXPECT_TRUE(test::contains(parse_error(good.substr(0, good.size() - 40)), "runs past the end"));
  // A duplicated key, and a non-uint32 / non-power-of-two general.alignment.
  test::TempDir dir;
  Writer w(dir / "al.gguf");
  w.set("general.alignment", Value::of<uint32_t>(24));
  w.begin();
  w.finish();
  EXPECT_TRUE(test::contains(parse_error(file_bytes(dir / "al.gguf")), "general.alignment 24 is not a power of two"));
  Writer w2(dir / "al2.gguf");
  w2.set("general.alignment", Value::of<uint64_t>(32));
  w2.begin();
  w2.finish();
  EXPECT_TRUE(test::contains(parse_error(file_bytes(dir / "al2.gguf")), "general.alignment is uint64"));
}

TEST(GgufFormat, ReaderRefusesDuplicatesAndBadBools) {
  test::TempDir dir;
  Writer w(dir / "d.gguf");
  w.set("aa", Value::of<bool>(true));
  w.set("ab", Value::of<uint8_t>(1));
  w.begin();
  w.finish();
  std::string b = file_bytes(dir / "d.gguf");
  // key "aa" at 24 (len) / 32 (text); its bool at 38; key "ab" text at 47.
  EXPECT_TRUE(test::contains(parse_error(patched<uint8_t>(b, 38, 2)), "is bool but holds 2"));
  EXPECT_TRUE(test::contains(parse_error(patched<char>(b, 48, 'a')), "metadata key 'aa' appears twice"));
  // Keys are quoted at most 80 bytes long: a 100 KB key, twice, or with a truncated value.
  Writer w2(dir / "long.gguf");
  w2.set(std::string(100000, 'k'), Value::of<uint32_t>(1));
  w2.set(std::string(99999, 'k') + "j", Value::of<uint32_t>(2));
  w2.begin();
  w2.finish();
  const std::string l = file_bytes(dir / "long.gguf");
  const std::string twice = parse_error(patched<char>(l, 24 + 100008 + 8 + 8 + 99999, 'k'));
  EXPECT_TRUE(test::contains(twice, "appears twice")) << twice.substr(0, 300);
  EXPECT_LT(twice.size(), 300u);
  const std::string cut = parse_error(l.substr(0, 24 + 100008 + 6));
  EXPECT_TRUE(test::contains(cut, "value of 'kkk")) << cut.substr(0, 300);
  EXPECT_LT(cut.size(), 300u);
}

// Random corruptions of a valid file: the reader either accepts the bytes or throws loft::Error,
// never crashes or tries to allocate what a size field claims.
TEST(GgufFormat, ReaderSurvivesRandomCorruption) {
  const std::string good = tiny_file();
  std::mt19937 rng(11);
  int rejected = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::string b = good;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) b[rng() % b.size()] = char(rng() % 4 == 0 ? 0xff : rng() % 256);
    if (rng() % 5 == 0) b.resize(rng() % b.size());
    try {
      parse_bytes(b);
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
}

}  // namespace
}  // namespace loft::gguf
