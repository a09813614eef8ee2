// core/memory.h: the memory operations of a device. Arenas take and give back their memory
// through one, and nothing above the backend touches device memory except through one
// (DESIGN.md, backend). Every Backend is a DeviceMemory; core knows only this interface.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace gt {

/// Allocation, zeroing and host<->device copies of one device's memory. Pointers it returns
/// are device pointers: on the CPU they are host memory, elsewhere they must not be read on
/// the host. Errors: gt::Error naming the device and the byte count when out of memory.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  /// Where the memory lives (Device::cpu for host memory).
  virtual Device device() const = 0;
  /// bytes of device memory, 64-byte aligned, NOT initialised; never null (throws instead).
  virtual void* allocate(size_t bytes) = 0;
  /// Gives back memory from allocate(); p may be null.
  virtual void deallocate(void* p) = 0;
  /// Sets bytes of device memory at p to zero.
  virtual void zero(void* p, size_t bytes) = 0;
  /// Copies bytes from host memory src to device memory dst.
  virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  /// Copies bytes from device memory src to host memory dst (waits for pending work on src).
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  /// Waits until every operation queued on the device is complete.
  virtual void synchronize() = 0;
  /// Makes this device the calling thread's (cudaSetDevice): a thread other than the one that
  /// made the device (the gradient-sync worker) calls it before its first call. A GPU refuses
  /// calls from a thread that did not. Host memory needs nothing.
  virtual void bind_thread() {}

  // ---- asynchronous copies (a step with one host synchronization) ------------------------
  /// Host memory the device copies to and from without the host waiting (CUDA's pinned,
  /// page-locked memory; plain host memory on the CPU backends), `bytes` of it, never null.
  /// Errors: gt::Error when out of memory.
  virtual void* allocate_host(size_t bytes);
  /// Gives back memory from allocate_host(); p may be null.
  virtual void deallocate_host(void* p);
  /// Queues a copy from host memory src (from allocate_host()) to device memory dst, in the
  /// order of the device's work; src must keep its contents until the copy ran (after the next
  /// synchronize()). Host memory: copies at once.
  virtual void copy_to_device_async(void* dst, const void* src, size_t bytes) {
    copy_to_device(dst, src, bytes);
  }
  /// Queues a copy from device memory src to host memory dst (from allocate_host()), in the
  /// order of the device's work; dst holds the data after the next synchronize(). Host memory:
  /// copies at once.
  virtual void copy_to_host_async(void* dst, const void* src, size_t bytes) {
    copy_to_host(dst, src, bytes);
  }

  // ---- marks: waiting for part of the queued work (the gradient sync of data parallelism) ---
  /// A mark at the end of the work queued on the device so far (CUDA: an event recorded on the
  /// backend's stream), for wait_for_mark() on another thread. Host memory, whose work is done
  /// when its call returns: 0.
  virtual uint64_t mark_queued() { return 0; }
  /// Waits until the work queued before mark m is done (cudaEventSynchronize), not for the
  /// work queued after it, so the gradient-sync thread waits for a bucket's gradients while
  /// the trainer's thread queues the rest of the backward. The calling thread must have called
  /// bind_thread(). Host memory: returns at once. Errors: gt::Error for the device's error.
  virtual void wait_for_mark(uint64_t m) { (void)m; }

  /// Whether device pointers are host memory that the host may read directly (the CPU
  /// backends; a GPU backend with device-only memory says false).
  virtual bool host_readable() const { return device() == Device::cpu; }
  /// A host pointer to `bytes` of device memory at p, for reading until the next op: p itself
  /// when host_readable() (no copy), else a copy made in `staging`.
  const void* read_on_host(const void* p, size_t bytes, std::vector<unsigned char>& staging) {
    if (host_readable()) return p;
    staging.resize(bytes);
    copy_to_host(staging.data(), p, bytes);
    return staging.data();
  }

  /// Host -> device copy of a whole tensor (host holds t.bytes() bytes).
  void upload(const Tensor& t, const void* host) { copy_to_device(t.data, host, t.bytes()); }
  /// Device -> host copy of a whole tensor (host receives t.bytes() bytes).
  void download(void* host, const Tensor& t) { copy_to_host(host, t.data, t.bytes()); }
};

}  // namespace gt
