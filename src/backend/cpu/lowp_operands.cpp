#include "backend/cpu/lowp_operands.h"

#include <omp.h>

#include <algorithm>
#include <functional>

#include "backend/cpu/fast_math.h"

namespace gt::cpu {
namespace {

/// Calls f(begin, end) on contiguous chunks of [0, n), one per thread.
template <typename F>
void chunks(int64_t n, F f) {
#pragma omp parallel
  {
    const int nt = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t per = (n + nt - 1) / nt;
    const int64_t b = std::min<int64_t>(n, per * id), e = std::min<int64_t>(n, b + per);
    if (b < e) f(b, e);
  }
}

/// buf resized to exactly n elements when it is smaller (the memory plan counts exact sizes).
template <class T>
T* at_least(AlignedVector<T>& buf, int64_t n) {
  if ((int64_t)buf.size() < n) buf = AlignedVector<T>(n);
  return buf.data();
}

}  // namespace

bool LowpOperands::emulated_here(LowpFormat f) {
  return !onednn_supports(f == LowpFormat::bf16 ? MmType::bf16 : MmType::f16);
}

void LowpOperands::set_format(LowpFormat f) {
  format_ = f;
  emulated_ = emulated_here(f);
  weights_.clear();
}

MmType LowpOperands::mm_type() const {
  if (emulated_) return MmType::f32;
  return format_ == LowpFormat::bf16 ? MmType::bf16 : MmType::f16;
}

size_t LowpOperands::workspace_bytes(LowpFormat f, int64_t weight_elems, int64_t a_elems,
                                     int64_t b_elems, int64_t result_elems) {
  const size_t es = emulated_here(f) ? 4 : 2;
  return static_cast<size_t>(weight_elems + a_elems + b_elems) * es +
         static_cast<size_t>(result_elems) * sizeof(float);
}

const void* LowpOperands::round_into(AlignedVector<uint16_t>& buf, const float* x, int64_t n) {
  if (emulated_) {
    float* o = reinterpret_cast<float*>(at_least(buf, 2 * n));
    if (format_ == LowpFormat::bf16) {
      chunks(n, [&](int64_t b, int64_t e) {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) o[i] = bf16_to_float(to_bf16(x[i]));
      });
    } else {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(static_cast<_Float16>(x[i]));
    }
    return o;
  }
  uint16_t* o = at_least(buf, n);
  chunks(n, [&](int64_t b, int64_t e) { round_span(o + b, x + b, e - b); });
  return o;
}

void LowpOperands::round_span(uint16_t* dst, const float* src, int64_t n) const {
  if (format_ == LowpFormat::bf16) {
    store_bf16(dst, src, n);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = to_f16(src[i]);
  }
}

const std::vector<LowpOperands::CopyTarget>& LowpOperands::update_targets() {
  targets_.clear();
  if (emulated_ || (sr_ && format_ == LowpFormat::bf16)) return targets_;
  for (auto& [w, c] : weights_)
    if (!c.data.empty())
      targets_.push_back({w, static_cast<int64_t>(c.data.size()), c.data.data()});
  std::sort(targets_.begin(), targets_.end(),
            [](const CopyTarget& a, const CopyTarget& b) { return std::less<>()(a.w, b.w); });
  return targets_;
}

void LowpOperands::rewritten(const float* w) {
  auto it = weights_.find(w);
  if (it != weights_.end()) it->second.generation = generation_ + 1;
}

const void* LowpOperands::round(Slot s, const float* x, int64_t n) {
  return round_into(act_[s], x, n);
}

const void* LowpOperands::bf16(Slot s, const uint16_t* x, int64_t n) {
  if (!emulated_) return x;
  float* o = reinterpret_cast<float*>(at_least(act_[s], 2 * n));
  chunks(n, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) o[i] = bf16_to_float(x[i]);
  });
  return o;
}

float* LowpOperands::result_buffer(int64_t n) { return at_least(result_, n); }

void LowpOperands::set_stochastic_rounding(bool on, uint64_t seed) {
  if (on != sr_ || seed != sr_seed_) ++generation_;  // copies made otherwise are stale
  sr_ = on;
  sr_seed_ = seed;
}

const void* LowpOperands::weight(const float* w, int64_t n) {
  auto [it, fresh] = weights_.try_emplace(w);
  WeightCopy& c = it->second;
  if (fresh) c.id = weights_.size();  // first-use order: the same in every run of a model
  const int64_t len = emulated_ ? 2 * n : n;
  if (c.generation == generation_ && (int64_t)c.data.size() == len) return c.data.data();
  if ((int64_t)c.data.size() != len) c.data = AlignedVector<uint16_t>(len);
  if (sr_ && format_ == LowpFormat::bf16) {
    const uint64_t key = splitmix64(sr_seed_ ^ (c.id * 0x9E3779B97F4A7C15ull));
    if (emulated_) {
      float* o = reinterpret_cast<float*>(c.data.data());
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i)
        o[i] = bf16_to_float(to_bf16_stochastic(w[i], static_cast<uint32_t>(splitmix64(key + i))));
    } else {
      uint16_t* o = c.data.data();
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i)
        o[i] = to_bf16_stochastic(w[i], static_cast<uint32_t>(splitmix64(key + i)));
    }
  } else {
    round_into(c.data, w, n);
  }
  c.generation = generation_;
  return c.data.data();
}

}  // namespace gt::cpu
