// backend/simt/fiber.h: user-space threads (fibers) for the SIMT runtime: a CUDA thread that
// waits at a barrier or a warp collective parks its stack and registers here, and the block's
// scheduler runs the next thread on the same OS thread. A switch saves the callee-saved
// registers and the floating-point control words and nothing else (no signal mask: no system
// call), so it costs tens of nanoseconds (x86-64 assembly in fiber.cpp; ucontext elsewhere).
// AddressSanitizer is told of every stack switch (__sanitizer_start_switch_fiber), so ASan
// builds check kernels run on fibers.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gt::simt {

/// One fiber stack: mmap'ed (pages committed only where touched), with a guard page below it,
/// so a kernel that overflows its stack faults instead of corrupting a neighbour.
class FiberStack {
 public:
  /// bytes: usable stack size (rounded up to pages). Errors: gt::Error when mmap fails.
  explicit FiberStack(size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  void* bottom() const { return base_; }  ///< lowest usable address
  size_t size() const { return size_; }

 private:
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  void* base_ = nullptr;
  size_t size_ = 0;
};

/// The saved state of a fiber (or of the OS thread's own stack, for the scheduler).
struct FiberContext {
  void* sp = nullptr;                  ///< saved stack pointer (x86-64 path)
  void* impl = nullptr;                ///< ucontext_t* (portable path)
  const void* stack_bottom = nullptr;  ///< for AddressSanitizer's switch annotations
  size_t stack_size = 0;
  void* asan_fake_stack = nullptr;
};

/// The function a fiber runs; it must never return (it switches away for good at its end).
using FiberEntry = void (*)(void* arg);

/// Prepares `ctx` to start `entry(arg)` on `stack` at its first switch_to.
void fiber_make(FiberContext& ctx, FiberStack& stack, FiberEntry entry, void* arg);
/// Saves the running context into `from` and resumes `to`. Returns when something switches
/// back to `from`.
void fiber_switch(FiberContext& from, FiberContext& to);
/// Must be the first call in a fiber's entry function (completes ASan's switch annotation).
void fiber_started(FiberContext& self);

}  // namespace gt::simt
