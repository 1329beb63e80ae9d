// `loft bench data --tokenizer DIR --data FILE`: how fast text becomes training input on the CPU, to
// compare with what a GPU step consumes. Reports the tokenizer's encode throughput on one thread
// (MB/s of record text, first pass with a cold pre-token cache and a second, warm pass) and the
// whole data pipeline's (records -> template -> ids -> packed rows through datasets' DataLoader,
// one thread) in tokens/s.
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>

namespace loft::app {

// `seq` and `batch_rows` shape the packed rows (as --seq/--batch in finetune).
void run_tokenizer_bench(const std::filesystem::path& tokenizer_dir, const std::filesystem::path& data,
                         int64_t seq, int64_t batch_rows, std::ostream& out);

}  // namespace loft::app
