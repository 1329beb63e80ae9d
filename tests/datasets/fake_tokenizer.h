// Test doubles for the data tests: a byte-level tokenizer (one id per byte, plus BOS/EOS and any
// special pieces asked for) so these tests do not depend on the SentencePiece implementation, and
// small file helpers.
#pragma once
#include <zstd.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "tokenizer/tokenizer.h"

namespace loft::test {

class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kUnk = 0, kBos = 1, kEos = 2, kFirstByte = 3;
  // `specials` get ids after the 256 byte ids, in order.
  explicit ByteTokenizer(std::vector<std::string> specials = {}) {
    for (size_t i = 0; i < specials.size(); ++i) specials_[specials[i]] = kFirstByte + 256 + int32_t(i);
  }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(kFirstByte + c);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids) s += piece(id);
    return s;
  }
  std::string piece(int32_t id) const override {
    if (id == kBos) return "<s>";
    if (id == kEos) return "</s>";
    if (id >= kFirstByte && id < kFirstByte + 256) return std::string(1, char(id - kFirstByte));
    for (const auto& [k, v] : specials_)
      if (v == id) return k;
    return "<unk>";
  }
  // Bytes are whole pieces here, so streaming is just piece() per id.
  std::unique_ptr<StreamDecoder> stream_decoder() const override {
    struct Pieces : StreamDecoder {
      const ByteTokenizer* tok;
      explicit Pieces(const ByteTokenizer* t) : tok(t) {}
      std::string push(int32_t id) override { return tok->piece(id); }
      std::string finish() override { return {}; }
    };
    return std::make_unique<Pieces>(this);
  }
  bool adds_bos() const override { return true; }
  std::string kind() const override { return "bytes (test)"; }
  std::vector<AddedToken> added_tokens() const override {
    std::vector<AddedToken> out;
    for (const auto& [k, v] : specials_) out.push_back({v, k, true});
    return out;
  }
  int32_t vocab_size() const override { return kFirstByte + 256 + int32_t(specials_.size()); }
  int32_t bos_id() const override { return kBos; }
  int32_t eos_id() const override { return kEos; }
  int32_t unk_id() const override { return kUnk; }
  int32_t pad_id() const override { return -1; }
  int32_t special_id(std::string_view piece) const override {
    const auto it = specials_.find(std::string(piece));
    return it == specials_.end() ? -1 : it->second;
  }

 private:
  std::map<std::string, int32_t> specials_;
};

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

inline std::string zstd_compress(const std::string& bytes, int level = 3) {
  std::string out(ZSTD_compressBound(bytes.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), level);
  if (ZSTD_isError(n)) throw Error(ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

// Resident memory of this process in KiB (VmRSS from /proc/self/status).
inline long resident_kib() {
  std::ifstream f("/proc/self/status");
  std::string key;
  long value = 0;
  while (f >> key) {
    if (key == "VmRSS:") {
      f >> value;
      return value;
    }
    f.ignore(1 << 12, '\n');
  }
  return -1;
}

}  // namespace loft::test
