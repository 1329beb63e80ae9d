// CRC-32C (Castagnoli), as TFRecord framing needs it. Debian ships no C/C++ CRC-32C library
// (google/crc32c and abseil's crc are not packaged for bookworm), so a table-driven one lives here.
#pragma once
#include <cstdint>
#include <string_view>

namespace loft::report {

uint32_t crc32c(std::string_view bytes);
// TFRecord's masked form: rotate right by 15, add 0xa282ead8 (a CRC of data holding CRCs stays useful).
uint32_t masked_crc32c(std::string_view bytes);

}  // namespace loft::report
