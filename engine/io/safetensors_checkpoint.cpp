#include "engine/io/safetensors_checkpoint.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/core/error.h"
#include "engine/io/json_read.h"

namespace loft {

namespace {

// weight_map of a HF index file: tensor name -> shard file name (a plain name in the same folder).
std::map<std::string, std::string> read_weight_map(const std::filesystem::path& index_path) {
  const std::string index = index_path.string();
  const nlohmann::json j = read_json_file(index_path);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(cat(index, ": no \"weight_map\" object"));
  std::map<std::string, std::string> map;
  for (const auto& [name, shard] : j["weight_map"].items()) {
    if (!shard.is_string())
      throw Error(cat(index, ": weight_map entry ", brief(name), " is not a file name string"));
    const std::string file = shard.get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      throw Error(cat(index, ": weight_map entry ", brief(name), " names ", brief(file),
                      ", which is not a file in the same folder"));
    map[name] = file;
  }
  return map;
}

}  // namespace

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::filesystem::path& dir,
                                                  const std::string& stem) {
  SafetensorsCheckpoint ck;
  ck.dir_ = dir;
  const auto single = dir / (stem + ".safetensors");
  const auto index = dir / (stem + ".safetensors.index.json");
  if (std::filesystem::exists(single)) {
    ck.add_file(SafetensorsReader::open(single));
    return ck;
  }
  if (!std::filesystem::exists(index))
    throw Error(cat(dir.string(), ": no ", single.filename().string(), " or ",
                    index.filename().string(), " (not a Hugging Face safetensors folder?)"));

  const auto weight_map = read_weight_map(index);
  std::set<std::string> shards;
  for (const auto& [name, shard] : weight_map) {
    if (shards.insert(shard).second && !std::filesystem::exists(dir / shard))
      throw Error(cat(index.string(), ": shard ", shard, " (holding ", name,
                      ") is not in the folder: ", (dir / shard).string()));
  }
  for (const auto& shard : shards) ck.add_file(SafetensorsReader::open(dir / shard));
  for (const auto& [name, shard] : weight_map) {
    const auto it = ck.where_.find(name);
    if (it == ck.where_.end() || ck.files_[it->second].path().filename() != shard)
      throw Error(cat(index.string(), ": tensor ", name, " is mapped to ", shard,
                      " but that shard does not hold it"));
  }
  return ck;
}

void SafetensorsCheckpoint::add_file(SafetensorsReader file) {
  for (const auto& name : file.names()) {
    const auto [it, fresh] = where_.emplace(name, files_.size());
    if (!fresh)
      throw Error(cat(file.path().string(), ": tensor ", name, " is also stored in ",
                      files_[it->second].path().string()));
  }
  files_.push_back(std::move(file));
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& kv : where_) out.push_back(kv.first);
  return out;
}

const SafetensorsReader& SafetensorsCheckpoint::file_of(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end())
    throw Error(cat(dir_.string(), ": no tensor named ", name, " in the checkpoint"));
  return files_[it->second];
}

int64_t SafetensorsCheckpoint::parameter_count() const {
  int64_t n = 0;
  for (const auto& f : files_) n += f.parameter_count();
  return n;
}

std::vector<DType> SafetensorsCheckpoint::dtypes() const {
  std::set<DType> seen;
  for (const auto& f : files_)
    for (const auto& name : f.names()) seen.insert(f.info(name).dtype);
  return {seen.begin(), seen.end()};
}

}  // namespace loft
