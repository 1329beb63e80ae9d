#include "engine/core/dynamic_library.h"

#include <dlfcn.h>

#include "engine/core/error.h"

namespace loft {

DynamicLibrary open_library(const char* name, const std::string& needed_by, const std::string& remedy) {
  void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw Error(cat(needed_by, ", and ", name, " could not be loaded (", dlerror(), "): ", remedy));
  return {name, handle};  // stays loaded for the process
}

void* library_symbol(const DynamicLibrary& lib, const char* symbol, const std::string& hint) {
  void* f = dlsym(lib.handle, symbol);
  if (!f) throw Error(cat(lib.name, " has no ", symbol, " (", dlerror(), ")", hint));
  return f;
}

}  // namespace loft
