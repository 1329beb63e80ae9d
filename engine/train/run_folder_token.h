// Every rank of a multi-process run must see rank 0's run folder: rank 0 alone writes it, and
// every rank reads its checkpoint on --resume. On several hosts that means storage every host
// mounts at the same path, which nothing else would check until a resume failed (or, worse, a
// rank resumed from a stale local copy). So at start-up rank 0 writes a one-off token into the
// folder and sends it with the NCCL id (engine/parallel/rendezvous.h); every other rank reads the
// file back and stops the run at once when it is missing or holds another token.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "engine/parallel/launch_env.h"

namespace loft {

// Where the token lives: hidden, beside the run's own files, removed once every rank has seen it.
inline constexpr const char* kRankTokenFile = ".loft-rank0-token";

// Hex digits of a token.
inline constexpr size_t kTokenDigits = 32;

// Rank 0: writes a fresh random token (kTokenDigits hex digits) into `dir` (which exists: rank 0 claimed it)
// and returns it; Error naming the file when it cannot be written.
std::string write_rank_token(const std::filesystem::path& dir);

// Another rank: "" when `dir`'s token file holds `token`, else one sentence saying what this rank
// (`rank`, on this host) sees instead and what the run folder must be.
std::string check_rank_token(const std::filesystem::path& dir, const std::string& token, int rank);

// Rank 0, after the exchange (success or not): removes the token file; never throws.
void remove_rank_token(const std::filesystem::path& dir) noexcept;

// parallel::exchange_blob of rank 0's `id` with the run folder checked on the way: rank 0 writes
// the token into `run_dir` and sends it after the id, every other rank checks it before it
// acknowledges (a rank that cannot see the folder stops itself and rank 0, both naming the
// cause), rank 0 removes the file. Returns rank 0's id on every rank (the others' `id` is
// ignored). An empty run_dir: no check.
std::vector<uint8_t> exchange_id_checking_run_folder(const parallel::LaunchEnv& env,
                                                     std::span<const uint8_t> id,
                                                     const std::filesystem::path& run_dir,
                                                     std::chrono::milliseconds timeout);

}  // namespace loft
