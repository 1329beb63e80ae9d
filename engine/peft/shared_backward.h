// The backward's half of SharedInput (engine/peft/shared_input.h): what the projections that read
// one input do once for all of them after their own backwards. LoRA's grouped A (lora_linear.h)
// keeps each member's gᵀ = (dy·B)ᵀ in one scratch here and queues one dA and one dx GEMM for the
// group; HALO's frozen products (FrozenWeight::backward_input_grouped) are summed in another and
// rotated back once, queued first because that writes dx. The model makes one per input, passes it
// to each reader's backward, then calls finish() with the input's gradient, which the readers'
// backwards or their queued work write or add to.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft {

class SharedBackward {
 public:
  SharedBackward() = default;
  SharedBackward(const SharedBackward&) = delete;
  SharedBackward& operator=(const SharedBackward&) = delete;
  // Work queued and never finished is a lost gradient: the destructor aborts on it, unless an
  // exception is unwinding (the step fails anyway).
  ~SharedBackward();

  // The scratch stored under `key`, made by `make` on first use.
  Tensor& scratch(const std::string& key, const std::function<Tensor()>& make);
  // Queues f to run at finish(), once per key (a later call with the same key is ignored).
  void at_finish(const std::string& key, std::function<void(Tensor& dx)> f);
  // Runs the queued work in the order it was queued, adding onto dx.
  void finish(Tensor& dx);

 private:
  std::map<std::string, Tensor> scratch_;
  std::vector<std::pair<std::string, std::function<void(Tensor&)>>> queued_;
};

}  // namespace loft
