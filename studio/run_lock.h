// Whether a run folder is in use: RUN/.loft.lock, held with flock(LOCK_EX) for the whole run by
// the process that owns the folder (finetune), its content one line of JSON
// {"pid":..,"started":"ISO-8601 UTC","command":"finetune"}. The kernel drops the lock when that
// process dies, so a lock file left by a killed run is free. Point this at the engine's lock
// helper once it lands (issue 31's folder lock).
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

namespace loft::studio {

// The holder's JSON (an empty object when unreadable) while the lock is held; nullopt when the
// folder has no lock file or nobody holds it.
std::optional<nlohmann::json> run_lock_holder(const std::filesystem::path& run_dir);

}  // namespace loft::studio
