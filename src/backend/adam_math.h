// backend/adam_math.h: the arithmetic of the AdamW step that the host (train/adamw.cpp,
// Backend::adamw_step) and the CUDA kernels (kernel_math.h, on the GPU and in its emulation)
// share, so that every path computes it from the same source, bit for bit.
#pragma once
#include <cmath>

#include "backend/host_device.h"

namespace gt {

/// The factor the gradients are multiplied by as AdamW reads them, from norm_sq, the global sum
/// of squares of the gradients as they are held (loss_scale times the true ones): 1 /
/// loss_scale, times torch.nn.utils.clip_grad_norm_'s coefficient clip / (norm + 1e-6) when that
/// is below 1, norm = sqrt(norm_sq) / loss_scale the L2 norm of the unscaled gradients (clip <= 0:
/// no clipping). In double, so that host and device agree bit for bit.
GT_HD double adam_grad_mult(double norm_sq, double loss_scale, double clip) {
  double mult = 1.0 / loss_scale;
  if (clip > 0) {
    const double norm = sqrt(norm_sq) / loss_scale;
    const double coef = clip / (norm + 1e-6);
    if (coef < 1.0) mult *= coef;
  }
  return mult;
}

}  // namespace gt
