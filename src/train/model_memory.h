// train/model_memory.h: builds a run's GPT where its memory can be had; where it cannot, says
// how much the plan needs (model/gpt.h plan_memory), which keys make it that large and how much
// memory there is, before anything is allocated on the host.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "model/gpt.h"
#include "train/config.h"

namespace gt {

/// Bytes of physical memory of this machine (sysconf); 0 when unknown.
size_t host_memory_bytes();

/// The memory this process may use: the least of the machine's physical memory, its cgroup's
/// limit (v2: memory.max of its cgroup and each ancestor under `cgroup_root`; v1: the memory
/// controller's memory.limit_in_bytes; Linux Documentation/admin-guide/cgroup-v2.rst) and
/// RLIMIT_AS, with what set it ("this machine has 23.5 GiB of memory", "its cgroup (a Slurm
/// job's --mem, a container's limit) allows 8 GiB"). bytes 0: unknown. `proc_root` and
/// `cgroup_root` are for tests.
struct MemoryLimit {
  size_t bytes = 0;
  std::string what;
};
MemoryLimit host_memory_limit(const std::string& proc_root = "/proc",
                              const std::string& cgroup_root = "/sys/fs/cgroup");

/// The GPT of cfg.model at micro-batch `batch` on `be` (cfg.recompute, cfg.fusion, be's
/// precision). `training`: the plan counts AdamW's two moments (the trainer allocates them
/// after), else not (eval, sample). Throws gt::Error, on a host backend before allocating and
/// on any backend when its allocation fails, with the bytes the plan needs (the activations
/// apart), the keys that make it that large (`batch_key` = batch for a batch that is too large,
/// with the largest one that fits; model.block_size and the model's shape when one sequence
/// does not fit) and the machine's memory (or the device's refusal).
std::unique_ptr<GPT> make_gpt(const TrainConfig& cfg, int batch, const std::string& batch_key,
                              Backend& be, bool training);

}  // namespace gt
