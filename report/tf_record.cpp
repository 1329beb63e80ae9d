#include "report/tf_record.h"

#include <fstream>
#include <iterator>

#include "engine/core/error.h"
#include "report/crc32c.h"

namespace loft::report {

namespace {

template <typename T>
std::string little_endian(T v) {
  std::string s(sizeof(T), '\0');
  for (size_t i = 0; i < sizeof(T); ++i) s[i] = char((v >> (8 * i)) & 0xff);
  return s;
}

template <typename T>
T from_little_endian(std::string_view s) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= T(static_cast<unsigned char>(s[i])) << (8 * i);
  return v;
}

}  // namespace

void write_tf_record(std::ostream& out, std::string_view data) {
  const std::string len = little_endian<uint64_t>(data.size());
  out << len << little_endian<uint32_t>(masked_crc32c(len)) << data
      << little_endian<uint32_t>(masked_crc32c(data));
}

std::vector<std::string> read_tf_records(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(cat("cannot read ", file.string()));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string_view all(bytes);
  std::vector<std::string> records;
  for (size_t pos = 0; pos < all.size();) {
    const auto bad = [&](const char* what) {
      return Error(cat(file.string(), ": record at byte ", pos, ": ", what));
    };
    if (all.size() - pos < 12) throw bad("truncated header");
    const std::string_view len = all.substr(pos, 8);
    if (from_little_endian<uint32_t>(all.substr(pos + 8, 4)) != masked_crc32c(len)) throw bad("length CRC mismatch");
    const uint64_t n = from_little_endian<uint64_t>(len);
    if (all.size() - pos - 12 < n + 4) throw bad("truncated data");
    const std::string_view data = all.substr(pos + 12, n);
    if (from_little_endian<uint32_t>(all.substr(pos + 12 + n, 4)) != masked_crc32c(data)) throw bad("data CRC mismatch");
    records.emplace_back(data);
    pos += 12 + n + 4;
  }
  return records;
}

}  // namespace loft::report
