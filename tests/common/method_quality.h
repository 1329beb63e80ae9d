// Issue 5's quality check: after the same training on the same data, each low-precision method's
// validation loss is within 5% of bf16 LoRA's. Shared by the CPU (tests/models) and GPU
// (tests/gpu) suites so both backends run exactly the same experiment.
#pragma once
#include <string>
#include <vector>

#include "engine/peft/method.h"
#include "engine/tensor/device.h"

namespace loft::test {

struct ValLoss {
  double before = 0, after = 0;
};

// A method to compare and the name it is reported under ("halo-fp8-l1").
struct QualityMethod {
  std::string name;
  MethodOptions options;
  // False for configurations reported but not held to the 5% bound: HALO level 0 (no rotation)
  // lands 8-9% above LoRA on wide-random (docs/methods.md); the rotated levels are the product's.
  bool held_to_bound = true;
  // The method's learning rate relative to LoRA's, as docs/methods.md's recipes set them: FALQON
  // trains at 10x (2e-3 vs 2e-4), because updates smaller than half an FP8 step of a backbone row
  // are lost in its requantization.
  double lr_scale = 1.0;
  // A tighter bound than the test's tolerance, where the method's issue sets one (0: none). HOT
  // (issue 14): within 3% of LoRA, with and without LQS.
  double bound = 0.0;
};

// Every low-precision method configuration the product offers, at rank 8 on all projections.
std::vector<QualityMethod> low_precision_methods();
QualityMethod lora_reference();

// Trains `model` (a folder under data/models) with `m` for `steps` AdamW steps (lr 1e-3, clip 1)
// on Alpaca instructions (data/alpaca/alpaca_small.json, Alpaca template, response-only loss,
// packed 2 x 128; a method that asks for a calibration pass gets it first, on the first training
// batch, as finetune runs it) and returns the loss on 8 held-out batches (5% of the records) before and after.
// Every step sees new records, so the comparison is not made in a memorisation regime, where
// tiny numeric differences decide the outcome.
ValLoss trained_val_loss(const std::string& model, const MethodOptions& m, int steps, Device device,
                         double lr = 1e-3);

// Runs LoRA and every low-precision method on `model` and expects each to end within `tolerance`
// (relative) of LoRA's validation loss; prints the table rows it measured.
void expect_methods_near_lora(const std::string& model, Device device, int steps,
                              double tolerance = 0.05);

}  // namespace loft::test
