#include "app/gpu_memory_limit.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "engine/core/byte_size.h"
#include "app/gpu_cards.h"
#include "engine/core/error.h"
#include "engine/device/device_info.h"
#include "engine/device/memory.h"
#include "engine/device/memory_limit.h"

namespace loft::app {

namespace {

constexpr const char* kOption = "--gpu-memory-limit";

bool runs_on_cpu(const std::string& device) {
  return device == "cpu" || (device == "auto" && cuda_device_count() == 0);
}

}  // namespace

void add_gpu_memory_limit_option(CLI::App& cmd, const std::string& device) {
  // A fresh parse starts uncapped (the studio and the tests run several commands in one process).
  cmd.preparse_callback([](size_t) { set_gpu_memory_limit(0); });
  cmd.add_option_function<std::string>(
      kOption,
      [&device](const std::string& text) {
        set_gpu_memory_limit(parse_byte_size(text, kOption));
        if (runs_on_cpu(device))
          std::cerr << "notice: " << kOption << " applies to GPUs only; this run is on the CPU\n";
      },
      "treat each GPU as a card of SIZE (24GiB, 16GB, 16000MB; GiB = 2^30, GB = 10^9): loft's "
      "blocks, the CUDA context and cuBLAS/NCCL buffers count against it; going over is an "
      "out-of-memory error (docs/memory.md)")
      ->type_name("SIZE");
}

int64_t held_on_gpu(Device device) {
  return int64_t(memory_outside(device).bytes + memory_stats(device).allocated);
}

GpuRoom gpu_room(Device device) {
  if (!device.is_cuda()) return {};
  if (device.index >= cuda_device_count()) {
    const int64_t cap = gpu_memory_limit();
    return cap > 0 ? GpuRoom{cap, kRuntimeAllowance, true} : GpuRoom{0, 0, true};
  }
  return {device_info(device).total_bytes, held_on_gpu(device)};
}

void check_fits_gpu_memory_limit(const llama::MethodMemory& e, int64_t micro, int64_t seq,
                                 bool grad_checkpointing, Device device) {
  const int64_t cap = gpu_memory_limit();
  if (cap <= 0 || !device.is_cuda()) return;
  const GpuRoom room = gpu_room(device);
  const int64_t card = room.card;  // the cap, or the card when smaller
  const int64_t already = room.held;
  if (e.total() + already <= card) return;
  throw UsageError(cat(
      e.method, " at --micro-batch ", micro, " x --seq ", seq, " needs about ", gib_text(e.total()),
      " by loft's estimate (frozen weights ", gib_text(e.frozen_weights), ", lm_head/embeddings ",
      gib_text(e.embeddings), ", adapter+AdamW ", gib_text(e.adapter), ", activations ",
      gib_text(e.activations), ", step working set ", gib_text(e.working), ") beside ", gib_text(already),
      room.absent ? " that a process holds on " : " already held on ", device.str(),
      " (CUDA context, libraries): more than ", kOption, " ",
      format_byte_size(cap), card < cap ? cat(" (this card has ", gib_text(card), ")") : std::string(),
      "; lower --micro-batch or --seq", grad_checkpointing ? "" : ", or add --grad-checkpointing"));
}

}  // namespace loft::app
