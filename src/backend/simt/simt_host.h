// backend/simt/simt_host.h: the SIMT runtime: CUDA's execution model on the CPU, so that the
// CUDA backend's own kernel source (backend/cuda/kernels.cu), compiled by the host compiler
// against backend/cuda/simt.h, runs thread by thread in CI on machines without a GPU.
//
// What it runs as CUDA does (CUDA C++ Programming Guide, "Programming Model" and "Hardware
// Implementation"; limits of compute capability 9.0, H100/H200):
//   - a launch is a grid of blocks; each block a set of threads with threadIdx, blockIdx,
//     blockDim and gridDim; blocks run in any order, on several OS threads at once;
//   - threads of a block run as fibers (fiber.h) or, in the `threads` mode (and always under
//     ThreadSanitizer), as real OS threads, so that a missing barrier is a data race TSan sees;
//   - __syncthreads (every thread of the block must reach the same barrier: a thread that
//     returns while others wait is an error, as is a deadlock), warps of 32 lanes with
//     shuffles, votes and other collectives over a mask (every lane of the mask must reach the
//     same collective; a lane outside the mask, one that exited, or one waiting elsewhere is
//     an error that names the lanes), per-block shared memory (static declarations and the
//     launch's dynamic bytes, poisoned at the block's start, with guard zones: an overrun is
//     an error, and an AddressSanitizer report in ASan builds), atomics;
//   - device memory: host memory that the host must not read directly: allocations are
//     poisoned (0xFF bytes: NaN floats) when made and when freed, have guard zones checked
//     after every launch (poisoned for ASan), and their release is deferred; a kernel argument
//     that points outside every allocation is refused;
//   - streams: in the `deferred` mode (the default) launches and copies queue on the stream
//     and run on the stream's worker thread only at a synchronization point (a copy to the
//     host, a synchronize, a free), so a host read of device memory without a copy, or
//     without a synchronization after an asynchronous copy, reads stale or poisoned data;
//     `async` runs them as they come (host and device really concurrent: TSan sees races);
//     `sync` runs each at once;
//   - the device a thread selected (set_device, cudaSetDevice): a call from a thread that
//     selected none is refused.
// Errors: gt::Error naming the kernel, the block and the thread, raised at the launch (sync
// mode) or at the next synchronization (deferred, async), as CUDA reports kernel errors.
//
// Configuration (environment, read at first use; or set_config() in tests):
//   GT_SIMT_MODE=fibers|threads  GT_SIMT_STREAM=deferred|async|sync
//   GT_SIMT_ORDER=forward|reverse|random:SEED (the order threads and blocks are scheduled in)
//   GT_SIMT_WORKERS=N (OS threads that run blocks; default: the machine's)
//   GT_CUDA_SYNC_CHECK=1 (synchronize after every launch, so an error names its kernel)
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/simt/launch_config.h"

namespace gt::simt {

// ---- limits of compute capability 9.0 (CUDA C++ Programming Guide, "Technical Specifications
// per Compute Capability"; cudaDeviceProp of an H100/H200) ------------------------------------
constexpr unsigned kWarpSize = 32;
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDimXY = 1024, kMaxBlockDimZ = 64;
constexpr uint64_t kMaxGridX = 2147483647ull;
constexpr unsigned kMaxGridYZ = 65535;
/// Static shared memory per block (48 KiB), and the most a block may have with the dynamic
/// part after cudaFuncSetAttribute(MaxDynamicSharedMemorySize): 227 KiB on sm_90.
constexpr size_t kStaticSharedBytes = 48 * 1024;
constexpr size_t kMaxSharedBytesOptIn = 227 * 1024;

enum class Mode { fibers, threads };
enum class StreamMode { deferred, async, sync };
enum class Order { forward, reverse, random };

/// The runtime's configuration.
struct Config {
  Mode mode = Mode::fibers;
  StreamMode stream = StreamMode::deferred;
  Order order = Order::forward;
  uint64_t seed = 0;        ///< for Order::random
  int workers = 0;          ///< OS threads running blocks; 0: hardware threads
  bool sync_check = false;  ///< GT_CUDA_SYNC_CHECK: synchronize after every launch
  bool execute = true;      ///< false: launches and products are checked and recorded, not run
  /// Tests: every stream capture ends invalidated, so that a caller's way without a graph is
  /// exercised.
  bool fail_captures = false;
  size_t fiber_stack_bytes = 0;  ///< 0: 64 KiB (256 KiB under sanitizers)
};
/// The configuration in force (from the environment at first use).
Config config();
/// Replaces it (tests). Must not be called while work is queued or running.
void set_config(const Config& c);

/// Counters since the last reset_stats(), for tests (e.g. host synchronizations per step).
struct Stats {
  uint64_t launches = 0;    ///< kernel launches
  uint64_t tasks = 0;       ///< library calls queued on streams (the emulated cuBLASLt)
  uint64_t host_syncs = 0;  ///< times the host waited for a stream (synchronize, a copy to
                            ///< the host, a free)
  uint64_t blocks = 0, threads = 0;
  uint64_t switches = 0;     ///< fiber switches
  uint64_t event_syncs = 0;  ///< event_synchronize() calls (a thread waited for part of a stream)
  uint64_t graph_launches = 0;  ///< graph_launch() calls
};
Stats stats();
void reset_stats();

/// One launch as recorded (Config::execute == false, or record_launches(true)).
struct LaunchRecord {
  std::string kernel;
  Dim3 grid, block;
  size_t dynamic_smem = 0;
  size_t static_smem = 0;  ///< only known once a block ran (0 when not executed)
};
/// Starts (true) or stops recording launches; records() gives them in launch order.
void record_launches(bool on);
std::vector<LaunchRecord> records();

// ---- devices, memory, streams ---------------------------------------------------------------
class Stream;

/// Selects device `index` for the calling OS thread (cudaSetDevice). The runtime has one
/// device, 0. Errors: gt::Error for another index.
void set_device(int index);
/// The device the calling thread selected, or -1.
int current_device();

/// Device memory (cudaMalloc): aligned to 256 bytes, poisoned, between guard zones. Errors:
/// gt::Error when out of memory.
void* device_malloc(size_t bytes);
/// cudaFree: waits for every stream, poisons the memory and releases it later. Errors:
/// gt::Error for a pointer that is not a live allocation's start (double free included).
void device_free(void* p);
/// Whether [p, p + bytes) lies inside one live allocation (its base and size when so).
bool device_range(const void* p, size_t bytes, const void** base = nullptr, size_t* size = nullptr);

/// The device's stream (one per backend).
Stream* create_stream();
void destroy_stream(Stream* s);

/// cudaMemcpyAsync host -> device: src is copied at once into a staging buffer (so the
/// caller may reuse it on return, as with pageable memory); the copy into dst runs in stream
/// order. Errors: gt::Error when dst is not device memory of that size.
void memcpy_h2d(Stream* s, void* dst, const void* src, size_t bytes);
/// cudaMemcpyAsync host -> device from pinned memory: src is read when the copy runs, in
/// stream order (so the host must not change it before a synchronization).
void memcpy_h2d_async(Stream* s, void* dst, const void* src, size_t bytes);
/// cudaMemcpy device -> host: waits for the stream, then copies.
void memcpy_d2h(Stream* s, void* dst, const void* src, size_t bytes);
/// cudaMemcpyAsync device -> host: in stream order; dst (host memory) is poisoned at once and
/// holds the data only after the stream is synchronized.
void memcpy_d2h_async(Stream* s, void* dst, const void* src, size_t bytes);
/// cudaMemcpyAsync device -> device, in stream order.
void memcpy_d2d(Stream* s, void* dst, const void* src, size_t bytes);
/// cudaMemsetAsync, in stream order.
void memset_async(Stream* s, void* dst, int value, size_t bytes);
/// A library call on the device timeline (the emulated cuBLASLt): `task` runs in stream order
/// on the stream's thread; it may use run_parallel(). Errors it throws surface at the next
/// synchronization, named `what`.
void enqueue_task(Stream* s, const char* what, std::function<void()> task);
/// cudaStreamSynchronize. Errors: the first error of queued work, then cleared.
void stream_synchronize(Stream* s);
/// cudaEventRecord on s: an event at the end of the work queued on s so far (its number).
uint64_t event_record(Stream* s);
/// cudaEventSynchronize: waits, on any thread that selected the device, until the work
/// queued on s before event e is done, not for later work. Errors: the stream's first error
/// (not cleared: the next stream_synchronize reports it too).
void event_synchronize(Stream* s, uint64_t e);
/// Splits [0, n) over the runtime's worker threads (for library tasks); f(begin, end).
void run_parallel(int64_t n, const std::function<void(int64_t, int64_t)>& f);

// ---- graphs (CUDA C++ Programming Guide, "CUDA Graphs": stream capture) ---------------------
/// A captured graph: the work queued on a stream between stream_begin_capture() and
/// stream_end_capture(), with its arguments as they were then (pointers included).
struct Graph;
/// cudaStreamBeginCapture (cudaStreamCaptureModeThreadLocal): from now on what is queued on s
/// is recorded, not run. While it captures, what CUDA refuses then is refused with gt::Error
/// and invalidates the capture: a synchronization of any kind (a copy to pageable host memory,
/// cudaFree, an event the host waits on), a copy from pageable host memory, and cudaMalloc on
/// the capturing thread. Errors: gt::Error when s already captures.
void stream_begin_capture(Stream* s);
/// cudaStreamEndCapture: the graph. Errors: gt::Error when s was not capturing, or when the
/// capture was invalidated (naming the first refused call); s captures no more either way.
std::shared_ptr<const Graph> stream_end_capture(Stream* s);
/// The names of the graph's work in order ("kernel 'name'", "cudaMemsetAsync", ...): its
/// shape, which cudaGraphExecUpdate needs unchanged to update an instantiated graph.
std::vector<std::string> graph_shape(const Graph& g);
/// Whether s is capturing (cudaStreamIsCapturing).
bool stream_capturing(Stream* s);
/// cudaGraphLaunch: queues the graph's work on s, in its captured order, with its captured
/// arguments (copies to the host poison their destinations again). Counted in
/// Stats::graph_launches.
void graph_launch(Stream* s, const Graph& g);

// ---- launches -------------------------------------------------------------------------------
/// A launch as <<<grid, block, dynamic_smem, stream>>> gives it, and the kernel's name.
struct LaunchSpec {
  const char* kernel = "";
  Dim3 grid, block;
  size_t dynamic_smem = 0;
};
/// Queues a launch: body() runs once per thread of every block, with this_thread() set. The
/// pointers are the kernel's pointer arguments, each checked to be null or device memory.
/// Errors: gt::Error naming the kernel for a configuration beyond the limits above.
void launch(Stream* s, const LaunchSpec& spec, std::function<void()> body,
            const std::vector<const void*>& pointer_args);

// ---- inside a kernel ------------------------------------------------------------------------
/// What a running thread sees (threadIdx ... gridDim of simt.h).
struct ThreadCtx {
  Dim3 threadIdx, blockIdx, blockDim, gridDim;
  unsigned linear = 0;  ///< x + y*X + z*X*Y
  unsigned lane = 0;    ///< linear % 32
  unsigned warp = 0;    ///< linear / 32
};
/// The calling kernel thread (null outside a kernel).
extern thread_local constinit const ThreadCtx* tl_ctx;
/// The calling kernel thread. Valid only inside a kernel.
inline const ThreadCtx& this_thread() { return *tl_ctx; }

/// A warp collective: every lane of `mask` calls it with the same fn; once all have arrived,
/// fn(in, out, mask) runs once with the 32 lanes' in/out pointers (null for lanes outside the
/// mask) and every lane continues. Errors (raised in the kernel): the caller outside the mask,
/// a lane of the mask that exited or waits at another collective or barrier.
using CollectiveFn = void (*)(const void* const* in, void* const* out, unsigned mask);
void warp_collective(unsigned mask, CollectiveFn fn, const void* in, void* out, const char* what);
/// __syncthreads.
void syncthreads();
/// The static shared-memory array at this point of the kernel (the k-th declaration a thread
/// reaches is the block's k-th array: every thread of the block gets the same memory).
void* shared_static(size_t bytes, size_t align, const char* name);
/// The launch's dynamic shared memory (`extern __shared__`), and its size.
void* shared_dynamic(size_t* bytes);

}  // namespace gt::simt
