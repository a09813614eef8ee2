#include "train/model_memory.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string_view>

#include "core/arena.h"
#include "core/error.h"

namespace gt {

size_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}

namespace {

// A limit file's bytes ("max", a v1 "unlimited" near 2^63, or unreadable: none).
std::optional<size_t> limit_bytes(const std::string& path) {
  std::ifstream f(path);
  std::string v;
  if (!(f >> v) || v == "max") return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long b = std::strtoull(v.c_str(), &end, 10);
  if (errno != 0 || end == v.c_str() || *end != '\0' || b == 0 || b >= (1ULL << 62))
    return std::nullopt;
  return static_cast<size_t>(b);
}

// The least memory limit of the cgroup at `path` (a /proc/self/cgroup path) and its ancestors.
std::optional<size_t> cgroup_limit(const std::string& root, std::string path, const char* file) {
  std::optional<size_t> least;
  while (true) {
    if (auto b = limit_bytes(root + path + "/" + file); b && (!least || *b < *least)) least = b;
    if (path.empty() || path == "/") break;
    const size_t slash = path.rfind('/');
    path = slash == std::string::npos ? std::string() : path.substr(0, slash);
  }
  return least;
}

}  // namespace

MemoryLimit host_memory_limit(const std::string& proc_root, const std::string& cgroup_root) {
  MemoryLimit m;
  if (const size_t phys = host_memory_bytes(); phys > 0)
    m = {phys, fmt::format("this machine has {} of memory", format_bytes(phys))};
  auto lower = [&m](size_t b, const std::string& what) {
    if (m.bytes == 0 || b < m.bytes) m = {b, fmt::format(fmt::runtime(what), format_bytes(b))};
  };
  std::ifstream cg(proc_root + "/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    // "0::/path" (v2), "4:memory:/path" (v1)
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::optional<size_t> lim;
    if (line.compare(0, a, "0") == 0 && controllers.empty())
      lim = cgroup_limit(cgroup_root, path, "memory.max");
    else if (controllers == "memory")
      lim = cgroup_limit(cgroup_root + "/memory", path, "memory.limit_in_bytes");
    if (lim)
      lower(*lim,
            "its cgroup (a Slurm job's --mem, a container's memory limit) allows {} of memory");
  }
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    lower(static_cast<size_t>(r.rlim_cur), "its address space is limited to {} (ulimit -v)");
  return m;
}

namespace {

struct Sizing {
  const TrainConfig& cfg;
  const Backend& be;
  bool training;
  // the bytes the model takes at micro-batch B (AdamW's moments only when training)
  size_t need(int B) const {
    const MemoryPlan p = plan_memory(cfg.model, B, cfg.recompute, cfg.fusion, be.precision(), be);
    return p.total() - (training ? 0 : p.optimizer_bytes);
  }
  size_t activations(int B) const {
    const MemoryPlan p = plan_memory(cfg.model, B, cfg.recompute, cfg.fusion, be.precision(), be);
    return p.activations_bytes + p.scratch_bytes + p.workspace_bytes;
  }
};

// Why the model at `batch` does not fit in `have` bytes (0: unknown), in the keys' names;
// `where` says how much memory there is or what refused it.
std::string too_large(const Sizing& z, int batch, const std::string& batch_key, size_t have,
                      const std::string& where) {
  const GPTConfig& m = z.cfg.model;
  const std::string shape =
      fmt::format("model.n_layer = {}, model.n_head = {}, model.n_embd = {}, model.vocab_size = {}",
                  m.n_layer, m.n_head, m.n_embd, m.vocab_size);
  const size_t fixed = z.need(1) - z.activations(1);  // parameters, gradients (and moments)
  if (have > 0 && fixed >= have)
    return fmt::format(
        "{}: the parameters and gradients{} alone need {}, and {}; expected a "
        "smaller model",
        shape, z.training ? " and AdamW's moments" : "", format_bytes(fixed), where);
  if (batch == 1 || (have > 0 && z.need(1) > have))
    return fmt::format(
        "model.block_size = {}: one sequence of {} tokens needs {} of activations ({}; "
        "attention's grow with model.block_size squared{}), {} in all, and {}; lower "
        "model.block_size",
        m.block_size, m.block_size, format_bytes(z.activations(1)), shape,
        z.cfg.fusion ? "" : ", train.fusion = on keeps none of them", format_bytes(z.need(1)),
        where);
  std::string fits;
  if (have > 0) {
    // largest_batch_that_fits counts AdamW's moments: without training that memory is free
    const size_t moments =
        plan_memory(m, 1, z.cfg.recompute, z.cfg.fusion, z.be.precision(), z.be).optimizer_bytes;
    const size_t budget = have + (z.training ? 0 : moments);
    const int most =
        largest_batch_that_fits(m, z.cfg.recompute, z.cfg.fusion, z.be.precision(), budget, z.be);
    fits = fmt::format("; at most {} = {} fits", batch_key, most);
  }
  return fmt::format(
      "{} = {}: the activations of {} sequences of model.block_size = {} tokens need {} ({} "
      "in all; they grow with {} x model.block_size), and {}{}",
      batch_key, batch, batch, m.block_size, format_bytes(z.activations(batch)),
      format_bytes(z.need(batch)), batch_key, where, fits);
}

}  // namespace

std::unique_ptr<GPT> make_gpt(const TrainConfig& cfg, int batch, const std::string& batch_key,
                              Backend& be, bool training) {
  const Sizing z{cfg, be, training};
  // host memory: an allocation larger than the machine may be granted (overcommit) and then
  // fail page by page as the arena is zeroed, so the plan is checked first
  const MemoryLimit limit = be.device() == Device::cpu ? host_memory_limit() : MemoryLimit{};
  const size_t have = limit.bytes;
  if (have > 0 && z.need(batch) > have)
    throw Error(too_large(z, batch, batch_key, have, limit.what));
  try {
    return std::make_unique<GPT>(cfg.model, batch, cfg.recompute, be, cfg.fusion);
  } catch (const Error& e) {
    // a device that refused the memory (every backend says "cannot allocate"); others as they are
    if (std::string_view(e.what()).find("cannot allocate") == std::string_view::npos) throw;
    throw Error(
        too_large(z, batch, batch_key, 0,
                  fmt::format("the {} backend could not allocate it ({})", be.name(), e.what())));
  }
}

}  // namespace gt
