// Helpers shared by the test suites: where the test data lives, random tensors, error norms.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "engine/ops/cases/random_inputs.h"
#include "engine/tensor/tensor.h"

namespace loft::test {

// The test data file or folder `rel` ("models/stories260K-hf", "gsm8k/train.jsonl"): the first of
// $LOFT_TEST_DATA/rel, the repository's tests/data/rel and ../shared/data/rel (beside the checkout)
// that exists, else tests/data/rel. Name the leaf, not a parent folder to join onto: tests/data
// holds a subset of the full set (tests/data/README.md), so a parent there may lack the rest.
std::filesystem::path data_path(const std::string& rel);
// Whether any of those places holds `rel`.
bool have_data(const std::string& rel);
// The places data_path searches, for skip messages.
std::string data_places();
// Skips the test, naming the file, when the data it needs is in none of those places (the large
// files tests/data leaves out).
#define LOFT_REQUIRE_DATA(rel)                                                              \
  if (!::loft::test::have_data(rel))                                                        \
  GTEST_SKIP() << "needs test data " << (rel) << ", which is not in " << ::loft::test::data_places() \
               << " (tests/data/README.md)"
// The checkout's root (README.md, examples/, tests/): $LOFT_SOURCE_DIR, else the source folder
// CMake configured. Never __FILE__: ccache's base_dir makes that relative.
std::filesystem::path source_dir();
// The loft binary of this build (tests that run it as a process).
const char* loft_binary();
// A fresh, empty temporary directory removed when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// The random inputs every suite draws (engine/ops/cases/random_inputs.h).
using cases::random_doc_start;
using cases::random_ids;
using cases::random_tensor;

// ‖a − b‖ / ‖b‖ over the float values of two tensors of equal numel (any float dtype, any device).
// Returns +inf when either holds a NaN/Inf, so NaN never passes a tolerance.
double rel_error(const Tensor& a, const Tensor& b);
double rel_error(const std::vector<float>& a, const std::vector<float>& b);
// Bit-identical results: same dtype, shape and bytes (any device). Fails with the rel_error.
::testing::AssertionResult same_bytes(const Tensor& got, const Tensor& want);

// Error-message checks: EXPECT_TRUE(test::contains(msg, "tensor 'w'")) reports both strings.
::testing::AssertionResult contains(const std::string& text, const std::string& part);
// Every non-empty line of a JSONL file, parsed (metrics.jsonl, say); empty when it cannot be read.
std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path);
// The whole file as bytes (empty when it cannot be read).
std::vector<unsigned char> read_bytes(const std::filesystem::path& path);
// The whole file as a string (empty when it cannot be read).
std::string read_text(const std::filesystem::path& path);

// True when a CUDA GPU is usable; GPU tests call GTEST_SKIP() otherwise.
bool have_gpu();
#define LOFT_REQUIRE_GPU() \
  if (!::loft::test::have_gpu()) GTEST_SKIP() << "no CUDA GPU on this machine"

}  // namespace loft::test
