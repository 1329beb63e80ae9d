// Hugging Face safetensors folders: a single file, an index + shards, and every way the index
// and the shards can disagree.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/io/safetensors_checkpoint.h"
#include "engine/io/safetensors_writer.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

Tensor ones(Shape shape) {
  return Tensor::from_vector(std::vector<float>(size_t(shape_numel(shape)), 1.0f), shape);
}

void write_index(const test::TempDir& dir, const std::string& weight_map_json) {
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata": {"total_size": 0}, "weight_map": )" << weight_map_json << "}";
}

std::string open_error(const std::filesystem::path& dir) {
  try {
    SafetensorsCheckpoint::open(dir);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "opening " << dir << " did not fail";
  return "";
}

// Two shards: a, b in the first; c in the second.
void write_two_shards(const test::TempDir& dir) {
  write_safetensors(dir / "s1.safetensors", {{"a", ones({2, 3})}, {"b", ones({5})}});
  write_safetensors(dir / "s2.safetensors", {{"c", ones({7, 1})}});
}

TEST(SafetensorsCheckpoint, SingleFile) {
  test::TempDir dir;
  write_safetensors(dir / "model.safetensors", {{"x", ones({4})}, {"y", ones({2, 2})}});
  const auto ck = SafetensorsCheckpoint::open(dir.path());
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(ck.files().size(), 1u);
  EXPECT_EQ(ck.parameter_count(), 8);
  EXPECT_EQ(ck.dtypes(), std::vector<DType>{DType::F32});
  EXPECT_EQ(ck.tensor("y").shape(), (Shape{2, 2}));
  EXPECT_TRUE(test::contains(
      [&] {
        try {
          ck.tensor("zz");
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      "no tensor named zz"));
}

TEST(SafetensorsCheckpoint, ShardedIndex) {
  test::TempDir dir;
  write_two_shards(dir);
  write_index(dir, R"({"a": "s1.safetensors", "b": "s1.safetensors", "c": "s2.safetensors"})");
  const auto ck = SafetensorsCheckpoint::open(dir.path());
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ck.parameter_count(), 6 + 5 + 7);
  EXPECT_EQ(ck.file_of("c").path().filename(), "s2.safetensors");
  EXPECT_EQ(ck.info("a").shape, (Shape{2, 3}));
}

TEST(SafetensorsCheckpoint, ShardNamedInIndexButAbsent) {
  test::TempDir dir;
  write_safetensors(dir / "s1.safetensors", {{"a", ones({1})}});
  write_index(dir, R"({"a": "s1.safetensors", "c": "s9.safetensors"})");
  const std::string msg = open_error(dir.path());
  EXPECT_TRUE(test::contains(msg, "model.safetensors.index.json"));
  EXPECT_TRUE(test::contains(msg, "s9.safetensors"));
  EXPECT_TRUE(test::contains(msg, "holding c"));
}

TEST(SafetensorsCheckpoint, IndexAndShardsDisagree) {
  test::TempDir dir;
  write_two_shards(dir);
  write_index(dir, R"({"a": "s1.safetensors", "b": "s1.safetensors", "c": "s1.safetensors"})");
  std::string msg = open_error(dir.path());
  EXPECT_TRUE(test::contains(msg, "tensor c is mapped to s1.safetensors"));
  write_index(dir, R"({"a": "s1.safetensors", "zz": "s2.safetensors"})");
  EXPECT_TRUE(test::contains(open_error(dir.path()), "tensor zz"));
  // One tensor stored in two shards.
  write_safetensors(dir / "s2.safetensors", {{"a", ones({1})}});
  write_index(dir, R"({"a": "s1.safetensors", "b": "s2.safetensors"})");
  EXPECT_TRUE(test::contains(open_error(dir.path()), "tensor a is also stored in"));
}

TEST(SafetensorsCheckpoint, BadIndexFiles) {
  test::TempDir dir;
  write_two_shards(dir);
  std::ofstream(dir / "model.safetensors.index.json") << "{not json";
  EXPECT_TRUE(test::contains(open_error(dir.path()), "not valid JSON"));
  std::ofstream(dir / "model.safetensors.index.json") << R"({"metadata": {}})";
  EXPECT_TRUE(test::contains(open_error(dir.path()), "no \"weight_map\""));
  write_index(dir, R"({"a": 3})");
  EXPECT_TRUE(test::contains(open_error(dir.path()), "'a' is not a file name"));
  write_index(dir, R"({"a": "../s1.safetensors"})");
  EXPECT_TRUE(test::contains(open_error(dir.path()), "not a file in the same folder"));
}

TEST(SafetensorsCheckpoint, EmptyFolder) {
  test::TempDir dir;
  const std::string msg = open_error(dir.path());
  EXPECT_TRUE(test::contains(msg, dir.path().string()));
  EXPECT_TRUE(test::contains(msg, "no model.safetensors or model.safetensors.index.json"));
}

TEST(SafetensorsCheckpoint, BadShardNamesTheShard) {
  test::TempDir dir;
  write_safetensors(dir / "s1.safetensors", {{"a", ones({1})}});
  std::ofstream(dir / "s2.safetensors") << "xx";
  write_index(dir, R"({"a": "s1.safetensors", "b": "s2.safetensors"})");
  const std::string msg = open_error(dir.path());
  EXPECT_TRUE(test::contains(msg, "s2.safetensors"));
  EXPECT_TRUE(test::contains(msg, "truncated"));
}

}  // namespace
}  // namespace loft
