#include "tests/common/test_util.h"

#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>

namespace loft::test {

namespace {

std::vector<std::filesystem::path> data_roots() {
  std::vector<std::filesystem::path> roots;
  if (const char* env = std::getenv("LOFT_TEST_DATA"); env && *env) roots.emplace_back(env);
  roots.push_back(source_dir() / "tests" / "data");
  roots.emplace_back(LOFT_SHARED_TEST_DATA);
  return roots;
}

std::optional<std::filesystem::path> find_data(const std::string& rel) {
  for (const auto& root : data_roots())
    if (std::filesystem::exists(root / rel)) return root / rel;
  return std::nullopt;
}

}  // namespace

std::filesystem::path data_path(const std::string& rel) {
  return find_data(rel).value_or(source_dir() / "tests" / "data" / rel);
}

bool have_data(const std::string& rel) { return find_data(rel).has_value(); }

std::string data_places() {
  std::string out;
  for (const auto& root : data_roots()) out += (out.empty() ? "" : ", ") + root.string();
  return out;
}

std::filesystem::path source_dir() {
  if (const char* env = std::getenv("LOFT_SOURCE_DIR"); env && *env) return env;
  return LOFT_SOURCE_DIR;
}

const char* loft_binary() { return LOFT_BINARY; }

TempDir::TempDir() {
  static std::mt19937_64 rng{std::random_device{}()};
  path_ = std::filesystem::temp_directory_path() / ("loft-test-" + std::to_string(rng()));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  if (den == 0) return std::sqrt(num);
  return std::sqrt(num / den);
}

double rel_error(const Tensor& a, const Tensor& b) {
  return rel_error(a.to_float_vector(), b.to_float_vector());
}

::testing::AssertionResult same_bytes(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure() << got.str() << " vs " << want.str();
  const Tensor g = got.to(Device::cpu()), w = want.to(Device::cpu());
  if (std::memcmp(g.data(), w.data(), g.nbytes()) != 0)
    return ::testing::AssertionFailure() << "values differ (rel_error " << rel_error(g, w) << ")";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' not in: " << text;
}

std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::ifstream f(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<unsigned char> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool have_gpu() { return cuda_device_count() > 0; }

}  // namespace loft::test
