// fuzz/fuzz_data_common.h: what the two data targets do with loaded tokens: the checkpoint's data
// identity, a few training batches and a validation batch, as a run would.
#pragma once
#include <vector>

#include "train/data.h"

namespace gt::fuzz {

/// Loads cfg's data and draws batches of (B=2, T=cfg.model.block_size).
inline void load_and_sample(const TrainConfig& cfg) {
  TokenData d = load_data(cfg, nullptr);
  (void)describe_data(data_identity(cfg, d));
  const int B = 2, T = cfg.model.block_size;
  std::vector<int32_t> x(B * T), y(B * T);
  BatchSampler s(d.train, B, T, 1234);
  for (int i = 0; i < 3; ++i) s.next(x.data(), y.data());
  if (!d.val.empty()) eval_batch(d.val, B, T, 1, x.data(), y.data());
  (void)d.tokenizer.decode(x.data(), x.size());
}

}  // namespace gt::fuzz
