// A shared library loaded at first use (dlopen) instead of linked: what lets one binary start
// without NCCL, and without paying cuBLAS's static initialisers, until it needs them
// (engine/parallel/nccl_api.h, engine/device/cublas_api.h).
#pragma once
#include <mutex>
#include <string>

namespace loft {

struct DynamicLibrary {
  const char* name;
  void* handle;
};

// dlopen(name); on failure an Error: "<needed_by>, and <name> could not be loaded (<dlerror>):
// <remedy>".
DynamicLibrary open_library(const char* name, const std::string& needed_by, const std::string& remedy);
// dlsym; on failure an Error: "<name> has no <symbol> (<dlerror>)<hint>".
void* library_symbol(const DynamicLibrary& lib, const char* symbol, const std::string& hint = "");

// The table `load` fills, built once per process; a load that throws is tried again next call.
template <typename Api>
const Api& load_once(Api (*load)()) {
  static std::once_flag once;
  static Api api;
  std::call_once(once, [load] { api = load(); });
  return api;
}

}  // namespace loft
