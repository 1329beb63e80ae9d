#include "engine/parallel/nccl_api.h"

#ifdef LOFT_WITH_NCCL
#include <dlfcn.h>

#include <mutex>

#include "engine/core/error.h"

namespace loft {

namespace {

constexpr const char* kLibrary = "libnccl.so.2";

void* symbol(void* lib, const char* name) {
  void* f = dlsym(lib, name);
  if (!f) throw Error(cat(kLibrary, " has no ", name, " (", dlerror(), "): NCCL 2.14 or newer is needed"));
  return f;
}

NcclApi load() {
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    throw Error(cat("training on several GPUs needs NCCL, and ", kLibrary,
                    " could not be loaded (", dlerror(),
                    "): install NCCL or add its lib folder to LD_LIBRARY_PATH"));
  NcclApi a;
#define LOFT_NCCL_SYMBOL(f) a.f = reinterpret_cast<decltype(a.f)>(symbol(lib, #f))
  LOFT_NCCL_SYMBOL(ncclGetUniqueId);
  LOFT_NCCL_SYMBOL(ncclCommInitAll);
  LOFT_NCCL_SYMBOL(ncclCommInitRankConfig);
  LOFT_NCCL_SYMBOL(ncclCommGetAsyncError);
  LOFT_NCCL_SYMBOL(ncclCommAbort);
  LOFT_NCCL_SYMBOL(ncclCommDestroy);
  LOFT_NCCL_SYMBOL(ncclGroupStart);
  LOFT_NCCL_SYMBOL(ncclGroupEnd);
  LOFT_NCCL_SYMBOL(ncclAllReduce);
  LOFT_NCCL_SYMBOL(ncclGetErrorString);
  LOFT_NCCL_SYMBOL(ncclGetLastError);
#undef LOFT_NCCL_SYMBOL
  return a;  // the library stays loaded for the process
}

}  // namespace

const NcclApi& nccl_api() {
  static std::once_flag once;
  static NcclApi api;
  std::call_once(once, [] { api = load(); });  // a failed load throws and is tried again next time
  return api;
}

}  // namespace loft
#endif  // LOFT_WITH_NCCL
