// backend/simt/stream.cpp: the SIMT runtime's configuration, counters, selected device,
// streams (a queue and a worker thread each) and the checks a launch gets before it queues.
#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>
#include <thread>
#include <vector>

#include "backend/simt/internal.h"
#include "core/error.h"

namespace gt::simt {
namespace detail {

Counters& counters() {
  static Counters c;
  return c;
}

namespace {
thread_local int tl_device = -1;

Config from_environment() {
  Config c;
  auto env = [](const char* k) -> std::string {
    const char* v = std::getenv(k);
    return v ? v : "";
  };
  const std::string mode = env("GT_SIMT_MODE");
  if (mode == "threads" || tsan())
    c.mode = Mode::threads;
  else if (!mode.empty() && mode != "fibers")
    throw Error(fmt::format("GT_SIMT_MODE = '{}': expected fibers or threads", mode));
  const std::string stream = env("GT_SIMT_STREAM");
  if (stream == "async")
    c.stream = StreamMode::async;
  else if (stream == "sync")
    c.stream = StreamMode::sync;
  else if (!stream.empty() && stream != "deferred")
    throw Error(fmt::format("GT_SIMT_STREAM = '{}': expected deferred, async or sync", stream));
  const std::string order = env("GT_SIMT_ORDER");
  if (order == "reverse") {
    c.order = Order::reverse;
  } else if (order.rfind("random", 0) == 0) {
    c.order = Order::random;
    c.seed = order.size() > 7 ? std::strtoull(order.c_str() + 7, nullptr, 10) : 1;
  } else if (!order.empty() && order != "forward") {
    throw Error(
        fmt::format("GT_SIMT_ORDER = '{}': expected forward, reverse or random:SEED", order));
  }
  if (const std::string w = env("GT_SIMT_WORKERS"); !w.empty()) c.workers = std::atoi(w.c_str());
  c.sync_check = env("GT_CUDA_SYNC_CHECK") == "1";
  return c;
}

std::mutex& config_mutex() {
  static std::mutex m;
  return m;
}
Config& config_ref() {
  static Config c = from_environment();
  return c;
}
}  // namespace

void check_device(const char* what) {
  if (tl_device != 0)
    throw Error(fmt::format(
        "cuda-emu: {} from a thread that selected no device: call cudaSetDevice first (a "
        "backend's other threads call Backend::bind_thread())",
        what));
}

void LaunchRun::fail(const Dim3& block, const Dim3* thread, const std::string& what) {
  std::lock_guard lock(m);
  const Dim3& g = spec.grid;
  const uint64_t linear = (uint64_t(block.z) * g.y + block.y) * g.x + block.x;
  failed = true;
  if (linear >= error_block) return;
  error_block = linear;
  error = thread ? fmt::format("kernel '{}', block ({},{},{}), thread ({},{},{}): {}", kernel,
                               block.x, block.y, block.z, thread->x, thread->y, thread->z, what)
                 : fmt::format("kernel '{}', block ({},{},{}): {}", kernel, block.x, block.y,
                               block.z, what);
}

}  // namespace detail

using namespace detail;

Config config() {
  std::lock_guard lock(config_mutex());
  return config_ref();
}
void set_config(const Config& c) {
  std::lock_guard lock(config_mutex());
  config_ref() = c;
  if (tsan()) config_ref().mode = Mode::threads;  // fibers are invisible to TSan
}

Stats stats() {
  auto& c = counters();
  return {c.launches.load(), c.tasks.load(),    c.host_syncs.load(),  c.blocks.load(),
          c.threads.load(),  c.switches.load(), c.event_syncs.load(), c.graph_launches.load()};
}
void reset_stats() {
  auto& c = counters();
  c.launches = c.tasks = c.host_syncs = c.blocks = c.threads = c.switches = c.event_syncs =
      c.graph_launches = 0;
}

namespace {
std::mutex records_mutex;
bool recording = false;
std::vector<LaunchRecord> recorded;
}  // namespace
void record_launches(bool on) {
  std::lock_guard lock(records_mutex);
  recording = on;
  if (on) recorded.clear();
}
std::vector<LaunchRecord> records() {
  std::lock_guard lock(records_mutex);
  return recorded;
}

void set_device(int index) {
  if (index != 0)
    throw Error(fmt::format("cuda-emu: cudaSetDevice({}): the emulated GPU is device 0", index));
  tl_device = index;
}
int current_device() { return tl_device; }

// ---- streams ------------------------------------------------------------------------------
/// What a stream runs: a kernel, a copy or a library task.
struct Item {
  std::string what;
  std::function<void()> fn;
  bool check;  ///< the guard zones are checked after it
};
namespace {
/// The stream this thread is capturing into (cudaStreamCaptureModeThreadLocal), or null.
thread_local Stream* tl_capturing = nullptr;
}  // namespace

/// A captured graph: the stream's work in order, and the host-side parts to run again at
/// each launch.
struct Graph {
  std::vector<Item> items;
  std::vector<std::function<void()>> at_launch;
};

class Stream {
 public:
  Stream() : worker_([this] { main(); }) {}
  ~Stream() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
      released_ = pushed_;
    }
    cv_.notify_all();
    worker_.join();
  }

  /// Queues fn (named what); in sync mode runs it before returning.
  /// check: the guard zones are checked after it (kernels and library tasks).
  void push(const std::string& what, std::function<void()> fn, bool check = false) {
    const StreamMode mode = config().stream;
    {
      std::lock_guard lock(m_);
      if (capture_) {  // recorded into the graph, run when it is launched
        capture_->items.push_back({what, std::move(fn), check});
        return;
      }
      q_.push_back({what, std::move(fn), check});
      ++pushed_;
      if (mode != StreamMode::deferred) released_ = pushed_;
    }
    cv_.notify_all();
    if (mode == StreamMode::sync) drain(false);
  }

  /// An event at the end of the work queued so far (cudaEventRecord): its number.
  uint64_t record() {
    refuse_while_capturing("cudaEventRecord of an event the host waits on");
    std::lock_guard lock(m_);
    return pushed_;
  }

  // ---- stream capture (cudaStreamBeginCapture / EndCapture, cudaGraphLaunch) ------------
  /// Starts recording what is queued on the stream into a graph instead of running it.
  void begin_capture() {
    std::lock_guard lock(m_);
    if (capture_)
      throw Error("cuda-emu: cudaStreamBeginCapture on a stream that is already capturing");
    capture_ = std::make_unique<Graph>();
    capture_error_.clear();
    tl_capturing = this;
  }
  /// Ends the capture: the graph, or gt::Error with the first reason it was invalidated.
  std::unique_ptr<Graph> end_capture() {
    std::lock_guard lock(m_);
    if (!capture_) throw Error("cuda-emu: cudaStreamEndCapture on a stream that is not capturing");
    std::unique_ptr<Graph> g = std::move(capture_);
    if (tl_capturing == this) tl_capturing = nullptr;
    if (capture_error_.empty() && config().fail_captures)
      capture_error_ = "Config::fail_captures (a test) fails every capture";
    if (!capture_error_.empty())
      throw Error("cuda-emu: the stream capture was invalidated: " + std::move(capture_error_));
    return g;
  }
  bool capturing() {
    std::lock_guard lock(m_);
    return capture_ != nullptr;
  }
  /// Invalidates the capture (its first reason is kept) and throws gt::Error naming `what`, as
  /// CUDA returns cudaErrorStreamCaptureUnsupported; nothing when the stream is not capturing.
  void refuse_while_capturing(const std::string& what) {
    std::lock_guard lock(m_);
    if (!capture_) return;
    const std::string why = fmt::format(
        "{} while the stream is capturing a graph (cudaErrorStreamCaptureUnsupported)", what);
    if (capture_error_.empty()) capture_error_ = why;
    throw Error("cuda-emu: " + why);
  }
  /// Runs fn now, and again each time the graph being captured is launched (the host-side
  /// part of an operation, such as poisoning the destination of a copy to the host).
  void at_launch(const std::function<void()>& fn) {
    fn();
    std::lock_guard lock(m_);
    if (capture_) capture_->at_launch.push_back(fn);
  }
  /// Queues the graph's work, in its order (cudaGraphLaunch).
  void launch_graph(const Graph& g) {
    refuse_while_capturing("cudaGraphLaunch");
    for (const auto& f : g.at_launch) f();
    for (const Item& it : g.items) push(it.what, it.fn, it.check);
  }
  /// Waits until the work queued before event e is done (cudaEventSynchronize), releasing it
  /// in deferred mode; not what was queued after. Rethrows the first error (kept for the next
  /// synchronization too, as CUDA's errors stay).
  void wait_event(uint64_t e) {
    refuse_while_capturing("cudaEventSynchronize");
    counters().event_syncs.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock lock(m_);
    released_ = std::max(released_, e);
    cv_.notify_all();
    done_cv_.wait(lock, [&] { return done_ >= e || !error_.empty(); });
    if (!error_.empty()) throw Error("cuda-emu: " + error_);
  }

  /// Runs everything queued and waits for it; rethrows the first error (then cleared).
  void drain(bool host_sync) {
    refuse_while_capturing(host_sync ? "a host synchronization (cudaStreamSynchronize, a copy "
                                       "to pageable host memory, cudaFree)"
                                     : "GT_CUDA_SYNC_CHECK's synchronization");
    if (host_sync) counters().host_syncs.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock lock(m_);
    released_ = pushed_;
    cv_.notify_all();
    done_cv_.wait(lock, [&] { return done_ == pushed_; });
    if (!error_.empty()) {
      std::string e = std::move(error_);
      error_.clear();
      throw Error("cuda-emu: " + e);
    }
  }

 private:
  void main() {
    tl_device = 0;
    std::unique_lock lock(m_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || done_ < released_; });
      if (done_ == released_ && stop_) return;
      Item item = std::move(q_.front());
      q_.pop_front();
      const bool skip = !error_.empty();  // after an error the rest of the queue is dropped
      lock.unlock();
      std::string err;
      if (!skip) {
        try {
          item.fn();
          if (item.check) check_guards(item.what.c_str());
        } catch (const std::exception& e) {
          err = e.what();
        }
      }
      lock.lock();
      if (!err.empty() && error_.empty()) error_ = err;
      ++done_;
      done_cv_.notify_all();  // drain() waits for pushed_, wait_event() for an earlier count
    }
  }

  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::deque<Item> q_;
  uint64_t pushed_ = 0, released_ = 0, done_ = 0;
  std::string error_;
  std::unique_ptr<Graph> capture_;  ///< the graph being captured, or null
  std::string capture_error_;       ///< why the capture is invalid ("" while it is valid)
  bool stop_ = false;
  std::thread worker_;
};

void detail::refuse_while_this_thread_captures(const char* what) {
  if (tl_capturing) tl_capturing->refuse_while_capturing(what);
}

namespace {
std::mutex streams_mutex;
std::set<Stream*>& all_streams() {
  static std::set<Stream*> s;
  return s;
}
}  // namespace

Stream* create_stream() {
  check_device("cudaStreamCreate");
  auto* s = new Stream;
  std::lock_guard lock(streams_mutex);
  all_streams().insert(s);
  return s;
}
void destroy_stream(Stream* s) {
  if (!s) return;
  {
    std::lock_guard lock(streams_mutex);
    all_streams().erase(s);
  }
  delete s;
}

void detail::drain_all_streams() {
  std::vector<Stream*> v;
  {
    std::lock_guard lock(streams_mutex);
    v.assign(all_streams().begin(), all_streams().end());
  }
  for (Stream* s : v) s->drain(true);
}

void device_free(void* p) {
  check_device("cudaFree");
  drain_all_streams();  // cudaFree waits for the device
  release_allocation(p);
}

namespace {
void check_range(const void* p, size_t bytes, const char* what, const char* which) {
  if (bytes == 0) return;
  if (!device_range(p, bytes))
    throw Error(
        fmt::format("cuda-emu: {}: the {} [{}, +{} bytes) is not inside one device "
                    "allocation",
                    what, which, p, bytes));
}
}  // namespace

void memcpy_h2d(Stream* s, void* dst, const void* src, size_t bytes) {
  check_device("cudaMemcpyAsync (host to device)");
  // a graph would read the caller's memory when launched, long after the call returned
  s->refuse_while_capturing("a copy from pageable host memory");
  check_range(dst, bytes, "cudaMemcpyAsync (host to device)", "destination");
  if (bytes == 0) return;
  auto staged = std::make_shared<std::vector<unsigned char>>(
      static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
  s->push("cudaMemcpyAsync (host to device)",
          [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
}
void memcpy_h2d_async(Stream* s, void* dst, const void* src, size_t bytes) {
  check_device("cudaMemcpyAsync (pinned host to device)");
  check_range(dst, bytes, "cudaMemcpyAsync (pinned host to device)", "destination");
  if (bytes == 0) return;
  s->push("cudaMemcpyAsync (pinned host to device)", [=] { std::memcpy(dst, src, bytes); });
}
void memcpy_d2h(Stream* s, void* dst, const void* src, size_t bytes) {
  check_device("cudaMemcpy (device to host)");
  check_range(src, bytes, "cudaMemcpy (device to host)", "source");
  s->drain(true);
  if (bytes) std::memcpy(dst, src, bytes);
}
void memcpy_d2h_async(Stream* s, void* dst, const void* src, size_t bytes) {
  check_device("cudaMemcpyAsync (device to host)");
  check_range(src, bytes, "cudaMemcpyAsync (device to host)", "source");
  if (bytes == 0) return;
  // holds nothing until the stream is synchronized (after each launch of a graph too)
  s->at_launch([=] { std::memset(dst, kPoison, bytes); });
  s->push("cudaMemcpyAsync (device to host)", [=] { std::memcpy(dst, src, bytes); });
}
void memcpy_d2d(Stream* s, void* dst, const void* src, size_t bytes) {
  check_device("cudaMemcpyAsync (device to device)");
  check_range(dst, bytes, "cudaMemcpyAsync (device to device)", "destination");
  check_range(src, bytes, "cudaMemcpyAsync (device to device)", "source");
  if (bytes == 0 || !config().execute) return;
  s->push("cudaMemcpyAsync (device to device)", [=] { std::memmove(dst, src, bytes); });
}
void memset_async(Stream* s, void* dst, int value, size_t bytes) {
  check_device("cudaMemsetAsync");
  check_range(dst, bytes, "cudaMemsetAsync", "destination");
  if (bytes == 0 || !config().execute) return;
  s->push("cudaMemsetAsync", [=] { std::memset(dst, value, bytes); });
}
void enqueue_task(Stream* s, const char* what, std::function<void()> task) {
  check_device(what);
  counters().tasks.fetch_add(1, std::memory_order_relaxed);
  if (!config().execute) return;
  s->push(what, std::move(task), true);
  if (config().sync_check && !s->capturing()) s->drain(false);
}
void stream_synchronize(Stream* s) {
  check_device("cudaStreamSynchronize");
  s->drain(true);
}
uint64_t event_record(Stream* s) {
  check_device("cudaEventRecord");
  return s->record();
}
void event_synchronize(Stream* s, uint64_t e) {
  check_device("cudaEventSynchronize");
  s->wait_event(e);
}

// ---- launches -------------------------------------------------------------------------------
void launch(Stream* s, const LaunchSpec& spec, std::function<void()> body,
            const std::vector<const void*>& pointer_args) {
  check_device("a kernel launch");
  const std::string k = spec.kernel;
  const Dim3 &g = spec.grid, &b = spec.block;
  auto refuse = [&](const std::string& why) {
    throw Error(
        fmt::format("cuda-emu: kernel '{}' launched with grid ({},{},{}), block ({},{},{}), "
                    "{} bytes of dynamic shared memory: {}",
                    k, g.x, g.y, g.z, b.x, b.y, b.z, spec.dynamic_smem, why));
  };
  if (b.x == 0 || b.y == 0 || b.z == 0 || g.x == 0 || g.y == 0 || g.z == 0)
    refuse("a dimension is 0 (cudaErrorInvalidConfiguration)");
  if (b.count() > kMaxThreadsPerBlock)
    refuse(fmt::format("{} threads per block, above the {} a block may have", b.count(),
                       kMaxThreadsPerBlock));
  if (b.x > kMaxBlockDimXY || b.y > kMaxBlockDimXY || b.z > kMaxBlockDimZ)
    refuse("a block dimension is beyond (1024, 1024, 64)");
  if (g.x > kMaxGridX || g.y > kMaxGridYZ || g.z > kMaxGridYZ)
    refuse("a grid dimension is beyond (2^31-1, 65535, 65535)");
  if (spec.dynamic_smem > kMaxSharedBytesOptIn)
    refuse(fmt::format("more than the {} bytes of shared memory a block may have",
                       kMaxSharedBytesOptIn));
  for (size_t i = 0; i < pointer_args.size(); ++i)
    if (pointer_args[i] && !device_range(pointer_args[i], 0))
      refuse(
          fmt::format("pointer argument {} ({}) is not device memory (a host pointer, or "
                      "freed memory?)",
                      i + 1, pointer_args[i]));
  counters().launches.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(records_mutex);
    if (recording) recorded.push_back({k, g, b, spec.dynamic_smem, 0});
  }
  if (!config().execute) return;
  s->push(
      "kernel '" + k + "'",
      [spec, k, body = std::move(body)] {
        LaunchRun run;
        run.spec = spec;
        run.kernel = k;
        run.spec.kernel = run.kernel.c_str();
        run.body = body;
        run_blocks(run);
        if (run.failed) throw Error(run.error);
      },
      true);
  if (config().sync_check && !s->capturing()) s->drain(false);
}

// ---- graphs -------------------------------------------------------------------------------
void stream_begin_capture(Stream* s) {
  check_device("cudaStreamBeginCapture");
  s->begin_capture();
}
std::shared_ptr<const Graph> stream_end_capture(Stream* s) {
  check_device("cudaStreamEndCapture");
  return s->end_capture();
}
bool stream_capturing(Stream* s) { return s->capturing(); }
std::vector<std::string> graph_shape(const Graph& g) {
  std::vector<std::string> v;
  v.reserve(g.items.size());
  for (const Item& it : g.items) v.push_back(it.what);
  return v;
}
void graph_launch(Stream* s, const Graph& g) {
  check_device("cudaGraphLaunch");
  counters().graph_launches.fetch_add(1, std::memory_order_relaxed);
  s->launch_graph(g);
}

}  // namespace gt::simt
