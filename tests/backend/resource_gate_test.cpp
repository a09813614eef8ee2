// The resource gate: every kernel the CUDA backend marks hot (namespace `hot` in kernels_*.cu)
// compiles, for every target of the build (sm_80, sm_90), without register spills and without
// a stack frame: a spill or a local array in a hot kernel is local-memory traffic on every
// call (the review of the first CUDA backend found 184 to 852 bytes of spills in its
// attention kernels). The figures are ptxas's own (-Xptxas -v), as the build kept them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>

#include "ptxas_report.h"

namespace gt::test {
namespace {

TEST(ResourceGate, HotKernelsNeitherSpillNorHaveAStackFrame) {
  const auto entries = read_ptxas(GT_PTXAS_LOG_DIR);
  ASSERT_FALSE(entries.empty()) << "no ptxas report under " << GT_PTXAS_LOG_DIR
                                << " (cmake/ptxas_log.sh keeps one beside each kernels_*.cu "
                                   "object; rebuild gt_backend)";
  std::set<std::string> hot, archs;
  std::string bad;
  for (const auto& e : entries) {
    archs.insert(e.arch);
    if (e.kernel.find("::hot::") == std::string::npos) continue;
    hot.insert(base_name(e.kernel));
    if (e.stack_bytes || e.spill_stores || e.spill_loads)
      bad += fmt::format(
          "  {} ({}): {} registers, {} bytes stack frame, {} bytes spill stores, {} "
          "bytes spill loads\n",
          e.kernel, e.arch, e.registers, e.stack_bytes, e.spill_stores, e.spill_loads);
  }
  EXPECT_EQ(bad, "") << "hot kernels with spills or a stack frame:\n" << bad;
  for (const char* k : {"flash_forward_kernel", "flash_backward_kv_kernel",
                        "flash_backward_q_kernel", "layernorm_forward_kernel",
                        "layernorm_backward_kernel", "classifier_kernel", "adamw_multi_kernel"})
    EXPECT_TRUE(hot.count(k)) << k << " is not among the hot kernels ptxas reported";
  EXPECT_TRUE(archs.count("sm_90")) << "no sm_90 (H100/H200) code in the build";
}

}  // namespace
}  // namespace gt::test
