// backend/simt/internal.h: what the SIMT runtime's files share (not for its users).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "backend/simt/simt_host.h"

namespace gt::simt::detail {

/// Byte patterns: fresh and freed device memory (0xFF: every float a NaN), the guard zones
/// around allocations, shared memory at a block's start, and its redzones.
constexpr unsigned char kPoison = 0xFF;
constexpr unsigned char kGuard = 0xA5;
constexpr unsigned char kRedzone = 0xCD;
constexpr size_t kGuardBytes = 256;

/// Whether this build runs under AddressSanitizer / ThreadSanitizer.
bool asan();
bool tsan();
void asan_poison(const void* p, size_t bytes);
void asan_unpoison(const void* p, size_t bytes);

/// Counters (relaxed atomics: they order nothing).
struct Counters {
  std::atomic<uint64_t> launches{0}, tasks{0}, host_syncs{0}, blocks{0}, threads{0}, switches{0},
      event_syncs{0}, graph_launches{0};
};
Counters& counters();

/// The device selected by the calling thread; throws gt::Error naming `what` when none.
void check_device(const char* what);

/// One launch being run: its spec, the per-thread body, the next block to take, and the error
/// of the lowest-numbered block that failed (deterministic although blocks run in parallel: a
/// block taken before the failing one still runs to its end or its own error).
struct LaunchRun {
  LaunchSpec spec;
  std::string kernel;  ///< owns spec.kernel's text
  std::function<void()> body;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex m;
  std::string error;
  uint64_t error_block = UINT64_MAX;  ///< linear index of the block whose error is kept
  /// Records an error, "kernel 'k', block (x,y,z), thread (x,y,z): what", unless a block with a
  /// lower linear index already failed.
  void fail(const Dim3& block, const Dim3* thread, const std::string& what);
};

/// Runs every block of `run` (the caller and the worker pool, or the thread team), returning
/// when all are done or one failed (run.failed, run.error).
void run_blocks(LaunchRun& run);

/// Checks every live allocation's guard zones; throws gt::Error naming the allocation and
/// `after` (the kernel or task that ran last) when one was overwritten.
void check_guards(const char* after);
/// Poisons and quarantines allocation p (device_free, after the streams drained).
void release_allocation(void* p);
/// Throws gt::Error naming `what` (and invalidates the capture) while the calling thread
/// captures a graph: what cudaStreamCaptureModeThreadLocal forbids then (cudaMalloc).
void refuse_while_this_thread_captures(const char* what);
/// Waits for every stream's queued work (cudaFree's implicit synchronization).
void drain_all_streams();

}  // namespace gt::simt::detail
