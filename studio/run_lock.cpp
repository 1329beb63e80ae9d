#include "studio/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>

#include "engine/io/json_read.h"

namespace loft::studio {

std::optional<nlohmann::json> run_lock_holder(const std::filesystem::path& run_dir) {
  const std::filesystem::path file = run_dir / ".loft.lock";
  // A separate open: flock locks belong to the open file description, so this never shares the
  // holder's lock.
  const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  const bool held = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  if (!held) flock(fd, LOCK_UN);
  close(fd);
  if (!held) return std::nullopt;
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  std::string error;
  std::optional<nlohmann::json> info = try_parse_json(line, error);
  return info && info->is_object() ? *info : nlohmann::json::object();
}

}  // namespace loft::studio
