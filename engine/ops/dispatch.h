// dispatch::name(device, args...): every row of op_list.def run on `device`, by cpu::name or
// cuda::name. Only the validating ops (ops.cpp, kv_cache_ops.cpp) call it, after their checks.
// Each call is an op of the profiler's op breakdown (engine/device/profile.h: prof::OpScope).
#pragma once
#include "engine/device/profile.h"
#include "engine/ops/ops.h"

namespace loft::ops::dispatch {

// Throws the error of a build without the CUDA backend asked to run `op` on a CUDA device.
[[noreturn]] void no_cuda(const char* op);

#define LOFT_OP_PARAMS(...) __VA_ARGS__
#ifdef LOFT_WITH_CUDA
#define LOFT_OP(ret, name, params, args)                          \
  inline ret name(Device device, LOFT_OP_PARAMS params) {         \
    prof::OpScope op_scope(#name);                                \
    return device.is_cpu() ? cpu::name args : cuda::name args;    \
  }
#else
#define LOFT_OP(ret, name, params, args)                          \
  inline ret name(Device device, LOFT_OP_PARAMS params) {         \
    if (!device.is_cpu()) no_cuda(#name);                         \
    prof::OpScope op_scope(#name);                                \
    return cpu::name args;                                        \
  }
#endif
#include "engine/ops/op_list.def"
#undef LOFT_OP
#undef LOFT_OP_PARAMS

}  // namespace loft::ops::dispatch
