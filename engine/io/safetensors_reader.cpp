#include "engine/io/safetensors_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <tuple>

#include "engine/core/error.h"
#include "engine/io/json_read.h"

namespace loft {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; loft reads it in place");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the limit the reference implementation uses

struct Mapping {
  void* addr = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (addr) ::munmap(addr, bytes);
  }
};

// Maps the whole file read-only. Files shorter than 8 bytes are rejected before mapping.
std::shared_ptr<Mapping> map_file(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(cat(file, ": cannot open (", std::strerror(errno), ")"));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(cat(file, ": not a regular file"));
  }
  const size_t size = size_t(st.st_size);
  if (size < 8) {
    ::close(fd);
    throw Error(cat(file, ": truncated: ", size, " bytes, too short for the 8-byte header length"));
  }
  auto m = std::make_shared<Mapping>();
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (addr == MAP_FAILED) throw Error(cat(file, ": cannot mmap (", std::strerror(err), ")"));
  m->addr = addr;
  m->bytes = size;
  return m;
}

// A non-negative JSON integer, or nullopt.
std::optional<uint64_t> as_count(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
  return std::nullopt;
}

SafetensorsEntry parse_entry(const std::string& file, const std::string& name,
                             const nlohmann::json& j, size_t data_size) {
  const std::string at = cat(file, ": tensor ", brief(name), ": ");
  if (!j.is_object()) throw Error(at + "header entry is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key)) throw Error(cat(at, "header entry has no \"", key, "\""));

  SafetensorsEntry e;
  const auto& dt = j["dtype"];
  if (!dt.is_string()) throw Error(at + "\"dtype\" is not a string");
  const auto dtype = dtype_from_name(dt.get<std::string>());
  if (!dtype)
    throw Error(cat(at, "unsupported dtype ", brief(dt.get<std::string>()),
                    " (loft reads F32 F16 BF16 F8_E4M3 F8_E5M2 I8 U8 I32 I64)"));
  e.dtype = *dtype;

  const auto& shape = j["shape"];
  if (!shape.is_array()) throw Error(at + "\"shape\" is not an array");
  uint64_t numel = 1;
  for (const auto& d : shape) {
    const auto n = as_count(d);
    if (!n || *n > uint64_t(INT64_MAX))
      throw Error(cat(at, "bad dimension ", brief(d), " in shape"));
    if (__builtin_mul_overflow(numel, *n, &numel)) throw Error(at + "shape product overflows");
    e.shape.push_back(int64_t(*n));
  }

  const auto& off = j["data_offsets"];
  std::optional<uint64_t> begin, end;
  if (off.is_array() && off.size() == 2) {
    begin = as_count(off[0]);
    end = as_count(off[1]);
  }
  if (!begin || !end)
    throw Error(cat(at, "\"data_offsets\" must be two non-negative integers, got ", brief(off)));
  if (*begin > *end)
    throw Error(cat(at, "data_offsets [", *begin, ", ", *end, "] begin after end"));
  if (*end > data_size)
    throw Error(cat(at, "data_offsets [", *begin, ", ", *end, "] outside the data area of ",
                    data_size, " bytes (file truncated?)"));
  uint64_t span;
  if (__builtin_mul_overflow(numel, uint64_t(dtype_size(e.dtype)), &span) || span != *end - *begin)
    throw Error(cat(at, "shape ", shape_str(e.shape), " of ", dtype_name(e.dtype), " needs ", span,
                    " bytes but data_offsets span ", *end - *begin));
  e.begin = size_t(*begin);
  e.end = size_t(*end);
  return e;
}

// Two tensors must never share bytes (empty tensors occupy none).
void check_no_overlap(const std::string& file,
                      const std::map<std::string, SafetensorsEntry>& entries) {
  std::vector<std::tuple<size_t, size_t, const std::string*>> spans;
  for (const auto& [name, e] : entries)
    if (e.end > e.begin) spans.emplace_back(e.begin, e.end, &name);
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    const auto& [pb, pe, pn] = spans[i - 1];
    const auto& [b, e, n] = spans[i];
    if (b < pe)
      throw Error(cat(file, ": tensor ", brief(*n), " [", b, ", ", e, ") overlaps tensor ",
                      brief(*pn), " [", pb, ", ", pe, ")"));
  }
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const std::string& file, const unsigned char* base,
                                           size_t size) {
  if (size < 8)
    throw Error(cat(file, ": truncated: ", size, " bytes, too short for the 8-byte header length"));
  uint64_t header_len;
  std::memcpy(&header_len, base, 8);
  if (header_len < 2 || header_len > kMaxHeaderBytes)
    throw Error(cat(file, ": header length ", header_len, " is not plausible (expected 2 to ",
                    kMaxHeaderBytes, " bytes); not a safetensors file?"));
  if (header_len > size - 8)
    throw Error(cat(file, ": truncated: header length ", header_len, " runs past the end of the ",
                    size, "-byte file"));

  std::string error;
  const auto parsed = try_parse_json(
      std::string_view(reinterpret_cast<const char*>(base) + 8, size_t(header_len)), error);
  if (!parsed) throw Error(cat(file, ": header: ", error));
  const nlohmann::json& header = *parsed;
  if (!header.is_object()) throw Error(cat(file, ": header is not a JSON object"));

  SafetensorsHeader h;
  h.data_offset = 8 + size_t(header_len);
  const size_t data_size = size - h.data_offset;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) throw Error(cat(file, ": \"__metadata__\" is not a JSON object"));
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          throw Error(cat(file, ": \"__metadata__\" value of ", brief(k), " is not a string"));
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    h.entries[name] = parse_entry(file, name, value, data_size);
  }
  check_no_overlap(file, h.entries);
  return h;
}

SafetensorsReader SafetensorsReader::open(const std::filesystem::path& path) {
  const std::string file = path.string();
  const auto mapping = map_file(file);
  const auto* base = static_cast<const unsigned char*>(mapping->addr);
  SafetensorsHeader h = parse_safetensors_header(file, base, mapping->bytes);
  SafetensorsReader r;
  r.path_ = path;
  r.data_ = base + h.data_offset;
  r.entries_ = std::move(h.entries);
  r.metadata_ = std::move(h.metadata);
  r.mapping_ = std::shared_ptr<const void>(mapping, mapping->addr);
  return r;
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& kv : entries_) out.push_back(kv.first);
  return out;
}

const SafetensorsEntry& SafetensorsReader::info(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) throw Error(cat(path_.string(), ": no tensor named '", name, "'"));
  return it->second;
}

Tensor SafetensorsReader::tensor(const std::string& name) const {
  const SafetensorsEntry& e = info(name);
  const unsigned char* p = data_ + e.begin;
  if (reinterpret_cast<uintptr_t>(p) % dtype_size(e.dtype) != 0)
    return Tensor::from_host(p, e.shape, e.dtype);  // misaligned in the file: copy once
  return Tensor::wrap(p, e.shape, e.dtype, Device::cpu(), mapping_);
}

void SafetensorsReader::release(const std::string& name) const {
  const SafetensorsEntry& e = info(name);
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data_ + e.begin) + page - 1) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(data_ + e.end) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

int64_t SafetensorsReader::parameter_count() const {
  int64_t n = 0;
  for (const auto& kv : entries_) n += shape_numel(kv.second.shape);
  return n;
}

}  // namespace loft
