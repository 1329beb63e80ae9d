// The paths commands write to (finetune and export --out, report --out, evaluate --report and
// --log-samples) are checked before anything is computed: never the root or the home folder
// itself, no name longer than a file system takes, and a file the command did not write is not
// replaced unless --overwrite says so (docs/reliability.md, "Paths and locks").
#pragma once
#include <filesystem>
#include <functional>
#include <string>

namespace loft {

// `path` as an absolute, normal path without a trailing separator. UsageError naming `option` when
// it is empty, the root folder (`/`, `//`, a link to it), the home folder itself, or holds a name
// longer than 255 bytes.
std::filesystem::path checked_output_path(const std::filesystem::path& path, const std::string& option);

// What `path` is (following links). A path that does not exist, or runs through a file, is
// not_found; any other failure to look is an Error naming `what` ("--out runs/a").
std::filesystem::file_status output_status(const std::filesystem::path& path, const std::string& what);

// For a file written whole (a report, a samples log): UsageError naming `option` when `file` is a
// folder, its folder is missing, or it exists with content that `ours` does not recognise (`kind`
// says what it recognises: "a loft report") and `overwrite` is false. An empty file holds nothing
// to lose.
void check_output_file(const std::filesystem::path& file, const std::string& option, bool overwrite,
                       const std::function<bool(const std::filesystem::path&)>& ours, const std::string& kind);

// The first `n` bytes of `file` (fewer when it is shorter; empty when it cannot be read).
std::string file_head(const std::filesystem::path& file, size_t n);

}  // namespace loft
