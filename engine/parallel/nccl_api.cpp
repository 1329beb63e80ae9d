#include "engine/parallel/nccl_api.h"

#ifdef LOFT_WITH_NCCL
#include "engine/core/dynamic_library.h"

namespace loft {

namespace {

NcclApi load() {
  const DynamicLibrary lib = open_library("libnccl.so.2", "training on several GPUs needs NCCL",
                                           "install NCCL or add its lib folder to LD_LIBRARY_PATH");
  NcclApi a;
#define LOFT_NCCL_SYMBOL(f) \
  a.f = reinterpret_cast<decltype(a.f)>(library_symbol(lib, #f, ": NCCL 2.14 or newer is needed"))
  LOFT_NCCL_SYMBOL(ncclGetUniqueId);
  LOFT_NCCL_SYMBOL(ncclCommInitRankConfig);
  LOFT_NCCL_SYMBOL(ncclCommGetAsyncError);
  LOFT_NCCL_SYMBOL(ncclCommAbort);
  LOFT_NCCL_SYMBOL(ncclCommDestroy);
  LOFT_NCCL_SYMBOL(ncclGroupStart);
  LOFT_NCCL_SYMBOL(ncclGroupEnd);
  LOFT_NCCL_SYMBOL(ncclAllReduce);
  LOFT_NCCL_SYMBOL(ncclAllGather);
  LOFT_NCCL_SYMBOL(ncclGetErrorString);
  LOFT_NCCL_SYMBOL(ncclGetLastError);
#undef LOFT_NCCL_SYMBOL
  return a;
}

}  // namespace

const NcclApi& nccl_api() { return load_once(load); }

}  // namespace loft
#endif  // LOFT_WITH_NCCL
