// backend/host_device.h: GT_HD, the mark of a function that nvcc compiles for both the GPU and
// the host (__host__ __device__, forced inline) and the C++ compiler as a plain inline function,
// so that the CUDA kernels, their host emulation and host code run the same arithmetic
// (backend/cuda/kernel_math.h, backend/adam_math.h).
#pragma once

#if defined(__CUDACC__)
#define GT_HD __host__ __device__ __forceinline__
#else
#define GT_HD inline
#endif
