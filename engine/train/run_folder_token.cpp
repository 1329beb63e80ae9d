#include "engine/train/run_folder_token.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <random>
#include <sstream>
#include <system_error>

#include "engine/core/error.h"
#include "engine/parallel/rendezvous.h"

namespace loft {

namespace {

std::string host_name() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "this host";
  return std::string(name.data());
}

}  // namespace

std::string write_rank_token(const std::filesystem::path& dir) {
  std::random_device rd;
  std::ostringstream hex;
  hex << std::hex;
  for (int i = 0; i < 4; ++i) {
    hex.width(8);
    hex.fill('0');
    hex << rd();
  }
  const std::string token = hex.str();  // kTokenDigits
  const std::filesystem::path file = dir / kRankTokenFile;
  std::ofstream out(file, std::ios::trunc);
  out << token << '\n';
  out.close();
  if (!out) throw Error(cat("cannot write ", file.string(), " (the run folder's check that every rank sees it)"));
  return token;
}

std::string check_rank_token(const std::filesystem::path& dir, const std::string& token, int rank) {
  const std::filesystem::path file = dir / kRankTokenFile;
  const std::string where = cat("rank ", rank, " on ", host_name());
  const std::string must =
      " Every rank must see the run folder that rank 0 writes (--out): on several hosts, a folder on storage "
      "every host mounts at the same path.";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return cat(where, " cannot see rank 0's run folder ", dir.string(), ": no such folder here.", must);
  std::ifstream in(file);
  std::string seen;
  if (!in || !std::getline(in, seen))
    return cat(where, " sees a folder ", dir.string(), " but not the token rank 0 just wrote into it (",
               kRankTokenFile, "): it is another folder than rank 0's.", must);
  if (seen != token)
    return cat(where, " reads another run's token in ", file.string(),
               ": its ", dir.string(), " is not the folder rank 0 writes.", must);
  return "";
}

void remove_rank_token(const std::filesystem::path& dir) noexcept {
  std::error_code ec;
  std::filesystem::remove(dir / kRankTokenFile, ec);
}

std::vector<uint8_t> exchange_id_checking_run_folder(const parallel::LaunchEnv& env,
                                                     std::span<const uint8_t> id,
                                                     const std::filesystem::path& run_dir,
                                                     std::chrono::milliseconds timeout) {
  if (run_dir.empty()) return parallel::exchange_blob(env, id, timeout);
  std::vector<uint8_t> blob(id.begin(), id.end());
  struct Remove {  // rank 0's token goes however the exchange ends
    const std::filesystem::path* dir = nullptr;
    ~Remove() {
      if (dir) remove_rank_token(*dir);
    }
  } remove;
  if (env.rank == 0 && env.world_size > 1) {
    const std::string token = write_rank_token(run_dir);
    remove.dir = &run_dir;
    blob.insert(blob.end(), token.begin(), token.end());
  }
  // The token is the blob's last kTokenDigits bytes (the peers know only its length).
  const auto check = [&](std::span<const uint8_t> got) -> std::string {
    if (got.size() < kTokenDigits) return cat("rank 0 sent no run-folder token (is every rank the same loft?)");
    return check_rank_token(run_dir, std::string(got.end() - std::ptrdiff_t(kTokenDigits), got.end()), env.rank);
  };
  std::vector<uint8_t> got = parallel::exchange_blob(env, blob, timeout, check);
  if (env.world_size > 1) got.resize(got.size() - kTokenDigits);  // past check: it holds a token
  return got;
}

}  // namespace loft
