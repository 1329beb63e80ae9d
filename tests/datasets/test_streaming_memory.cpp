// Resident memory stays bounded while streaming files far larger than the reader's buffer:
// a generated ~256 MB JSONL file, the same compressed with zstd, the same as a JSON array, and the
// real GSM8K train file compressed with zstd.
#include <gtest/gtest.h>
#include <zstd.h>

#include <cstdio>

#include "datasets/inspect.h"
#include "datasets/source.h"
#include "engine/core/error.h"
#include "tests/common/test_util.h"
#include "tests/datasets/fake_tokenizer.h"

namespace loft::data {
namespace {

using test::resident_kib;

// Writes the same bytes to a plain file and, compressed on the fly, to a .zst file.
class DualWriter {
 public:
  DualWriter(const std::filesystem::path& plain, const std::filesystem::path& zst)
      : plain_(std::fopen(plain.c_str(), "wb")), zst_(std::fopen(zst.c_str(), "wb")), cctx_(ZSTD_createCCtx()) {
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, 1);
    out_.resize(ZSTD_CStreamOutSize());
  }
  ~DualWriter() {
    finish();
    ZSTD_freeCCtx(cctx_);
  }
  void write(const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), plain_);
    ZSTD_inBuffer in{s.data(), s.size(), 0};
    while (in.pos < in.size) drain(ZSTD_e_continue, in);
  }
  void finish() {
    if (!plain_) return;
    ZSTD_inBuffer in{nullptr, 0, 0};
    while (drain(ZSTD_e_end, in) != 0) {
    }
    std::fclose(plain_);
    std::fclose(zst_);
    plain_ = zst_ = nullptr;
  }

 private:
  size_t drain(ZSTD_EndDirective mode, ZSTD_inBuffer& in) {
    ZSTD_outBuffer out{out_.data(), out_.size(), 0};
    const size_t left = ZSTD_compressStream2(cctx_, &out, &in, mode);
    if (ZSTD_isError(left)) throw Error(ZSTD_getErrorName(left));
    std::fwrite(out_.data(), 1, out.pos, zst_);
    return left;
  }
  std::FILE* plain_;
  std::FILE* zst_;
  ZSTD_CCtx* cctx_;
  std::vector<char> out_;
};

struct Streamed {
  int64_t records = 0;         // in the last pass
  long peak_growth_kib = 0;    // highest VmRSS seen while streaming, above VmRSS at the start
  long later_growth_kib = 0;   // highest VmRSS in passes 2.. above VmRSS at the end of pass 1
};

// Streams every record of `path` through a Source (read + JSON parse + normalise) `passes` times,
// sampling VmRSS every `sample_every` records.
Streamed stream(const std::filesystem::path& path, int64_t sample_every, int passes = 1) {
  test::ByteTokenizer tok;
  DataConfig config;
  config.train = {{path}};
  Source src(config.train[0], config, Split::all, 0, tok);
  Streamed s;
  const long start = resident_kib();
  long after_first_pass = 0, peak = start, later_peak = 0;
  for (int pass = 0; pass < passes; ++pass) {
    s.records = 0;
    while (auto rec = src.next()) {
      if (++s.records % sample_every) continue;
      const long now = resident_kib();
      peak = std::max(peak, now);
      if (pass > 0) later_peak = std::max(later_peak, now);
    }
    const long now = resident_kib();
    peak = std::max(peak, now);
    if (pass == 0) after_first_pass = now;
    if (pass > 0) later_peak = std::max(later_peak, now);
    src.restart();
  }
  s.peak_growth_kib = peak - start;
  s.later_growth_kib = passes > 1 ? later_peak - after_first_pass : 0;
  return s;
}

TEST(StreamingMemory, HundredsOfMegabytesStreamInBoundedMemory) {
  test::TempDir dir;
  constexpr int kRecords = 32000;  // 32000 x ~8 KiB = ~256 MB per file
  {
    DualWriter jsonl(dir / "big.jsonl", dir / "big.jsonl.zst");
    std::FILE* array = std::fopen((dir / "big.json").c_str(), "wb");
    std::fputs("[\n", array);
    std::string filler;
    for (int i = 0; i < 8000; ++i) filler += char('a' + (i * 7 + i / 26) % 26);
    for (int i = 0; i < kRecords; ++i) {
      const std::string rec = "{\"instruction\": \"task " + std::to_string(i) + "\", \"input\": \"\", \"output\": \"" +
                              filler.substr(size_t(i % 100)) + "\"}";
      jsonl.write(rec + "\n");
      std::fputs((i ? ",\n" : "") , array);
      std::fputs(rec.c_str(), array);
    }
    std::fputs("\n]\n", array);
    std::fclose(array);
  }
  const uint64_t bytes = std::filesystem::file_size(dir / "big.jsonl");
  EXPECT_GT(bytes, uint64_t(240) << 20);
  for (const char* name : {"big.jsonl", "big.jsonl.zst", "big.json"}) {
    const Streamed s = stream(dir / name, 1000);
    EXPECT_EQ(s.records, kRecords) << name;
    // One buffer and one ~8 KiB record: a few MiB of slack for the allocator, never the file.
    EXPECT_LT(s.peak_growth_kib, 8 * 1024) << name << ": resident memory grew by " << s.peak_growth_kib << " KiB";
    std::printf("[ memory ] %s: %ld MiB of records streamed (file %ld MiB), VmRSS growth %ld KiB\n", name,
                long(bytes >> 20), long(std::filesystem::file_size(dir / name) >> 20), s.peak_growth_kib);
  }
}

TEST(StreamingMemory, Gsm8kTrainCompressedWithZstdKeepsResidentMemoryFlat) {
  test::TempDir dir;
  test::write_file(dir / "train.jsonl.zst",
                   test::zstd_compress(test::read_file(test::data_path("gsm8k/train.jsonl")), 3));
  const Streamed s = stream(dir / "train.jsonl.zst", 250, 4);
  EXPECT_EQ(s.records, 7473);
  // The first pass touches the decoder's window (a few MiB, set by the frame, not the file size)
  // and the read buffer; the next passes over the same reader must not grow at all.
  EXPECT_LT(s.peak_growth_kib, 8 * 1024) << "resident memory grew by " << s.peak_growth_kib << " KiB";
  EXPECT_LT(s.later_growth_kib, 256) << "resident memory kept growing: " << s.later_growth_kib << " KiB";
  std::printf("[ memory ] gsm8k/train.jsonl.zst x4 passes: VmRSS growth %ld KiB in pass 1, %ld KiB in passes 2-4\n",
              s.peak_growth_kib, s.later_growth_kib);
  RecordProperty("vmrss_growth_pass1_kib", std::to_string(s.peak_growth_kib));
  RecordProperty("vmrss_growth_later_passes_kib", std::to_string(s.later_growth_kib));
}

// `loft data inspect` keeps a length histogram, not the examples: inspecting the compressed GSM8K
// file twice (tokenizing every record with the Llama-2 tokenizer) must not grow the second time.
TEST(StreamingMemory, InspectingGsm8kCompressedWithZstdKeepsResidentMemoryFlat) {
  test::TempDir dir;
  test::write_file(dir / "train.jsonl.zst",
                   test::zstd_compress(test::read_file(test::data_path("gsm8k/train.jsonl")), 3));
  const auto tok = load_sentencepiece(test::data_path("tokenizers/llama2/tokenizer.model"));
  const long start = resident_kib();
  const FileInspection first = inspect_file(dir / "train.jsonl.zst", InspectOptions{}, *tok);
  const long after_first = resident_kib();
  const FileInspection second = inspect_file(dir / "train.jsonl.zst", InspectOptions{}, *tok);
  const long after_second = resident_kib();
  EXPECT_EQ(first.lengths.count(), 7473);
  EXPECT_EQ(second.lengths.total(), first.lengths.total());
  EXPECT_LT(after_first - start, 8 * 1024) << "resident memory grew by " << after_first - start << " KiB";
  EXPECT_LT(after_second - after_first, 256) << "resident memory kept growing: " << after_second - after_first << " KiB";
  std::printf("[ memory ] data inspect gsm8k/train.jsonl.zst (%ld tokens): VmRSS growth %ld KiB, then %ld KiB\n",
              long(first.lengths.total()), after_first - start, after_second - after_first);
  RecordProperty("inspect_vmrss_growth_first_kib", std::to_string(after_first - start));
  RecordProperty("inspect_vmrss_growth_second_kib", std::to_string(after_second - after_first));
}

}  // namespace
}  // namespace loft::data
