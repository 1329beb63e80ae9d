#include "engine/io/output_paths.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "engine/core/error.h"
#include "engine/io/json_read.h"

namespace loft {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxNameBytes = 255;  // NAME_MAX of ext4, xfs, btrfs, tmpfs

// The user's home folder ($HOME, else the password database's), resolved; empty when unknown.
fs::path home_folder() {
  const char* env = std::getenv("HOME");
  std::string home = env ? env : "";
  if (home.empty())
    if (const passwd* pw = ::getpwuid(::getuid())) home = pw->pw_dir ? pw->pw_dir : "";
  if (home.empty()) return {};
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(home, ec);
  return ec ? fs::path() : p;
}

}  // namespace

fs::path checked_output_path(const fs::path& path, const std::string& option) {
  if (path.empty()) throw UsageError(cat(option, ": a path is required"));
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) throw Error(cat(option, " ", path.string(), ": cannot resolve the path (", ec.message(), ")"));
  p = p.lexically_normal();
  // "dir/" -> "dir"; the root ("/", "//") has no name to strip and stays itself.
  if (!p.has_filename() && !p.relative_path().empty()) p = p.parent_path();
  for (const fs::path& part : p)
    if (part.native().size() > kMaxNameBytes)
      throw UsageError(cat(option, " ", brief(path.string()), ": the name ", brief(part.string(), 40), " is ",
                           part.native().size(), " bytes; a file system takes at most ", kMaxNameBytes));
  const fs::path resolved = fs::weakly_canonical(p, ec);
  if (p.relative_path().empty() || (!ec && resolved.relative_path().empty()))
    throw UsageError(cat(option, " ", path.string(), ": the root folder is never an output; name a folder below it"));
  if (const fs::path home = home_folder(); !home.empty() && !ec && resolved == home)
    throw UsageError(cat(option, " ", path.string(), ": the home folder itself is never an output; name a folder in it"));
  return p;
}

fs::file_status output_status(const fs::path& path, const std::string& what) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory)
    return fs::file_status(fs::file_type::not_found);
  if (ec) throw Error(cat(what, ": cannot look at it (", ec.message(), ")"));
  return st;
}

std::string file_head(const fs::path& file, size_t n) {
  std::ifstream in(file, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), std::streamsize(n));
  s.resize(size_t(in.gcount()));
  return s;
}

void check_output_file(const fs::path& file, const std::string& option, bool overwrite,
                       const std::function<bool(const fs::path&)>& ours, const std::string& kind) {
  const fs::path p = checked_output_path(file, option);
  std::error_code ec;
  const fs::file_status st = output_status(p, cat(option, " ", file.string()));
  if (fs::is_directory(st)) throw UsageError(cat(option, " ", file.string(), " is a folder; name a file"));
  if (!fs::is_directory(p.parent_path(), ec))
    throw UsageError(cat(option, " ", file.string(), ": its folder ", p.parent_path().string(), " does not exist or is not a folder"));
  if (!fs::exists(st) || overwrite) return;
  if (fs::is_regular_file(st) && (fs::file_size(p, ec) == 0 || ours(p))) return;
  throw UsageError(cat(option, " ", file.string(), " exists and is not ", kind,
                       "; pass --overwrite to replace it, or name another file"));
}

}  // namespace loft
