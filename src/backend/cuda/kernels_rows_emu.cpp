// backend/cuda/kernels_rows_emu.cpp: kernels_rows.cu compiled by the host compiler against the SIMT
// runtime: the HostKernels of train.device = cuda-emu (backend/cuda/simt.h).
#include "backend/cuda/kernels_rows.cu"
