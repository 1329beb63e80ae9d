// Byte sizes as people write them on the command line (export's --max-shard-size,
// --gpu-memory-limit, info --card): one parser and one printer, so every option reads "24GiB" alike.
#pragma once
#include <cstdint>
#include <string>

namespace loft {

// "24GiB", "24GB", "24G", "16000MB", "1.5GiB", "24 GiB", "1000" (bytes) -> bytes, rounded down.
// Units, any case: B; KB MB GB TB = 10^3.. 10^12 (as disk and model-file sizes are given);
// KiB MiB GiB TiB and the bare K M G T = 2^10.. 2^40 (as docker and slurm read "24G").
// Throws UsageError naming `option` for anything else: no number, an unknown unit, zero, a sign,
// an exponent, or a size past 2^63 - 1 bytes.
int64_t parse_byte_size(const std::string& text, const std::string& option);

// The exact, shortest spelling parse_byte_size reads back: "24 GiB", "16 GB", "1536 MiB",
// "1001 B".
std::string format_byte_size(int64_t bytes);

// Rounded for people, two decimals: "12.34 GiB" (negative values keep their sign).
std::string gib_text(int64_t bytes);

}  // namespace loft
