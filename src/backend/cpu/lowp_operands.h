// backend/cpu/lowp_operands.h: the 16-bit operands of the CPU backend's bf16 and fp16 matrix
// products: copies of the weights (refreshed when the weights change, with optional stochastic
// rounding), activations rounded per product, and bf16 tensors handed in as they are.
// Where oneDNN has no product of the 16-bit type with its instructions on this CPU (bf16
// without AVX512_BF16 or AMX: AMD Zen 3 and older, Intel Skylake to Ice Lake, Intel client
// chips without AVX-512; f16 in oneDNN 2.6 on any CPU seen here), the operands are the
// rounded values widened to f32 and the product runs in f32: a product of two bf16 (8-bit
// significand) or two fp16 (11-bit) values is exact in f32 (24 bits), and the sums are f32 as
// in oneDNN's 16-bit products, so the numerics are those of the 16-bit product (only the order
// of the f32 sums may differ). bf16 tensors handed in are then widened into a buffer.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "backend/cpu/aligned_vector.h"
#include "backend/cpu/onednn_matmul.h"

namespace gt::cpu {

/// The 16-bit formats of a product's operands.
enum class LowpFormat { bf16, f16 };

/// Operand buffers of one backend. Not thread-safe; call outside parallel regions.
class LowpOperands {
 public:
  /// Which operand buffer an activation is rounded into: a product's two activation operands
  /// need two (the backward's dout and inp).
  enum Slot { kA = 0, kB = 1 };

  /// Sets the format, decides emulation (oneDNN has no product of `f` here: onednn_supports)
  /// and drops the weight copies.
  void set_format(LowpFormat f);
  /// True when products run in f32 over rounded values (see the file comment).
  bool emulated() const { return emulated_; }
  /// The type to hand oneDNN: bf16 or f16, or f32 when emulated.
  MmType mm_type() const;
  /// Bytes per operand element: 2, or 4 when emulated.
  int elem_bytes() const { return emulated_ ? 4 : 2; }

  /// The copy of weight tensor w (n floats) in the product's operand type, made on first use
  /// and again after weights_updated() or a change of stochastic rounding. With stochastic
  /// rounding (bf16 only) the random bits are a function of (seed, the tensor's first-use
  /// order, index), so every run of a model rounds alike.
  const void* weight(const float* w, int64_t n);
  /// n floats rounded into slot s (operand type).
  const void* round(Slot s, const float* x, int64_t n);
  /// n bf16 values as an operand: x itself, or (emulated) x widened to f32 into slot s.
  const void* bf16(Slot s, const uint16_t* x, int64_t n);
  /// An f32 buffer of n floats for the result of an emulated product whose output is bf16
  /// (oneDNN's f32 products here have no bf16 output).
  float* result_buffer(int64_t n);

  /// Stochastic rounding of the bf16 weight copies (Gupta et al. 2015), keyed by seed.
  void set_stochastic_rounding(bool on, uint64_t seed);
  /// The weights changed: every copy is made again on its next use, except those an update
  /// wrote itself (rewritten()).
  void weights_updated() { ++generation_; }

  /// A weight copy an optimizer can write as it updates the weight: n 16-bit values at out
  /// for the n floats at w.
  struct CopyTarget {
    const float* w;
    int64_t n;
    uint16_t* out;
  };
  /// The copies that exist now and that round to nearest (not emulated, no stochastic
  /// rounding), sorted by w; empty otherwise. Valid until the next weight().
  const std::vector<CopyTarget>& update_targets();
  /// Rounds n floats at src into the copy format at dst, bit for bit as weight() rounds them.
  /// Does not fork threads: call it from inside a parallel region.
  void round_span(uint16_t* dst, const float* src, int64_t n) const;
  /// The update that is about to be followed by weights_updated() wrote the whole copy of w
  /// (an update_targets() entry) from the weights it wrote: that copy stays current across
  /// the next weights_updated() (and only that one: it is marked for the generation after it).
  void rewritten(const float* w);

  /// Workspace bytes for weights of weight_elems elements and activation slots of a_elems and
  /// b_elems elements, plus result_elems floats of result buffer, in format f on this CPU.
  static size_t workspace_bytes(LowpFormat f, int64_t weight_elems, int64_t a_elems,
                                int64_t b_elems, int64_t result_elems);
  /// True when products of format f are emulated on this CPU.
  static bool emulated_here(LowpFormat f);

 private:
  struct WeightCopy {
    AlignedVector<uint16_t> data;
    uint64_t generation = UINT64_MAX;
    uint64_t id = 0;
  };
  /// Rounds n floats into buf (grown to exactly the size needed: the memory plan).
  const void* round_into(AlignedVector<uint16_t>& buf, const float* x, int64_t n);

  LowpFormat format_ = LowpFormat::bf16;
  bool emulated_ = false;
  bool sr_ = false;
  uint64_t sr_seed_ = 0;
  uint64_t generation_ = 0;
  std::unordered_map<const float*, WeightCopy> weights_;
  AlignedVector<uint16_t> act_[2];
  AlignedVector<float> result_;
  std::vector<CopyTarget> targets_;
};

}  // namespace gt::cpu
