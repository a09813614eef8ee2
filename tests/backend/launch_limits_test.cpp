// Every launch the CUDA backend makes, at GPT-2 124M, 350M and XL shapes (B 32 or 8, T 1024,
// V 50304), and the classifier at B*T*V up to 1e10, against the limits of compute capability
// 9.0 (H100/H200; CUDA C++ Programming Guide, "Technical Specifications per Compute
// Capability"): grid and block dimensions, threads per block, shared memory (48 KiB static,
// 227 KiB with the opt-in the launcher makes), registers per block from ptxas's report, and an
// occupancy estimate: a memory-bound kernel under 25 % of the SM's 2048 threads is flagged.
// The configurations are the pure functions of backend/cuda/kernel_configs.h that the
// launchers use; the launchers' own limits are tested on the SIMT runtime (simt_test).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "backend/cuda/kernel_configs.h"
#include "backend/simt/simt_host.h"
#ifdef GT_PTXAS_LOG_DIR
#include "ptxas_report.h"
#endif

namespace gt::cuda_kernels::configs {
namespace {

/// The H100/H200 SM: 2048 threads, 32 blocks, 64 Ki registers (allocated per warp in units of
/// 256, i.e. 8 per thread), 228 KiB of shared memory (1 KiB of it reserved per block).
constexpr int kSmThreads = 2048, kSmBlocks = 32, kSmRegisters = 65536;
constexpr size_t kSmShared = 228 * 1024, kBlockReserved = 1024;

struct Launch {
  std::string kernel;  ///< base name, as ptxas reports it, or "name<args" for one instantiation
  LaunchConfig lc;
  bool memory_bound;
};

struct Shape {
  const char* name;
  int B, T, C, NH, L;
  int64_t V = 50304;
};

std::vector<Launch> launches(const Shape& s) {
  const int64_t N = int64_t(s.B) * s.T, C = s.C, V = s.V, hs = C / s.NH;
  const int64_t params = V * C + s.T * C + int64_t(s.L) * 12 * C * C + 2 * C;
  std::vector<Launch> v = {
      {"embedding_forward_kernel", elementwise(N * C / 4), true},
      {"residual_kernel", elementwise(N * C / 4), true},
      {"gelu_kernel", elementwise(N * 4 * C), true},
      {"round16_kernel", elementwise(params / 4), true},
      {fmt::format("layernorm_forward_kernel<float, {}>", layernorm_packs(int(C), false)),
       layernorm_forward(N), true},
      {fmt::format("layernorm_backward_kernel<{}>", layernorm_packs(int(C), true)),
       layernorm_backward(N, int(C)), true},
      {"column_finish_kernel", column_finish(2 * C), true},
      {"classifier_kernel", classifier(N, int(V), 4), true},
      {"softmax_backward_kernel", elementwise(N * V), true},
      {"sum_squares_kernel", sum_squares(params), true},
      {"sum_squares_finish_kernel", sum_squares_finish(params), true},
      {"adamw_multi_kernel", adamw_multi((params + 65535) / 65536), true},
      {"fp8_amax_kernel", fp8_amax(N * 4 * C), true},
      {"fp8_cast_kernel", elementwise(N * 4 * C), true},
      {"fp8_cast_transpose_kernel", fp8_transpose(N, 4 * C), true},
      {"flash_delta_kernel", attention_delta(N * s.NH), true},
      {"attention_forward_rows_kernel", attention_rows(N * s.NH), false},
  };
  for (int64_t oc : {3 * C, C, 4 * C}) {
    v.push_back({"column_partial_kernel", column_sums(N, oc, 4), true});
    v.push_back({"column_partial_kernel", column_sums(N, oc, 8), true});
  }
  if (hs == 32 || hs == 64 || hs == 128) {
    v.push_back({"flash_forward_kernel", flash_forward(s.B, s.T, s.NH, int(hs)), false});
    v.push_back({"flash_backward_kv_kernel", flash_backward_kv(s.B, s.T, s.NH, int(hs)), false});
    v.push_back({"flash_backward_q_kernel", flash_backward_q(s.B, s.T, s.NH, int(hs)), false});
  }
  return v;
}

/// Registers per thread on sm_90: of every instantiation by "name<args>" (without the
/// namespaces and the parameter list), and the most of any by the base name (none known
/// without the toolkit's report).
std::map<std::string, int> registers_sm90() {
  std::map<std::string, int> r;
#ifdef GT_PTXAS_LOG_DIR
  for (const auto& e : test::read_ptxas(GT_PTXAS_LOG_DIR))
    if (e.arch == "sm_90") {
      const std::string base = test::base_name(e.kernel);
      int& x = r[base];
      x = std::max(x, e.registers);
      const auto at = e.kernel.find(base + "<");
      if (at != std::string::npos) {
        const auto close = e.kernel.find(">(", at);
        if (close != std::string::npos) r[e.kernel.substr(at, close + 1 - at)] = e.registers;
      }
    }
#endif
  return r;
}

std::string check(const Launch& l, const std::map<std::string, int>& regs) {
  const auto& g = l.lc.grid;
  const auto& b = l.lc.block;
  std::string bad;
  auto no = [&](const std::string& why) { bad += "; " + why; };
  if (g.x < 1 || g.x > simt::kMaxGridX || g.y < 1 || g.y > simt::kMaxGridYZ || g.z < 1 ||
      g.z > simt::kMaxGridYZ)
    no(fmt::format("grid ({},{},{}) beyond (2^31-1, 65535, 65535)", g.x, g.y, g.z));
  const uint64_t threads = b.count();
  if (threads < 1 || threads > simt::kMaxThreadsPerBlock || b.z > simt::kMaxBlockDimZ)
    no(fmt::format("block ({},{},{})", b.x, b.y, b.z));
  if (threads % 32) no(fmt::format("{} threads: not whole warps", threads));
  if (l.lc.smem > simt::kMaxSharedBytesOptIn)
    no(fmt::format("{} bytes of dynamic shared memory, above {}", l.lc.smem,
                   simt::kMaxSharedBytesOptIn));
  int blocks = std::min<int>(kSmBlocks, kSmThreads / int(threads));
  auto it = regs.find(l.kernel);
  if (it == regs.end() && l.kernel.find('<') != std::string::npos)  // an unknown instantiation
    it = regs.find(l.kernel.substr(0, l.kernel.find('<')));
  if (it != regs.end()) {
    const int per_thread = (it->second + 7) / 8 * 8;
    if (per_thread * int64_t(threads) > kSmRegisters)
      no(fmt::format("{} registers x {} threads exceed the {} of an SM", it->second, threads,
                     kSmRegisters));
    blocks = std::min<int>(blocks, kSmRegisters / (per_thread * int(threads)));
  }
  if (l.lc.smem) blocks = std::min<int>(blocks, int(kSmShared / (l.lc.smem + kBlockReserved)));
  const double occupancy = double(blocks) * threads / kSmThreads;
  if (l.memory_bound && occupancy < 0.25)
    no(fmt::format("occupancy {:.0f} % (a memory-bound kernel wants at least 25 %)",
                   100 * occupancy));
  return bad;
}

TEST(LaunchLimits, EveryLaunchAtGpt2ShapesFitsAnH100OrH200) {
  const auto regs = registers_sm90();
  if (regs.empty()) std::printf("(no ptxas report in this build: registers not checked)\n");
  for (const Shape& s :
       {Shape{"GPT-2 124M", 32, 1024, 768, 12, 12}, Shape{"GPT-2 350M", 32, 1024, 1024, 16, 24},
        Shape{"GPT-2 XL", 8, 1024, 1600, 25, 48},
        Shape{"GPT-2 124M at B*T*V = 1e10", 194, 1024, 768, 12, 12}}) {
    for (const Launch& l : launches(s)) {
      const std::string bad = check(l, regs);
      EXPECT_EQ(bad, "") << s.name << ", " << l.kernel << ": grid (" << l.lc.grid.x << ","
                         << l.lc.grid.y << "," << l.lc.grid.z << "), block " << l.lc.block.count()
                         << ", smem " << l.lc.smem;
    }
  }
}

TEST(LaunchLimits, TheCheckFailsWhereALimitIsPassed) {
  EXPECT_NE(check({"x", {Dim3(1), Dim3(2048), 0}, false}, {}), "");
  EXPECT_NE(check({"x", {Dim3(1, 70000), Dim3(32), 0}, false}, {}), "");
  EXPECT_NE(check({"x", {Dim3(1), Dim3(256), 240 * 1024}, false}, {}), "");
  EXPECT_NE(check({"x", {Dim3(1), Dim3(1024), 0}, false}, {{"x", 128}}), "")
      << "128 registers x 1024 threads";
  EXPECT_NE(check({"x", {Dim3(1), Dim3(256), 200 * 1024}, true}, {}), "")
      << "a memory-bound kernel at one block of 256 threads per SM";
  EXPECT_EQ(check({"x", {Dim3(100), Dim3(256), 0}, true}, {{"x", 32}}), "");
}

}  // namespace
}  // namespace gt::cuda_kernels::configs
