// Safetensors reader/writer: round trips, atomic rewrite, zero-copy lifetime, and a real file.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/io/safetensors_reader.h"
#include "engine/io/safetensors_writer.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

std::vector<unsigned char> tensor_bytes(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.data());
  return {p, p + t.nbytes()};
}

template <typename T>
Tensor host_tensor(const std::vector<T>& v, Shape shape, DType dtype) {
  return Tensor::from_host(v.data(), std::move(shape), dtype);
}

std::map<std::string, Tensor> sample_tensors() {
  std::mt19937 rng(7);
  std::map<std::string, Tensor> m;
  m["a.f32"] = test::random_tensor({3, 5}, rng);
  m["b.bf16"] = host_tensor<uint16_t>({0x3f80, 0xbf80, 0x4049, 0x0001, 0x7f80, 0xc2f7, 0x0000}, {7},
                                      DType::BF16);
  m["c.f16"] = host_tensor<uint16_t>({0x3c00, 0xc000, 0x7bff}, {1, 3}, DType::F16);
  m["d.i32"] = host_tensor<int32_t>({1, -2, 3, -4, 5, -6, 7, -8}, {2, 2, 2}, DType::I32);
  m["e.i64"] = host_tensor<int64_t>({int64_t(1) << 40, -1, 0}, {3}, DType::I64);
  m["f.u8"] = host_tensor<uint8_t>({0, 255, 17}, {3}, DType::U8);
  m["g.i8"] = host_tensor<int8_t>({-128}, {}, DType::I8);  // a scalar
  m["h.e4m3"] = host_tensor<uint8_t>({0x38, 0x7e, 0xb8, 0x01, 0x00}, {5}, DType::F8_E4M3);
  m["i.e5m2"] = host_tensor<uint8_t>({0x3c, 0x7b, 0x7c}, {3}, DType::F8_E5M2);
  m["j.empty"] = Tensor::empty({0, 4}, DType::F32);
  return m;
}

TEST(Safetensors, RoundTripEveryDtypeAndMetadata) {
  test::TempDir dir;
  const auto tensors = sample_tensors();
  const std::map<std::string, std::string> meta{{"format", "pt"}, {"note", "ünïcode \"q\""}};
  write_safetensors(dir / "x.safetensors", tensors, meta);

  const auto r = SafetensorsReader::open(dir / "x.safetensors");
  EXPECT_EQ(r.metadata(), meta);
  std::vector<std::string> expected_names;
  for (const auto& kv : tensors) expected_names.push_back(kv.first);
  EXPECT_EQ(r.names(), expected_names);
  int64_t numel = 0;
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    const Tensor got = r.tensor(name);
    EXPECT_EQ(got.dtype(), t.dtype());
    EXPECT_EQ(got.shape(), t.shape());
    EXPECT_TRUE(got.device().is_cpu());
    EXPECT_EQ(tensor_bytes(got), tensor_bytes(t));
    EXPECT_EQ(r.info(name).end - r.info(name).begin, t.nbytes());
    numel += t.numel();
  }
  EXPECT_EQ(r.parameter_count(), numel);
  EXPECT_TRUE(r.contains("a.f32"));
  EXPECT_FALSE(r.contains("zzz"));
}

TEST(Safetensors, HeaderPaddedAndOutputDeterministic) {
  test::TempDir dir;
  const auto tensors = sample_tensors();
  write_safetensors(dir / "1.safetensors", tensors, {{"k", "v"}});
  write_safetensors(dir / "2.safetensors", tensors, {{"k", "v"}});
  const auto b1 = test::read_bytes(dir / "1.safetensors");
  EXPECT_EQ(b1, test::read_bytes(dir / "2.safetensors"));
  uint64_t len;
  std::memcpy(&len, b1.data(), 8);
  EXPECT_EQ((8 + len) % 8, 0u);
  // Data laid out in name order, back to back from offset 0.
  const auto r = SafetensorsReader::open(dir / "1.safetensors");
  size_t offset = 0;
  for (const auto& name : r.names()) {
    EXPECT_EQ(r.info(name).begin, offset) << name;
    offset = r.info(name).end;
  }
  EXPECT_EQ(8 + len + offset, b1.size());
  // Only the two files: no temporary left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 2);
}

TEST(Safetensors, RewriteIsAtomicAndOldViewsStayValid) {
  test::TempDir dir;
  const auto path = dir / "w.safetensors";
  write_safetensors(path, {{"t", Tensor::from_vector(std::vector<float>{1, 2, 3}, {3})}});
  Tensor old_view = SafetensorsReader::open(path).tensor("t");  // reader gone, view keeps the map
  write_safetensors(path, {{"t", Tensor::from_vector(std::vector<float>{4, 5, 6, 7}, {4})}});
  EXPECT_EQ(old_view.to_float_vector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(SafetensorsReader::open(path).tensor("t").to_float_vector(),
            (std::vector<float>{4, 5, 6, 7}));
}

TEST(Safetensors, WriterRejectsBadInput) {
  test::TempDir dir;
  EXPECT_THROW(write_safetensors(dir / "a.safetensors", {{"x", Tensor()}}), Error);
  EXPECT_THROW(
      write_safetensors(dir / "a.safetensors", {{"__metadata__", Tensor::zeros({1}, DType::F32)}}),
      Error);
  try {
    write_safetensors(dir / "no/such/dir/a.safetensors", {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/dir/a.safetensors"), std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "a.safetensors"));
}

TEST(Safetensors, ZeroTensorFileRoundTrips) {
  test::TempDir dir;
  write_safetensors(dir / "e.safetensors", {});
  const auto r = SafetensorsReader::open(dir / "e.safetensors");
  EXPECT_TRUE(r.names().empty());
  EXPECT_EQ(r.parameter_count(), 0);
}

// The real converted checkpoint: header entries agree with values decoded from raw file bytes.
TEST(Safetensors, ReadsRealFileAndMatchesRawBytes) {
  const auto path = test::data_path("models/stories260K-hf/model.safetensors");
  const auto r = SafetensorsReader::open(path);
  EXPECT_EQ(r.names().size(), 2u + 5u * 9u);
  EXPECT_EQ(r.metadata().at("format"), "pt");

  const auto raw = test::read_bytes(path);
  uint64_t len;
  std::memcpy(&len, raw.data(), 8);
  const auto header = nlohmann::json::parse(raw.begin() + 8, raw.begin() + 8 + long(len));
  for (const char* name : {"model.embed_tokens.weight", "model.layers.4.mlp.down_proj.weight"}) {
    const auto& h = header[name];
    const size_t begin = h["data_offsets"][0].get<size_t>();
    const Tensor t = r.tensor(name);
    EXPECT_EQ(t.shape(), h["shape"].get<Shape>());
    const auto vals = t.to_float_vector();
    for (size_t i : {size_t(0), size_t(1), vals.size() / 2, vals.size() - 1}) {
      float expect;
      std::memcpy(&expect, raw.data() + 8 + len + begin + 4 * i, 4);
      EXPECT_EQ(vals[i], expect) << name << " element " << i;
    }
  }
}

}  // namespace
}  // namespace loft
