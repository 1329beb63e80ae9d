#include "studio/paths.h"

#include "engine/core/error.h"
#include "engine/io/json_read.h"
#include "studio/http_error.h"

namespace loft::studio {

namespace fs = std::filesystem;

bool is_within(const fs::path& path, const fs::path& dir) {
  auto p = path.begin(), d = dir.begin();
  for (; d != dir.end(); ++d, ++p) {
    if (d->empty() && std::next(d) == dir.end()) break;  // a trailing separator
    if (p == path.end() || *p != *d) return false;
  }
  return true;
}

namespace {

fs::path resolve_folder(const std::string& dir, const std::string& option) {
  std::error_code ec;
  const fs::path p = fs::canonical(dir, ec);
  if (ec || !fs::is_directory(p)) throw UsageError(cat(option, " ", dir, ": not a folder"));
  return p;
}

}  // namespace

PathPolicy::PathPolicy(const std::vector<std::string>& roots, const std::string& runs) {
  for (const std::string& r : roots) roots_.push_back(resolve_folder(r, "--root"));
  std::error_code ec;
  fs::create_directories(runs, ec);
  runs_ = resolve_folder(runs, "--runs");
}

namespace {

// The path with its existing part resolved (symlinks followed) and the rest appended; refuses
// `..` outright so nothing depends on how a missing part would resolve.
fs::path resolve_path(std::string_view text) {
  if (text.empty()) throw HttpError(400, "empty path");
  if (text.find('\0') != std::string_view::npos) throw HttpError(400, "a path holds a NUL byte");
  const fs::path p{std::string(text)};
  for (const fs::path& part : p)
    if (part == "..") throw HttpError(403, cat("path ", brief(text), ": '..' is not allowed"));
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec);
  if (ec) throw HttpError(400, cat("path ", brief(text), ": ", ec.message()));
  const fs::path resolved = fs::weakly_canonical(abs, ec);
  if (ec) throw HttpError(403, cat("path ", brief(text), ": ", ec.message()));
  return resolved;
}

}  // namespace

fs::path PathPolicy::resolve(std::string_view text) const {
  const fs::path p = resolve_path(text);
  if (is_within(p, runs_)) return p;
  for (const fs::path& r : roots_)
    if (is_within(p, r)) return p;
  throw HttpError(403, cat("path ", brief(text), " is outside the studio's --root folders and --runs"));
}

fs::path PathPolicy::resolve_in_runs(std::string_view text) const {
  const fs::path p = resolve_path(text);
  if (!is_within(p, runs_)) throw HttpError(403, cat("path ", brief(text), " is outside --runs ", runs_.string()));
  return p;
}

}  // namespace loft::studio
