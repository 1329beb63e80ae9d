// NCCL's entry points, loaded from libnccl.so.2 at first use (dlopen) instead of linked: the
// loft binary then starts, and trains on one GPU, on machines whose CUDA install has no NCCL;
// only a data-parallel run needs it, and it says so by name when it is missing. Builds with
// nccl.h only (LOFT_WITH_NCCL); the types come from the header.
#pragma once
#ifdef LOFT_WITH_NCCL
#include <nccl.h>

namespace loft {

struct NcclApi {
  decltype(&::ncclGetUniqueId) ncclGetUniqueId;
  decltype(&::ncclCommInitRankConfig) ncclCommInitRankConfig;
  decltype(&::ncclCommGetAsyncError) ncclCommGetAsyncError;
  decltype(&::ncclCommAbort) ncclCommAbort;
  decltype(&::ncclCommDestroy) ncclCommDestroy;
  decltype(&::ncclGroupStart) ncclGroupStart;
  decltype(&::ncclGroupEnd) ncclGroupEnd;
  decltype(&::ncclAllReduce) ncclAllReduce;
  decltype(&::ncclAllGather) ncclAllGather;
  decltype(&::ncclGetErrorString) ncclGetErrorString;
  decltype(&::ncclGetLastError) ncclGetLastError;
};

// Loaded once per process; throws Error naming libnccl.so.2 and dlerror()'s reason when the
// library or one of these symbols is missing.
const NcclApi& nccl_api();

}  // namespace loft
#endif  // LOFT_WITH_NCCL
