// Which files the studio may touch: only under the --root folders and the --runs folder. A path
// from a request is refused when it has a `..` component, and checked after resolving (the
// existing part through realpath, so a symlink pointing out of the roots is out), never by
// comparing strings.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace loft::studio {

class PathPolicy {
 public:
  // Each root and `runs` must name a folder (`runs` is created when missing); UsageError naming
  // the option otherwise. Relative request paths resolve against the working directory, as the CLI's.
  PathPolicy(const std::vector<std::string>& roots, const std::string& runs);

  // The resolved absolute path of `path` when it lies under a root or the runs folder; throws
  // HttpError 403 naming the path otherwise (400 when it is empty or holds a NUL byte). The path
  // need not exist (an output folder): its existing part is resolved and the rest appended.
  std::filesystem::path resolve(std::string_view path) const;
  // The same, but only under the runs folder (where runs and their outputs are written).
  std::filesystem::path resolve_in_runs(std::string_view path) const;

  const std::vector<std::filesystem::path>& roots() const { return roots_; }  // resolved
  const std::filesystem::path& runs() const { return runs_; }                  // resolved

 private:
  std::vector<std::filesystem::path> roots_;
  std::filesystem::path runs_;
};

// Whether `path` is `dir` or inside it (both resolved), component by component.
bool is_within(const std::filesystem::path& path, const std::filesystem::path& dir);

}  // namespace loft::studio
