// dist/nccl_comm.h: NCCL (NVIDIA's collective library, in the CUDA toolkit) between the GPUs of
// a data-parallel job, on device memory the CUDA backend hands out. Bootstrapped through the
// host communicator (MPI): rank 0 makes the ncclUniqueId and broadcasts it. Each collective is
// queued on the communicator's own CUDA stream and waited for with a time-out (polling
// cudaStreamQuery and ncclCommGetAsyncError); on a time-out the NCCL communicator is aborted
// (ncclCommAbort) and gt::Error is thrown. Built only with the CUDA toolkit (GT_HAVE_NCCL).
#pragma once
#include <memory>

#include "dist/communicator.h"

namespace gt::dist {

/// An NCCL communicator over the same ranks as `bootstrap` (a collective on it), on CUDA
/// device `cuda_device` of this process. Buffers must be device memory of that device, written
/// completely before a collective is called (the caller synchronizes its own streams); each
/// collective returns when its results are in device memory. Reductions: f32/f64 sums are
/// NCCL's (the same result on every rank); reduce_scatter with uneven chunks is one ncclReduce
/// per chunk in one group, all_gather one ncclBroadcast per chunk. bf16 send types are not
/// supported (gt::Error). Throws gt::Error naming the NCCL or CUDA error.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int cuda_device,
                                                     double timeout_s);

/// Number of CUDA devices visible to this process (0 when there is no driver or device).
int cuda_device_count();

}  // namespace gt::dist
