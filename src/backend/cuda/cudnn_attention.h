// backend/cuda/cudnn_attention.h: causal self-attention through cuDNN's fused attention (SDPA,
// a FlashAttention-style kernel; cuDNN developer guide, "Scaled Dot Product Attention"), the
// alternative to the own flash kernels that train.attention = cudnn selects. Built through
// the cuDNN frontend's graph API (header-only, NVIDIA's nvidia-cudnn-frontend); the cuDNN 9
// library itself is loaded at the first use (dlopen of libcudnn.so.9), so a build and a run
// without cuDNN are unchanged. GPU only: the SIMT runtime has no cuDNN.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

struct CUstream_st;  // CUDA's stream (cudaStream_t is CUstream_st*)

namespace gt {

/// One causal self-attention shape: B sequences of T tokens, C channels in NH heads of
/// C / NH; f16: fp16 operands, else bf16.
struct SdpaShape {
  int B, T, C, NH;
  bool f16;
};

/// cuDNN's fused causal attention on one stream. Operands are 16-bit device tensors in the
/// model's layouts: qkv (B,T,3C) with Q, K, V the column blocks [0,C), [C,2C), [2C,3C), head h
/// the columns [h*hs, (h+1)*hs) of each; out and dout (B,T,C); lse (B,NH,T) f32, the
/// log-sum-exp of each query's scaled scores (natural log: cuDNN's softmax stats). A graph and
/// its execution plan are built once per shape and kept; the workspace grows to the largest
/// asked. The backward asks cuDNN for its deterministic algorithm (no atomics in dQ) and,
/// where this cuDNN has none for the shape, says so once on stderr and takes the default.
/// Errors: gt::Error naming the step (library load, graph validation, support, execution) and
/// the shape.
class CudnnAttention {
 public:
  /// Loads libcudnn.so.9 (once per process) and makes a cuDNN handle on `stream`. Throws
  /// gt::Error when the library cannot be loaded (with dlopen's reason and how to install it).
  explicit CudnnAttention(CUstream_st* stream);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  /// out (B,T,C) and lse (B,NH,T) from qkv (B,T,3C), scores scaled by 1/sqrt(hs).
  void forward(uint16_t* out, float* lse, const uint16_t* qkv, const SdpaShape& s);
  /// dqkv (B,T,3C; every element written) from dout (B,T,C) and the forward's qkv, out, lse.
  void backward(uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv, const uint16_t* out,
                const float* lse, const SdpaShape& s);
  /// "cuDNN 9.x.y" (the loaded library's version).
  std::string describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gt
