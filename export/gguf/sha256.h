// SHA-256 (FIPS 180-4) of a byte string, as lowercase hex: for llama.cpp's pre-tokenizer
// fingerprint (convert_hf_to_gguf.py hashes the ids of a probe text to name tokenizer.ggml.pre).
#pragma once
#include <string>
#include <string_view>

namespace loft::gguf {

std::string sha256_hex(std::string_view data);

}  // namespace loft::gguf
