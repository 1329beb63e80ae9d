// A Tensor is a contiguous row-major block of one dtype on one device: shape + dtype + a shared
// Storage + a byte offset into it. Views (reshape, row slices) share the storage. There are no
// strides: ops take explicit transpose flags instead, which is all a Llama needs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/device/memory.h"
#include "engine/tensor/device.h"
#include "engine/tensor/dtype.h"

namespace loft {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[2, 64]"
int64_t shape_numel(const Shape& s);

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(Shape shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(Shape shape, DType dtype, Device device = Device::cpu());
  // Copies host bytes (already in `dtype`) into a new tensor on `device`.
  static Tensor from_host(const void* data, Shape shape, DType dtype, Device device = Device::cpu());
  static Tensor from_vector(const std::vector<float>& v, Shape shape, Device device = Device::cpu());
  static Tensor from_vector(const std::vector<int32_t>& v, Shape shape, Device device = Device::cpu());
  // Wraps memory owned elsewhere (an mmap'd file); `owner` keeps it alive as long as any view.
  static Tensor wrap(const void* data, Shape shape, DType dtype, Device device,
                     std::shared_ptr<const void> owner);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int dim() const { return int(shape_.size()); }
  int64_t size(int d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  std::string str() const;  // "[2, 64] BF16 cuda:0"

  void* data() const;
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data());
  }

  // Same elements, new shape (numel must match). Shares storage.
  Tensor view(Shape shape) const;
  // Rows [start, start+len) of dim 0. Shares storage.
  Tensor slice(int64_t start, int64_t len) const;

  Tensor to(Device device) const;  // copy to another device (a plain copy when already there)
  Tensor clone() const;
  void copy_from(const Tensor& src);  // same shape and dtype, any devices
  void zero_();

  // Host copy as float32 (F32/BF16/F16 only), or as int64 (integer dtypes). For tests and I/O.
  std::vector<float> to_float_vector() const;
  std::vector<int64_t> to_int_vector() const;

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_;
};

}  // namespace loft
