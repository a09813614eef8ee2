// dist/communicator.cpp: see communicator.h.
#include "dist/communicator.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/name_table.h"

namespace gt::dist {

void Communicator::wait_for(const std::function<bool()>& done, double timeout_s,
                            const std::function<void()>& timed_out, size_t bytes) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const auto deadline = t0 + std::chrono::duration<double>(timeout_s);
  auto sleep = std::chrono::microseconds(10);
  while (!done()) {
    const auto now = clock::now();
    if (now > deadline) {
      timed_out();
      throw Error("Communicator::wait_for: timed_out() returned");  // it must throw
    }
    if (now - t0 > std::chrono::microseconds(50) && !busy_poll()) {
      std::this_thread::sleep_for(sleep);
      if (sleep < std::chrono::milliseconds(1)) sleep *= 2;
    }
  }
  stats_.wait_s += std::chrono::duration<double>(clock::now() - t0).count();
  stats_.bytes_sent += static_cast<int64_t>(bytes);
  ++stats_.collectives;
}

size_t comm_type_size(CommType t) {
  switch (t) {
    case CommType::f32:
      return 4;
    case CommType::bf16:
      return 2;
    case CommType::f64:
    case CommType::i64:
      return 8;
    case CommType::byte:
      return 1;
  }
  return 0;
}

constexpr NameTable<CommType, 5> kCommTypeNames{{{CommType::f32, "f32"},
                                                 {CommType::bf16, "bf16"},
                                                 {CommType::f64, "f64"},
                                                 {CommType::i64, "i64"},
                                                 {CommType::byte, "byte"}}};
const char* comm_type_name(CommType t) { return name_of(kCommTypeNames, t).data(); }

std::vector<size_t> split_evenly(size_t n, int parts) {
  std::vector<size_t> c(parts, n / parts);
  for (size_t r = 0; r < n % parts; ++r) ++c[r];
  return c;
}

void LocalCommunicator::all_reduce(void* buf, size_t count, CommType t, ReduceOp op) {
  ++stats_.collectives;
}

void LocalCommunicator::reduce_scatter(const void* send, CommType send_type, float* recv,
                                       const std::vector<size_t>& counts) {
  check(counts.size() == 1, "reduce_scatter: one count per rank expected");
  ++stats_.collectives;
  if (send_type == CommType::bf16) {
    const auto* s = static_cast<const uint16_t*>(send);
    for (size_t i = 0; i < counts[0]; ++i) recv[i] = bf16_to_float(s[i]);
  } else if (send != recv) {
    std::memmove(recv, send, counts[0] * sizeof(float));
  }
}

void LocalCommunicator::all_gather(const void* send, void* recv, const std::vector<size_t>& counts,
                                   CommType t) {
  check(counts.size() == 1, "all_gather: one count per rank expected");
  ++stats_.collectives;
  if (send != recv) std::memmove(recv, send, counts[0] * comm_type_size(t));
}

}  // namespace gt::dist
