// Helpers shared by the engine tests: temporary folders, small text files, running the CLI.
#pragma once
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "train/config.h"

namespace gt::test {

namespace fs = std::filesystem;

/// A fresh temporary folder, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("gt-test-" + std::to_string(getpid()) + "-" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

/// n normal samples with standard deviation `scale`, from a fixed generator and seed.
inline std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

/// English-like text of about n characters, deterministic.
inline std::string sample_text(size_t n, uint64_t seed = 7) {
  static const char* words[] = {"the",  "king",  "and", "queen", "of",    "a",      "land", "far",
                                "away", "spoke", "to",  "all",   "their", "people", "with", "love"};
  std::mt19937_64 g(seed);
  std::string s;
  while (s.size() < n) {
    s += words[g() % 16];
    s += (g() % 9 == 0) ? ".\n" : " ";
  }
  s.resize(n);
  return s;
}

/// The bytes of a file ("" when it cannot be read).
inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

struct CmdResult {
  int exit_code;
  std::string output;  ///< stdout and stderr together
};

/// Runs a shell command, capturing its output.
/// Removes the checksums of the tensor files from RUN/checkpoint/state.json, as in a checkpoint
/// written before they were recorded: for tests that put a tensor file made elsewhere into a
/// checkpoint on purpose (it is read unchecked, with a note).
inline void drop_checkpoint_checksums(const std::string& run) {
  const std::string path = (fs::path(run) / "checkpoint" / "state.json").string();
  auto j = nlohmann::json::parse(read_bytes(path));
  j.erase("files");
  write_file(path, j.dump(2) + "\n");
}

inline CmdResult run_cmd(const std::string& cmd) {
  CmdResult r{0, ""};
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  int st = pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

/// Whether this build registers the backend `name` (backend/registry.cpp); a build with
/// GT_ONEDNN=OFF has no "cpu".
inline bool has_backend(const std::string& name) {
  for (auto& e : registered_backends())
    if (name == e.name) return true;
  return false;
}

/// Skips the calling test, saying why, in a build without the cpu backend (GT_ONEDNN=OFF):
/// for tests of the cpu backend itself, of bf16/fp16 (ref computes in fp32 only), or of the
/// program on its default device with either.
#define GT_NEEDS_CPU_BACKEND()                                                          \
  if (!::gt::test::has_backend("cpu"))                                                  \
  GTEST_SKIP() << "needs the cpu backend, which this build leaves out (GT_ONEDNN=OFF: " \
                  "no oneDNN)"

/// A 2-layer, 2-head training configuration on data_path for fast tests: micro-batch 4,
/// lr 3e-3 -> 3e-4, no evaluation or checkpoint interval, 2 threads.
inline TrainConfig small_train_config(const std::string& data_path, int n_embd, int block_size,
                                      int max_steps, int warmup_steps) {
  TrainConfig c;
  c.model = {2, 2, n_embd, block_size, 0};
  c.batch_size = 4;
  c.max_steps = max_steps;
  c.learning_rate = 3e-3;
  c.min_lr = 3e-4;
  c.warmup_steps = warmup_steps;
  c.eval_interval = 0;
  c.eval_steps = 2;
  c.checkpoint_interval = 0;
  c.threads = 2;
  c.data_path = data_path;
  return c;
}

/// The sizes and schedule of tiny_config_toml's configuration that the tests set.
struct TinyConfig {
  int n_embd = 16;
  int block_size = 8;
  int batch_size = 4;
  int max_steps = 2;
  int warmup_steps = 1;
  int eval_interval = 0;
  int log_interval = 0;        ///< 0: no log_interval key (the program's default)
  std::string data_keys = "";  ///< [data] lines before its path, e.g. "tokenizer = \"bpe\"\n"
};

/// A 2-layer, 2-head training configuration in TOML on data_path for the program's tests:
/// eval_steps 2, no checkpoint interval, 2 threads, the rest from `c`.
inline std::string tiny_config_toml(const std::string& data_path, const TinyConfig& c = {}) {
  std::string s = "[model]\nn_layer = 2\nn_head = 2\nn_embd = " + std::to_string(c.n_embd) +
                  "\nblock_size = " + std::to_string(c.block_size) +
                  "\n[train]\nbatch_size = " + std::to_string(c.batch_size) +
                  "\nmax_steps = " + std::to_string(c.max_steps) +
                  "\nwarmup_steps = " + std::to_string(c.warmup_steps) +
                  "\neval_interval = " + std::to_string(c.eval_interval) +
                  "\neval_steps = 2\ncheckpoint_interval = 0\nthreads = 2\n";
  if (c.log_interval > 0) s += "log_interval = " + std::to_string(c.log_interval) + "\n";
  return s + "[data]\n" + c.data_keys + "path = \"" + data_path + "\"\n";
}

/// Writes `text` to DIR/t.txt and a tiny_config_toml(c) on it to DIR/tiny.toml; returns the
/// configuration's path.
inline std::string write_tiny_config(const TempDir& d, const TinyConfig& c = {},
                                     const std::string& text = sample_text(5000)) {
  write_file(d.file("t.txt"), text);
  const std::string cfg = d.file("tiny.toml");
  write_file(cfg, tiny_config_toml(d.file("t.txt"), c));
  return cfg;
}

/// ||x - r|| / ||r||: the relative L2 error of x against the reference r (sums in double).
inline double rel_error(const std::vector<float>& x, const std::vector<float>& r) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (double(x[i]) - r[i]) * (double(x[i]) - r[i]);
    den += double(r[i]) * r[i];
  }
  return std::sqrt(num / den);
}

/// f32 tensors of a backend's memory made from host vectors (up) and read back (down); freed
/// with this object.
class DeviceVectors {
 public:
  explicit DeviceVectors(Backend& be) : be_(be) {}
  DeviceVectors(const DeviceVectors&) = delete;
  DeviceVectors& operator=(const DeviceVectors&) = delete;
  ~DeviceVectors() {
    for (void* p : bufs_) be_.deallocate(p);
  }
  float* up(const std::vector<float>& h) {
    auto* p = static_cast<float*>(be_.allocate(h.size() * sizeof(float)));
    be_.copy_to_device(p, h.data(), h.size() * sizeof(float));
    bufs_.push_back(p);
    return p;
  }
  std::vector<float> down(const float* p, size_t n) {
    std::vector<float> h(n);
    be_.copy_to_host(h.data(), p, n * sizeof(float));
    return h;
  }

 private:
  Backend& be_;
  std::vector<void*> bufs_;
};

}  // namespace gt::test
