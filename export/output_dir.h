// An export's output folder, made atomically: files are written into a hidden temporary sibling
// (`<parent>/.<name>.loft-tmp-<pid>`), which commit() renames to `out` once everything is
// written. An export that fails or is interrupted leaves no half-written model at `out` (the
// destructor removes the temporary; a killed process leaves only the hidden sibling).
#pragma once
#include <filesystem>

namespace loft::exporter {

class OutputDir {
 public:
  // UsageError naming --out when `out` exists and !overwrite, or its parent folder is missing.
  OutputDir(std::filesystem::path out, bool overwrite);
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  // Where the files go until commit().
  const std::filesystem::path& path() const { return tmp_; }
  const std::filesystem::path& final_path() const { return out_; }
  // Moves the folder into place (with --overwrite, an existing `out` is replaced: moved aside,
  // the new one renamed in, the old one removed). Throws Error naming `out` on failure.
  void commit();

 private:
  std::filesystem::path out_, tmp_;
  bool overwrite_;
  bool done_ = false;
};

}  // namespace loft::exporter
