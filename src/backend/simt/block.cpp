// backend/simt/block.cpp: how the SIMT runtime runs the blocks of a launch: on fibers (a
// scheduler per OS thread that runs each CUDA thread until it waits at a barrier or a warp
// collective, then resolves those), or on a team of real OS threads (the `threads` mode,
// always under ThreadSanitizer); and the kernel-side calls (simt_host.h, "inside a kernel").
#include <fmt/format.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "backend/simt/fiber.h"
#include "backend/simt/internal.h"
#include "backend/simt/shared_arena.h"
#include "core/error.h"

namespace gt::simt {
thread_local constinit const ThreadCtx* tl_ctx = nullptr;
namespace detail {
namespace {

/// Thrown inside a kernel thread to unwind it when its block is aborted (another thread's
/// error); never escapes the thread's entry.
struct AbortBlock {};

/// What the kernel-side calls dispatch to: the block the calling OS thread runs.
class BlockBase {
 public:
  virtual ~BlockBase() = default;
  virtual void collective(unsigned mask, CollectiveFn fn, const void* in, void* out,
                          const char* what) = 0;
  virtual void barrier() = 0;
  virtual void* shared_static(size_t bytes, size_t align, const char* name) = 0;
  void* shared_dynamic(size_t* bytes) { return arena_.dynamic(bytes); }

 protected:
  SharedArena arena_;
};

thread_local BlockBase* tl_block = nullptr;

Dim3 unflatten(uint64_t i, const Dim3& d) {
  return Dim3(unsigned(i % d.x), unsigned((i / d.x) % d.y), unsigned(i / (uint64_t(d.x) * d.y)));
}

/// The order blocks and threads are taken in: i -> order(i) over [0, n).
uint64_t order_index(uint64_t i, uint64_t n, const Config& c, uint64_t salt) {
  switch (c.order) {
    case Order::reverse:
      return n - 1 - i;
    case Order::random: {
      // i*a + b mod n with a coprime to n: a permutation
      uint64_t a = (c.seed * 0x9E3779B97F4A7C15ull + salt) % n | 1;
      while (std::gcd(a, n) != 1) a += 2;
      const uint64_t b = (c.seed + salt) % n;
      return (static_cast<unsigned __int128>(i) * a + b) % n;
    }
    default:
      return i;
  }
}

void check_in_mask(unsigned mask, const ThreadCtx& t, const char* what) {
  if (!(mask >> t.lane & 1u))
    throw Error(fmt::format("{} with mask {:#010x} called by lane {}, which is not in the mask",
                            what, mask, t.lane));
}

// futex waits on an int (Linux): no mutex, so ThreadSanitizer sees only the atomics' order.
void futex_wait(std::atomic<int>& a, int value) {
  syscall(SYS_futex, reinterpret_cast<int*>(&a), FUTEX_WAIT_PRIVATE, value, nullptr, nullptr, 0);
}
void wake(std::atomic<int>& a) {
  syscall(SYS_futex, reinterpret_cast<int*>(&a), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr,
          0);
}
/// Stores v (release) and wakes the waiters.
void post(std::atomic<int>& a, int v) {
  a.store(v, std::memory_order_release);
  wake(a);
}
/// Waits until a differs from `seen` (acquire) and returns its value.
int await_change(std::atomic<int>& a, int seen) {
  for (int v; (v = a.load(std::memory_order_acquire)) == seen;) futex_wait(a, v);
  return a.load(std::memory_order_acquire);
}

// ---- fibers ---------------------------------------------------------------------------------
class FiberBlock final : public BlockBase {
 public:
  void run(LaunchRun& L, uint64_t linear_block);
  void collective(unsigned mask, CollectiveFn fn, const void* in, void* out,
                  const char* what) override {
    T& t = *cur_;
    check_in_mask(mask, t.ctx, what);
    t.fn = fn;
    t.mask = mask;
    t.in = in;
    t.out = out;
    t.what = what;
    t.state = kWaitWarp;
    yield(t);
  }
  void barrier() override {
    T& t = *cur_;
    t.state = kWaitBarrier;
    yield(t);
  }
  void* shared_static(size_t bytes, size_t align, const char* name) override {
    return arena_.declare(cur_->shared_seq++, bytes, align, name);
  }

 private:
  enum State : uint8_t { kReady, kWaitWarp, kWaitBarrier, kDone };
  struct T {
    ThreadCtx ctx;
    FiberContext fib;
    FiberStack* stack = nullptr;
    State state = kReady;
    bool started = false, abort = false;
    unsigned shared_seq = 0;
    CollectiveFn fn = nullptr;
    unsigned mask = 0;
    const void* in = nullptr;
    void* out = nullptr;
    const char* what = "";
  };

  static void entry(void* arg);
  void yield(T& t) {
    fiber_switch(t.fib, sched_);
    if (t.abort) throw AbortBlock{};
  }
  void resume(T& t);
  bool resolve_warps();
  bool resolve_barrier();
  void fail(const T* t, const std::string& what) {
    if (!error_) {
      error_ = true;
      L_->fail(block_, t ? &t->ctx.threadIdx : nullptr, what);
    }
  }
  std::string lane_state(const T& t) const;

  std::vector<T> th_;
  unsigned n_ = 0;
  T* cur_ = nullptr;
  FiberContext sched_;
  std::vector<std::unique_ptr<FiberStack>> stacks_;
  std::vector<FiberStack*> free_stacks_;
  LaunchRun* L_ = nullptr;
  Dim3 block_;
  bool error_ = false;
  uint64_t switches_ = 0;
};

void FiberBlock::entry(void* arg) {
  T& t = *static_cast<T*>(arg);
  fiber_started(t.fib);
  auto* self = static_cast<FiberBlock*>(tl_block);
  try {
    self->L_->body();
  } catch (const AbortBlock&) {
  } catch (const std::exception& e) {
    self->fail(&t, e.what());
  } catch (...) {
    self->fail(&t, "an unknown exception");
  }
  t.state = kDone;
  fiber_switch(t.fib, self->sched_);
  __builtin_trap();  // a finished fiber is never resumed
}

void FiberBlock::resume(T& t) {
  if (!t.started) {
    if (free_stacks_.empty()) {
      size_t bytes = config().fiber_stack_bytes;
      if (bytes == 0) bytes = asan() ? (256u << 10) : (64u << 10);
      stacks_.push_back(std::make_unique<FiberStack>(bytes));
      free_stacks_.push_back(stacks_.back().get());
    }
    t.stack = free_stacks_.back();
    free_stacks_.pop_back();
    fiber_make(t.fib, *t.stack, &FiberBlock::entry, &t);
    t.started = true;
  }
  cur_ = &t;
  tl_ctx = &t.ctx;
  ++switches_;
  fiber_switch(sched_, t.fib);
  tl_ctx = nullptr;
  if (t.state == kDone) free_stacks_.push_back(t.stack);
}

std::string FiberBlock::lane_state(const T& t) const {
  switch (t.state) {
    case kDone:
      return "has returned";
    case kWaitBarrier:
      return "waits at __syncthreads";
    case kWaitWarp:
      return fmt::format("waits at {} (mask {:#010x})", t.what, t.mask);
    default:
      return "runs";
  }
}

bool FiberBlock::resolve_warps() {
  bool any = false;
  const void* in[32];
  void* out[32];
  for (unsigned w = 0; w * 32 < n_ && !error_; ++w) {
    const unsigned first = w * 32, lanes = std::min(32u, n_ - first);
    for (unsigned l = 0; l < lanes; ++l) {
      T& t = th_[first + l];
      if (t.state != kWaitWarp) continue;
      for (unsigned j = 0; j < 32; ++j) {
        in[j] = nullptr;
        out[j] = nullptr;
        if (!(t.mask >> j & 1u)) continue;
        if (j >= lanes) {
          fail(&t, fmt::format("{} with mask {:#010x}: lane {} does not exist (the block's last "
                               "warp has {} lanes)",
                               t.what, t.mask, j, lanes));
          return false;
        }
        const T& o = th_[first + j];
        if (o.state != kWaitWarp || o.fn != t.fn || o.mask != t.mask) {
          fail(&t, fmt::format("lane {} waits at {} (mask {:#010x}), but lane {} of the mask {}",
                               t.ctx.lane, t.what, t.mask, j, lane_state(o)));
          return false;
        }
        in[j] = o.in;
        out[j] = o.out;
      }
      t.fn(in, out, t.mask);
      for (unsigned j = 0; j < lanes; ++j)
        if (t.mask >> j & 1u) th_[first + j].state = kReady;
      any = true;
    }
  }
  return any;
}

bool FiberBlock::resolve_barrier() {
  unsigned waiting = 0, done = 0;
  const T* exited = nullptr;
  const T* at_warp = nullptr;
  for (const T& t : th_) {
    if (t.state == kWaitBarrier) ++waiting;
    if (t.state == kDone) {
      ++done;
      exited = exited ? exited : &t;
    }
    if (t.state == kWaitWarp) at_warp = at_warp ? at_warp : &t;
  }
  if (waiting == n_) {
    for (T& t : th_) t.state = kReady;
    return true;
  }
  if (waiting > 0 && exited)
    fail(exited, fmt::format("this thread returned while {} threads of its block wait at "
                             "__syncthreads (every thread of a block must reach each barrier)",
                             waiting));
  else if (at_warp)
    fail(at_warp, fmt::format("deadlock: this lane {} and cannot go on ({} threads of the block "
                              "wait at __syncthreads, {} have returned)",
                              lane_state(*at_warp), waiting, done));
  else
    fail(nullptr, "deadlock: no thread of the block can go on");
  return false;
}

void FiberBlock::run(LaunchRun& L, uint64_t linear_block) {
  L_ = &L;
  error_ = false;
  const Dim3 bd = L.spec.block;
  block_ = unflatten(linear_block, L.spec.grid);
  n_ = unsigned(bd.count());
  th_.assign(n_, T{});
  for (unsigned i = 0; i < n_; ++i) {
    ThreadCtx& c = th_[i].ctx;
    c.threadIdx = unflatten(i, bd);
    c.blockIdx = block_;
    c.blockDim = bd;
    c.gridDim = L.spec.grid;
    c.linear = i;
    c.lane = i % 32;
    c.warp = i / 32;
  }
  arena_.begin(L.spec.dynamic_smem);
  tl_block = this;
  const Config cfg = config();
  unsigned remaining = n_;
  while (remaining > 0 && !error_) {
    for (unsigned k = 0; k < n_ && !error_; ++k) {
      T& t = th_[order_index(k, n_, cfg, linear_block)];
      if (t.state != kReady) continue;
      resume(t);
      if (t.state == kDone) --remaining;
    }
    if (remaining == 0 || error_) break;
    if (!resolve_warps() && !error_) resolve_barrier();
  }
  if (error_) {  // unwind every thread that is still parked on its fiber
    for (T& t : th_)
      if (t.started && t.state != kDone) {
        t.abort = true;
        resume(t);
      }
  }
  if (std::string bad = arena_.end(); !bad.empty() && !error_) fail(nullptr, bad);
  tl_block = nullptr;
  counters().switches.fetch_add(switches_, std::memory_order_relaxed);
  switches_ = 0;
}

// ---- real threads ---------------------------------------------------------------------------
/// A team of OS threads that runs one block at a time, each CUDA thread on its own OS thread;
/// barriers and collectives are mutexes and condition variables, so ThreadSanitizer sees the
/// order they give, and nothing more: a missing __syncthreads is a data race it reports.
class TeamBlock final : public BlockBase {
 public:
  ~TeamBlock() override {
    stop_ = true;
    for (size_t i = 0; i < threads_.size(); ++i) post(go_[i], go_[i].load() + 1);
    for (auto& t : threads_) t.join();
  }
  void run(LaunchRun& L, uint64_t linear_block);
  void collective(unsigned mask, CollectiveFn fn, const void* in, void* out,
                  const char* what) override;
  void barrier() override;
  void* shared_static(size_t bytes, size_t align, const char* name) override {
    std::lock_guard lock(shared_m_);
    return arena_.declare(shared_seq_[tl_ctx->linear]++, bytes, align, name);
  }

 private:
  static constexpr auto kDeadlock = std::chrono::seconds(120);
  struct Lane {
    CollectiveFn fn = nullptr;
    unsigned mask = 0;
    const void* in = nullptr;
    void* out = nullptr;
    const char* what = "";
    bool waiting = false;
    uint64_t ticket = 0;
  };
  struct Warp {
    std::mutex m;
    std::condition_variable cv;
    Lane lane[32];
    unsigned exited = 0;  ///< mask of lanes that returned
  };
  void worker(unsigned i);
  void exited(const ThreadCtx& c);
  void abort(const ThreadCtx* c, const std::string& what) {
    L_->fail(block_, c ? &c->threadIdx : nullptr, what);
    aborting_ = true;
    { std::lock_guard lock(bar_m_); }
    bar_cv_.notify_all();
    for (auto& w : warps_) {
      { std::lock_guard lock(w->m); }
      w->cv.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  /// Start and finish: a generation per thread that the team's owner raises (release), and a
  /// count of finished threads (release, never acquire), waited on with futexes: they order
  /// the owner with each thread, and no thread with another (a mutex here would order a
  /// finished thread before a later one's start, and hide their races from TSan).
  std::unique_ptr<std::atomic<int>[]> go_ =
      std::make_unique<std::atomic<int>[]>(kMaxThreadsPerBlock);
  std::atomic<int> finished_{0};
  std::atomic<bool> stop_{false};
  std::vector<ThreadCtx> ctx_;
  std::vector<unsigned> shared_seq_;
  std::vector<std::unique_ptr<Warp>> warps_;
  unsigned n_ = 0;
  LaunchRun* L_ = nullptr;
  Dim3 block_;
  std::atomic<bool> aborting_{false};
  std::mutex bar_m_, shared_m_;
  std::condition_variable bar_cv_;
  unsigned arrived_ = 0, exited_ = 0;
  uint64_t bar_gen_ = 0;
};

void TeamBlock::worker(unsigned i) {
  int seen = 0;
  for (;;) {
    seen = await_change(go_[i], seen);
    if (stop_) return;
    const int n = int(n_);  // read before the finish: the owner rewrites it for the next block
    tl_block = this;
    tl_ctx = &ctx_[i];
    try {
      L_->body();
    } catch (const AbortBlock&) {
    } catch (const std::exception& e) {
      abort(&ctx_[i], e.what());
    }
    if (!aborting_) exited(ctx_[i]);
    tl_ctx = nullptr;
    tl_block = nullptr;
    if (finished_.fetch_add(1, std::memory_order_release) + 1 == n) wake(finished_);
  }
}

void TeamBlock::exited(const ThreadCtx& c) {
  Warp& w = *warps_[c.warp];
  std::string why;
  {
    std::lock_guard lock(w.m);
    w.exited |= 1u << c.lane;
    for (unsigned j = 0; j < 32 && why.empty(); ++j)
      if (w.lane[j].waiting && (w.lane[j].mask >> c.lane & 1u))
        why = fmt::format("this lane returned while lane {} waits at {} (mask {:#010x})", j,
                          w.lane[j].what, w.lane[j].mask);
  }
  if (why.empty()) {
    std::lock_guard lock(bar_m_);
    ++exited_;
    if (arrived_ > 0)
      why = fmt::format(
          "this thread returned while {} threads of its block wait at "
          "__syncthreads (every thread of a block must reach each barrier)",
          arrived_);
  }
  if (!why.empty()) abort(&c, why);
}

void TeamBlock::collective(unsigned mask, CollectiveFn fn, const void* in, void* out,
                           const char* what) {
  const ThreadCtx& c = *tl_ctx;
  check_in_mask(mask, c, what);
  Warp& w = *warps_[c.warp];
  const unsigned lanes = std::min(32u, n_ - c.warp * 32);
  std::unique_lock lock(w.m);
  if (aborting_) throw AbortBlock{};
  for (unsigned j = 0; j < 32; ++j) {
    if (!(mask >> j & 1u)) continue;
    if (j >= lanes)
      throw Error(
          fmt::format("{} with mask {:#010x}: lane {} does not exist (the block's last "
                      "warp has {} lanes)",
                      what, mask, j, lanes));
    if (w.exited >> j & 1u)
      throw Error(
          fmt::format("{} (mask {:#010x}): lane {} of the mask has returned", what, mask, j));
    const Lane& o = w.lane[j];
    if (o.waiting && (o.fn != fn || o.mask != mask))
      throw Error(
          fmt::format("lane {} waits at {} (mask {:#010x}), but lane {} waits at {} (mask "
                      "{:#010x})",
                      c.lane, what, mask, j, o.what, o.mask));
  }
  Lane& me = w.lane[c.lane];
  me = Lane{fn, mask, in, out, what, true, me.ticket};
  unsigned arrived = 0;
  for (unsigned j = 0; j < 32; ++j)
    if ((mask >> j & 1u) && w.lane[j].waiting) ++arrived;
  if (arrived == unsigned(std::popcount(mask))) {
    const void* ins[32] = {};
    void* outs[32] = {};
    for (unsigned j = 0; j < 32; ++j)
      if (mask >> j & 1u) ins[j] = w.lane[j].in, outs[j] = w.lane[j].out;
    fn(ins, outs, mask);
    for (unsigned j = 0; j < 32; ++j)
      if (mask >> j & 1u) {
        w.lane[j].waiting = false;
        ++w.lane[j].ticket;
      }
    w.cv.notify_all();
    return;
  }
  const uint64_t ticket = me.ticket;
  if (!w.cv.wait_for(lock, kDeadlock, [&] { return me.ticket != ticket || aborting_; })) {
    me.waiting = false;
    lock.unlock();
    abort(&c, fmt::format("deadlock: lane {} waited {} s at {}", c.lane, kDeadlock.count(), what));
    throw AbortBlock{};
  }
  if (me.ticket == ticket) {  // aborted: leave, and let no one read this lane's arguments
    me.waiting = false;
    throw AbortBlock{};
  }
}

void TeamBlock::barrier() {
  std::unique_lock lock(bar_m_);
  if (aborting_) throw AbortBlock{};
  if (exited_ > 0)
    throw Error(
        fmt::format("__syncthreads reached after {} threads of the block returned (every "
                    "thread of a block must reach each barrier)",
                    exited_));
  const uint64_t gen = bar_gen_;
  if (++arrived_ == n_) {
    arrived_ = 0;
    ++bar_gen_;
    bar_cv_.notify_all();
    return;
  }
  if (!bar_cv_.wait_for(lock, kDeadlock, [&] { return bar_gen_ != gen || aborting_; })) {
    lock.unlock();
    abort(tl_ctx, "deadlock at __syncthreads");
    throw AbortBlock{};
  }
  if (bar_gen_ == gen) throw AbortBlock{};
}

void TeamBlock::run(LaunchRun& L, uint64_t linear_block) {
  const Dim3 bd = L.spec.block;
  const unsigned n = unsigned(bd.count());
  while (threads_.size() < n) {
    const unsigned i = unsigned(threads_.size());
    go_[i].store(0, std::memory_order_relaxed);
    threads_.emplace_back([this, i] { worker(i); });
  }
  while (warps_.size() < (n + 31) / 32) warps_.push_back(std::make_unique<Warp>());
  for (auto& w : warps_) {
    w->exited = 0;
    for (Lane& l : w->lane) l.waiting = false;
  }
  block_ = unflatten(linear_block, L.spec.grid);
  ctx_.assign(n, ThreadCtx{});
  for (unsigned i = 0; i < n; ++i) {
    ThreadCtx& c = ctx_[i];
    c.threadIdx = unflatten(i, bd);
    c.blockIdx = block_;
    c.blockDim = bd;
    c.gridDim = L.spec.grid;
    c.linear = i;
    c.lane = i % 32;
    c.warp = i / 32;
  }
  shared_seq_.assign(n, 0);
  arena_.begin(L.spec.dynamic_smem);
  arrived_ = exited_ = 0;
  aborting_ = false;
  L_ = &L;
  n_ = n;
  finished_.store(0, std::memory_order_relaxed);
  for (unsigned i = 0; i < n; ++i) post(go_[i], go_[i].load(std::memory_order_relaxed) + 1);
  for (int f; (f = finished_.load(std::memory_order_acquire)) != int(n);) futex_wait(finished_, f);
  if (std::string bad = arena_.end(); !bad.empty() && !aborting_) L.fail(block_, nullptr, bad);
}

// ---- the pool of OS threads that run blocks on fibers ------------------------------------------
class Pool {
 public:
  explicit Pool(int n) : n_(std::max(n, 1)) {
    for (int i = 1; i < n_; ++i) threads_.emplace_back([this] { main(); });
  }
  ~Pool() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
      ++gen_;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int size() const { return n_; }
  /// f() on every worker of the pool and on the caller; returns when all returned.
  void run(const std::function<void()>& f) {
    std::lock_guard one(run_m_);
    {
      std::lock_guard lock(m_);
      job_ = &f;
      pending_ = n_ - 1;
      ++gen_;
    }
    cv_.notify_all();
    f();
    std::unique_lock lock(m_);
    done_cv_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  void main() {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void()>* job;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return gen_ != seen; });
        seen = gen_;
        if (stop_) return;
        job = job_;
      }
      (*job)();
      std::lock_guard lock(m_);
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }
  int n_;
  std::vector<std::thread> threads_;
  std::mutex m_, run_m_;
  std::condition_variable cv_, done_cv_;
  const std::function<void()>* job_ = nullptr;
  int pending_ = 0;
  uint64_t gen_ = 0;
  bool stop_ = false;
};

int pool_size(const Config& c) {
  if (c.workers > 0) return c.workers;
  return std::max(1u, std::thread::hardware_concurrency());
}

/// The pool, remade when the configured size changed (only between launches).
Pool* pool(const Config& cfg) {
  static std::mutex m;
  static std::unique_ptr<Pool> p;
  std::lock_guard lock(m);
  if (!p || p->size() != pool_size(cfg)) p = std::make_unique<Pool>(pool_size(cfg));
  return p.get();
}

}  // namespace

void run_blocks(LaunchRun& run) {
  const Config cfg = config();
  const Dim3 g = run.spec.grid;
  const uint64_t total = g.count();
  counters().blocks.fetch_add(total, std::memory_order_relaxed);
  counters().threads.fetch_add(total * run.spec.block.count(), std::memory_order_relaxed);
  if (cfg.mode == Mode::threads) {
    static std::mutex team_m;
    static TeamBlock* team = new TeamBlock;  // lives for the process: its threads are reused
    std::lock_guard lock(team_m);
    for (uint64_t i = 0; i < total && !run.failed; ++i)
      team->run(run, order_index(i, total, cfg, 0x5eed));
    return;
  }
  Pool* p = pool(cfg);
  auto work = [&] {
    thread_local std::unique_ptr<FiberBlock> runner = std::make_unique<FiberBlock>();
    for (;;) {
      if (run.failed) return;
      const uint64_t i = run.next.fetch_add(1);
      if (i >= total) return;
      runner->run(run, order_index(i, total, cfg, 0x5eed));
    }
  };
  if (total == 1)
    work();
  else
    p->run(work);
}

}  // namespace detail

using namespace detail;

void run_parallel(int64_t n, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  Pool* p = pool(config());
  const int64_t chunks = std::min<int64_t>(n, int64_t(p->size()) * 4);
  std::atomic<int64_t> next{0};
  p->run([&] {
    for (;;) {
      const int64_t c = next.fetch_add(1);
      if (c >= chunks) return;
      f(c * n / chunks, (c + 1) * n / chunks);
    }
  });
}

void warp_collective(unsigned mask, CollectiveFn fn, const void* in, void* out, const char* what) {
  tl_block->collective(mask, fn, in, out, what);
}
void syncthreads() { tl_block->barrier(); }
void* shared_static(size_t bytes, size_t align, const char* name) {
  return tl_block->shared_static(bytes, align, name);
}
void* shared_dynamic(size_t* bytes) { return tl_block->shared_dynamic(bytes); }

}  // namespace gt::simt
