// train/precision.h: dynamic loss scaling for fp16 training, with the semantics of PyTorch's
// torch.cuda.amp.GradScaler (defaults init_scale 65536, growth_factor 2, backoff_factor 0.5,
// growth_interval 2000): the loss gradient is multiplied by the scale; a step whose gradients
// hold an inf or NaN is skipped (no change to weights, AdamW moments or AdamW's step count)
// and halves the scale; after growth_interval clean steps in a row the scale doubles.
#pragma once
#include <cstdint>

namespace gt {

class GradScaler {
 public:
  /// enabled = false: scale() is 1 and update() never skips (fp32 and bf16).
  explicit GradScaler(bool enabled = false, double init_scale = 65536.0,
                      int64_t growth_interval = 2000)
      : enabled_(enabled), scale_(enabled ? init_scale : 1.0), growth_interval_(growth_interval) {}

  bool enabled() const { return enabled_; }
  /// Current loss scale (1 when disabled).
  double scale() const { return scale_; }
  /// Clean steps since the last overflow or growth.
  int64_t clean_steps() const { return clean_; }
  /// Steps skipped because of inf/NaN gradients, in total.
  int64_t skipped_steps() const { return skipped_; }

  /// Records the outcome of a step: found_inf halves the scale and counts a skip; otherwise
  /// a clean step, and every growth_interval clean steps in a row double the scale.
  void update(bool found_inf) {
    if (!enabled_) return;
    if (found_inf) {
      scale_ *= 0.5;
      clean_ = 0;
      ++skipped_;
    } else if (++clean_ >= growth_interval_) {
      scale_ *= 2.0;
      clean_ = 0;
    }
  }
  /// Restores the state saved in a checkpoint.
  void restore(double scale, int64_t clean, int64_t skipped) {
    scale_ = scale;
    clean_ = clean;
    skipped_ = skipped;
  }

 private:
  bool enabled_;
  double scale_;
  int64_t growth_interval_;
  int64_t clean_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace gt
