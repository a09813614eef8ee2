// backend/cuda/kernels_attention_emu.cpp: kernels_attention.cu compiled by the host compiler
// against the SIMT runtime: the HostKernels of train.device = cuda-emu (backend/cuda/simt.h).
#include "backend/cuda/kernels_attention.cu"
