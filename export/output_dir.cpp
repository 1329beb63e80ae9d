#include "export/output_dir.h"

#include <unistd.h>

#include "engine/core/error.h"

namespace loft::exporter {

namespace fs = std::filesystem;

namespace {
fs::path sibling(const fs::path& out, const char* tag) {
  return out.parent_path() / cat(".", out.filename().string(), ".loft-", tag, "-", ::getpid());
}
}  // namespace

OutputDir::OutputDir(fs::path out, bool overwrite) : overwrite_(overwrite) {
  while (!out.empty() && !out.has_filename()) out = out.parent_path();  // "dir/" -> "dir"
  if (out.empty()) throw UsageError("--out: an output folder is required");
  out_ = fs::absolute(out);
  if (fs::exists(out_) && !overwrite)
    throw UsageError(cat("--out ", out_.string(), " already exists (pass --overwrite to replace it)"));
  if (fs::exists(out_) && !fs::is_directory(out_))
    throw UsageError(cat("--out ", out_.string(), " exists and is not a folder"));
  if (!fs::is_directory(out_.parent_path()))
    throw UsageError(cat("--out ", out_.string(), ": its parent folder does not exist"));
  tmp_ = sibling(out_, "tmp");
  fs::remove_all(tmp_);
  fs::create_directory(tmp_);
}

OutputDir::~OutputDir() {
  if (done_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

void OutputDir::commit() {
  std::error_code ec;
  fs::path old;
  if (fs::exists(out_)) {
    if (!overwrite_) throw Error(cat(out_.string(), " appeared while exporting; not replaced"));
    old = sibling(out_, "old");
    fs::remove_all(old);
    fs::rename(out_, old, ec);
    if (ec) throw Error(cat(out_.string(), ": cannot move the old folder aside (", ec.message(), ")"));
  }
  fs::rename(tmp_, out_, ec);
  if (ec) {
    if (!old.empty()) fs::rename(old, out_);
    throw Error(cat(out_.string(), ": cannot move the export into place (", ec.message(), ")"));
  }
  done_ = true;
  if (!old.empty()) fs::remove_all(old, ec);
}

}  // namespace loft::exporter
