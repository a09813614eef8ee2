// backend/simt/fiber.cpp: the stack switch of the SIMT runtime's fibers (fiber.h).
#include "backend/simt/fiber.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "core/error.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GT_SIMT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define GT_SIMT_ASAN 1
#endif

#if defined(__x86_64__) && !defined(GT_SIMT_UCONTEXT)
#define GT_SIMT_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

#ifdef GT_SIMT_ASAN
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                     size_t* size_old);
void __asan_unpoison_memory_region(void const volatile* addr, size_t size);
}
#endif

#ifdef GT_SIMT_ASM_SWITCH
// gt_simt_switch_sp(void** save_sp, void* load_sp): pushes the callee-saved registers of the
// System V x86-64 ABI and the x87 and SSE control words, stores the stack pointer in *save_sp,
// loads load_sp and pops the same frame from it (as boost.context's jump_fcontext does).
// A new fiber's frame (fiber_make) "returns" into gt_simt_fiber_start, which calls
// entry(arg) from r13(r12) on an aligned stack.
asm(R"(
  .text
  .globl gt_simt_switch_sp
  .type gt_simt_switch_sp,@function
  .p2align 4
gt_simt_switch_sp:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  fldcw (%rsp)
  ldmxcsr 8(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size gt_simt_switch_sp, .-gt_simt_switch_sp

  .globl gt_simt_fiber_start
  .type gt_simt_fiber_start,@function
  .p2align 4
gt_simt_fiber_start:
  movq %r12, %rdi
  andq $-16, %rsp
  callq *%r13
  ud2
  .size gt_simt_fiber_start, .-gt_simt_fiber_start
  .section .note.GNU-stack,"",@progbits
  .text
)");
extern "C" void gt_simt_switch_sp(void** save_sp, void* load_sp);
extern "C" void gt_simt_fiber_start();
#endif

namespace gt::simt {
namespace {
thread_local FiberContext* tl_switched_from = nullptr;

#ifndef GT_SIMT_ASM_SWITCH
struct UcontextStart {
  FiberEntry entry;
  void* arg;
};
void ucontext_trampoline(unsigned lo, unsigned hi) {
  auto* s = reinterpret_cast<UcontextStart*>((uintptr_t(hi) << 32) | uintptr_t(lo));
  s->entry(s->arg);
  __builtin_trap();
}
#endif

/// After a switch lands in `self`: completes ASan's annotation and learns the bounds of the
/// stack we came from, when they were unknown (an OS thread's own stack).
void landed(FiberContext& self) {
#ifdef GT_SIMT_ASAN
  const void* old_bottom = nullptr;
  size_t old_size = 0;
  __sanitizer_finish_switch_fiber(self.asan_fake_stack, &old_bottom, &old_size);
  if (tl_switched_from && !tl_switched_from->stack_bottom) {
    tl_switched_from->stack_bottom = old_bottom;
    tl_switched_from->stack_size = old_size;
  }
#else
  (void)self;
#endif
}
}  // namespace

FiberStack::FiberStack(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_ = (bytes + page - 1) / page * page;
  map_bytes_ = size_ + page;
  map_ = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw Error(fmt::format("SIMT runtime: cannot map a fiber stack of {} bytes: {}", map_bytes_,
                            std::strerror(errno)));
  }
  mprotect(map_, page, PROT_NONE);  // the guard page below the stack
  base_ = static_cast<char*>(map_) + page;
}
FiberStack::~FiberStack() {
  if (map_) munmap(map_, map_bytes_);
}

void fiber_make(FiberContext& ctx, FiberStack& stack, FiberEntry entry, void* arg) {
  ctx.stack_bottom = stack.bottom();
  ctx.stack_size = stack.size();
  ctx.asan_fake_stack = nullptr;
#ifdef GT_SIMT_ASAN
  // frames of an earlier fiber on this stack never returned: their redzones stay poisoned
  __asan_unpoison_memory_region(stack.bottom(), stack.size());
#endif
#ifdef GT_SIMT_ASM_SWITCH
  auto top = reinterpret_cast<uintptr_t>(stack.bottom()) + stack.size();
  top &= ~uintptr_t(15);
  auto* f = reinterpret_cast<uint64_t*>(top) - 10;  // the frame gt_simt_switch_sp pops
  std::memset(f, 0, 10 * sizeof(uint64_t));
  uint32_t mxcsr;
  uint16_t fpucw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  std::memcpy(&f[0], &fpucw, sizeof fpucw);
  std::memcpy(&f[1], &mxcsr, sizeof mxcsr);
  f[2] = 0;                                                 // r15
  f[3] = 0;                                                 // r14
  f[4] = reinterpret_cast<uint64_t>(entry);                 // r13
  f[5] = reinterpret_cast<uint64_t>(arg);                   // r12
  f[6] = 0;                                                 // rbx
  f[7] = 0;                                                 // rbp
  f[8] = reinterpret_cast<uint64_t>(&gt_simt_fiber_start);  // return address
  ctx.sp = f;
#else
  auto* uc = static_cast<ucontext_t*>(ctx.impl);
  if (!uc) ctx.impl = uc = new ucontext_t;  // owned by the context for the process's life
  getcontext(uc);
  uc->uc_stack.ss_sp = stack.bottom();
  uc->uc_stack.ss_size = stack.size();
  uc->uc_link = nullptr;
  auto* start = reinterpret_cast<UcontextStart*>(stack.bottom());  // at the far end of the stack
  *start = {entry, arg};
  const auto p = reinterpret_cast<uintptr_t>(start);
  makecontext(uc, reinterpret_cast<void (*)()>(&ucontext_trampoline), 2, unsigned(p),
              unsigned(p >> 32));
#endif
}

void fiber_switch(FiberContext& from, FiberContext& to) {
  tl_switched_from = &from;
#ifdef GT_SIMT_ASAN
  __sanitizer_start_switch_fiber(&from.asan_fake_stack, to.stack_bottom, to.stack_size);
#endif
#ifdef GT_SIMT_ASM_SWITCH
  gt_simt_switch_sp(&from.sp, to.sp);
#else
  auto* mine = static_cast<ucontext_t*>(from.impl);
  if (!mine) from.impl = mine = new ucontext_t;
  swapcontext(mine, static_cast<ucontext_t*>(to.impl));
#endif
  landed(from);
}

void fiber_started(FiberContext& self) { landed(self); }

}  // namespace gt::simt
