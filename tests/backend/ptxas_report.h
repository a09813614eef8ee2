// ptxas's resource report of the CUDA backend's kernels, as the build kept it
// (cmake/ptxas_log.sh: OBJECT.ptxas.log beside each kernels_*.cu object): for each kernel and
// target (sm_80, sm_90), registers per thread, stack frame and spill bytes. Read by the
// resource gate and the launch-limit test.
#pragma once
#include <cxxabi.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace gt::test {

/// One kernel's figures for one target, from ptxas -v.
struct PtxasEntry {
  std::string kernel;  ///< demangled: "gt::cuda_kernels::(anonymous namespace)::hot::..."
  std::string arch;    ///< "sm_90"
  int registers = 0;
  int stack_bytes = 0, spill_stores = 0, spill_loads = 0;
  std::string log;  ///< the file it came from
};

inline std::string demangle(const std::string& m) {
  int st = 0;
  char* d = abi::__cxa_demangle(m.c_str(), nullptr, nullptr, &st);
  std::string r = st == 0 && d ? d : m;
  std::free(d);
  return r;
}

/// Every entry of every *.ptxas.log under dir (none when the folder or the logs are missing).
inline std::vector<PtxasEntry> read_ptxas(const std::string& dir) {
  std::vector<PtxasEntry> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return out;
  const std::regex entry(R"(Compiling entry function '([^']+)' for '(sm_\d+a?)')");
  const std::regex props(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  const std::regex regs(R"(Used (\d+) registers)");
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    const std::string path = f.path().string();
    if (path.size() < 10 || path.substr(path.size() - 10) != ".ptxas.log") continue;
    std::ifstream in(path);
    PtxasEntry cur;
    bool open = false;
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_search(line, m, entry)) {
        cur = PtxasEntry{demangle(m[1]), m[2], 0, 0, 0, 0, path};
        open = true;
      } else if (open && std::regex_search(line, m, props)) {
        cur.stack_bytes = std::stoi(m[1]);
        cur.spill_stores = std::stoi(m[2]);
        cur.spill_loads = std::stoi(m[3]);
      } else if (open && std::regex_search(line, m, regs)) {
        cur.registers = std::stoi(m[1]);
        out.push_back(cur);
        open = false;
      }
    }
  }
  return out;
}

/// The kernel's name without namespaces, template arguments or parameters:
/// "layernorm_forward_kernel".
inline std::string base_name(const std::string& demangled) {
  std::string s = demangled;
  int depth = 0;
  std::string flat;
  for (char c : s) {  // drop template arguments and parameter lists
    if (c == '<' || c == '(') ++depth;
    if (depth == 0) flat += c;
    if ((c == '>' || c == ')') && depth > 0) --depth;
  }
  const auto at = flat.rfind("::");
  return at == std::string::npos ? flat : flat.substr(at + 2);
}

}  // namespace gt::test
