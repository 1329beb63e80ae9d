// GGUF files (llama.cpp): the validating reader's header, metadata and tensor infos, fed whole
// files. Besides succeeding or throwing loft::Error, what the reader accepts must be consistent:
// the parsed header serializes back to the input's first bytes, the data section starts at the
// next alignment boundary, every tensor's size is its dims' product (recomputed here in 128 bits)
// and its data lies inside the file; every value reads back through its typed getter.
#include <cstring>
#include <streambuf>

#include "export/gguf/gguf_reader.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace loft::gguf;

// An istream over the input without copying it.
struct MemBuf : std::streambuf {
  MemBuf(const uint8_t* data, size_t size) {
    char* p = const_cast<char*>(reinterpret_cast<const char*>(data));
    setg(p, p, p + size);
  }
};

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void read_back(const std::string& key, const Value& v) {
  check(!v.type_name().empty());
  switch (v.type) {
    case ValueType::String: v.get_string(key); return;
    case ValueType::U32: v.get<uint32_t>(key); return;
    case ValueType::F64: v.get<double>(key); return;
    case ValueType::Bool: v.get<bool>(key); return;
    case ValueType::Array:
      if (v.elem == ValueType::String) check(v.get_strings(key).size() == v.count);
      if (v.elem == ValueType::I32) check(v.get_array<int32_t>(key).size() == v.count);
      if (v.elem == ValueType::F32) check(v.get_array<float>(key).size() == v.count);
      if (v.elem == ValueType::Bool) check(v.get_array<bool>(key).size() == v.count);
      return;
    default: return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loft::fuzz::expect_clean([&] {
    MemBuf buf(data, size);
    std::istream in(&buf);
    const File f = parse_gguf(in, size, "fuzz.gguf");
    const std::string head = header_bytes(f.kv, f.tensors);
    check(head.size() <= size && std::memcmp(head.data(), data, head.size()) == 0);
    check(f.data_offset == align_up(head.size(), f.alignment) && f.data_offset <= size);
    for (const auto& [key, v] : f.kv) read_back(key, v);
    for (const TensorInfo& t : f.tensors) {
      const auto layout = tensor_type_layout(uint32_t(t.type));
      check(layout && !t.ne.empty() && t.ne.size() <= size_t(kMaxDims) && t.ne[0] % layout->block == 0);
      // The exact size (saturating above 2^64; a zero dim makes it 0).
      unsigned __int128 bytes = (unsigned __int128)(uint64_t(t.ne[0] / layout->block)) * uint64_t(layout->block_bytes);
      bool empty = t.ne[0] == 0;
      for (size_t i = 1; i < t.ne.size(); ++i) {
        check(t.ne[i] >= 0);
        if (t.ne[i] == 0) empty = true;
        else if (bytes <= ~uint64_t(0)) bytes *= uint64_t(t.ne[i]);
      }
      if (empty) bytes = 0;
      check(bytes == t.bytes && t.offset <= size - f.data_offset && t.bytes <= size - f.data_offset - t.offset);
      check(&f.tensor(t.name) == &t);
    }
  });
  return 0;
}
