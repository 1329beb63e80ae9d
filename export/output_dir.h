// An export's output, written atomically and never over what loft did not write. Files go into a
// hidden temporary sibling `<parent>/.<name>.loft-tmp-<pid>/`, which holds the export's marker
// (.loft-export) and its folder lock (engine/io/folder_lock.h) while it is written; commit()
// moves it into place:
//   a folder --out: the temporary becomes --out. An existing --out is replaced only with
//     --overwrite and only when it is a loft export (it holds .loft-export), by one atomic exchange
//     where the file system has one;
//   a file --out (FILE.gguf): the file of that name in the temporary is renamed over --out. An
//     existing file is replaced only with --overwrite and only when `replaceable` accepts it.
// A failed export removes its temporary; a killed one leaves it, and the next export into the same
// parent folder removes it (a temporary by name and marker, whose lock is free and whose pid is
// gone). An export already writing the same --out is refused, naming its pid and start time.
#pragma once
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>

#include "engine/io/folder_lock.h"

namespace loft::exporter {

inline constexpr const char* kExportMarker = ".loft-export";

class OutputDir {
 public:
  struct FileOut {
    std::function<bool(const std::filesystem::path&)> replaceable;
    std::string kind;  // what `replaceable` accepts, for messages: "a GGUF file"
  };
  // Usage errors (naming --out) for every refusal above, the root or home folder, or a missing
  // parent folder; Error when another export holds --out. Says on `log` how many temporaries of
  // killed exports it removed.
  OutputDir(const std::filesystem::path& out, bool overwrite, std::ostream& log,
            std::optional<FileOut> file = std::nullopt);
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  // Where the files go until commit().
  const std::filesystem::path& path() const { return tmp_; }
  const std::filesystem::path& final_path() const { return out_; }
  // A file --out's file inside path().
  std::filesystem::path file_path() const { return tmp_ / out_.filename(); }
  // Moves the output into place. Throws Error naming --out on failure; the old output stays.
  void commit();

 private:
  void claim_temporary(std::ostream& log);
  void commit_folder();
  void commit_file();

  std::filesystem::path out_, tmp_;
  bool overwrite_;
  std::optional<FileOut> file_;
  std::optional<FolderLock> lock_;
  bool done_ = false;
};

}  // namespace loft::exporter
