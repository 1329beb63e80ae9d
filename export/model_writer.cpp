#include "export/model_writer.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/core/progress.h"
#include "engine/io/atomic_file.h"
#include "engine/io/safetensors_writer.h"
#include "models/llama/fp8_checkpoint.h"

namespace loft::exporter {

namespace fs = std::filesystem;

namespace {

// The scale tensor's shape in the file: compressed-tensors writes a per-tensor scale as [1].
Shape stored_scale_shape(const llama::Fp8Checkpoint& q, int64_t out, int64_t in) {
  if (q.granularity == llama::Fp8Checkpoint::Granularity::Tensor) return {1};
  const auto [rows, cols] = q.block_for(out, in);
  return quant::scale_grid(out, in, rows, cols);
}

// The file slots of source tensor `info`: one, or weight + scale for an FP8 projection.
std::vector<SafetensorsSlot> slots_of(const MergedTensorInfo& info,
                                      const std::optional<llama::Fp8Checkpoint>& fp8) {
  if (fp8 && info.role == TensorRole::Projection)
    return {{info.name, DType::F8_E4M3, info.shape},
            {llama::fp8_scale_name(*fp8, info.name), DType::F32,
             stored_scale_shape(*fp8, info.shape[0], info.shape[1])}};
  return {{info.name, DType::BF16, info.shape}};
}

Tensor to_bf16(const Tensor& t) {
  if (t.dtype() == DType::BF16) return t;
  const std::vector<float> f = t.dtype() == DType::F32
                                   ? std::vector<float>(t.ptr<float>(), t.ptr<float>() + t.numel())
                                   : t.to_float_vector();
  Tensor out = Tensor::empty(t.shape(), DType::BF16);
  auto* o = out.ptr<uint16_t>();
  for (size_t i = 0; i < f.size(); ++i) o[i] = f32_to_bf16(f[i]);
  return out;
}

// Σ (written − merged)² and Σ merged², for the report.
struct ErrorSums {
  double diff = 0, ref = 0;
  void add(const Tensor& merged, const Tensor& written_f32) {
    const float* m = merged.ptr<float>();
    const float* w = written_f32.ptr<float>();
    for (int64_t i = 0; i < merged.numel(); ++i) {
      const double d = double(w[i]) - double(m[i]);
      diff += d * d;
      ref += double(m[i]) * double(m[i]);
    }
  }
};

// One shard: a contiguous run of source tensors.
struct Shard {
  size_t first = 0, last = 0;  // source tensor indices [first, last)
  std::vector<SafetensorsSlot> slots;
};

std::vector<Shard> plan_shards(const MergedSource& src, const ModelWriteOptions& opt) {
  std::vector<Shard> shards(1);
  uint64_t bytes = 0;
  const auto& infos = src.tensors();
  for (size_t i = 0; i < infos.size(); ++i) {
    const std::vector<SafetensorsSlot> s = slots_of(infos[i], opt.fp8);
    const uint64_t n = SafetensorsStreamWriter::data_bytes(s);
    if (bytes > 0 && bytes + n > opt.max_shard_bytes) {
      shards.back().last = i;
      shards.push_back({i, i, {}});
      bytes = 0;
    }
    shards.back().slots.insert(shards.back().slots.end(), s.begin(), s.end());
    bytes += n;
  }
  shards.back().last = infos.size();
  return shards;
}

std::string shard_name(size_t i, size_t n) {
  if (n == 1) return "model.safetensors";
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

}  // namespace

ModelWriteReport write_merged_model(const MergedSource& src, const fs::path& out,
                                    const ModelWriteOptions& opt) {
  const std::vector<Shard> shards = plan_shards(src, opt);
  ModelWriteReport report;
  report.shards = int64_t(shards.size());
  nlohmann::json weight_map = nlohmann::json::object();
  Progress progress(opt.progress, "export", int64_t(src.tensors().size()), "tensors");
  ErrorSums err;
  for (size_t si = 0; si < shards.size(); ++si) {
    const Shard& shard = shards[si];
    const std::string file = shard_name(si, shards.size());
    for (const SafetensorsSlot& s : shard.slots) weight_map[s.name] = file;
    report.bytes += SafetensorsStreamWriter::data_bytes(shard.slots);
    SafetensorsStreamWriter w(out / file, shard.slots, {{"format", "pt"}});
    for (size_t i = shard.first; i < shard.last; ++i) {
      const MergedTensor t = src.read(i);
      const bool proj = t.info.role == TensorRole::Projection;
      if (opt.fp8 && proj) {
        const auto [rows, cols] = opt.fp8->block_for(t.info.shape[0], t.info.shape[1]);
        quant::ScaledFp8 q;
        if (t.fp8.defined()) {  // FALQON: its own codes, the one scale repeated over the layout
          q = quant::with_repeated_scale(t.fp8.codes, t.fp8.scales.ptr<float>()[0], rows, cols);
          ++report.exact_fp8;
        } else {
          q = quant::quantize_scaled_fp8(t.value, rows, cols, t.info.name);
        }
        Tensor back = Tensor::empty(t.info.shape, DType::F32);
        quant::dequantize(q, back);
        err.add(t.value, back);
        w.add(t.info.name, q.codes);
        w.add(llama::fp8_scale_name(*opt.fp8, t.info.name),
              q.scales.view(stored_scale_shape(*opt.fp8, t.info.shape[0], t.info.shape[1])));
      } else {
        const Tensor b = to_bf16(t.value);
        if (proj) err.add(t.value, Tensor::from_vector(b.to_float_vector(), b.shape()));
        w.add(t.info.name, b);
      }
      progress.update(int64_t(i + 1), cat("layer ", t.info.layer));
    }
    w.commit();
  }
  progress.finish();
  if (shards.size() > 1) {
    const nlohmann::json index{{"metadata", {{"total_size", report.bytes}}},
                               {"weight_map", weight_map}};
    write_file_atomic(out / "model.safetensors.index.json", index.dump(2) + "\n");
  }
  report.projection_rel_error = err.ref > 0 ? std::sqrt(err.diff / err.ref) : 0.0;
  return report;
}

}  // namespace loft::exporter
