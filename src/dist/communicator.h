// dist/communicator.h: the collectives data-parallel training needs (DESIGN.md, dist):
// all-reduce, reduce-scatter, all-gather, broadcast and barrier over the ranks of one job.
// Implementations: LocalCommunicator (one rank: copies), MPI (dist/mpi_comm.h, host memory),
// NCCL (dist/nccl_comm.h, device memory of the CUDA backend). Reductions are sums taken in a
// fixed order (rank 0 + rank 1 + ...) and accumulated in fp32 (or fp64 for f64), so every rank
// receives bitwise the same result and a run with the same number of ranks repeats bit for bit.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace gt::dist {

/// Element types the collectives carry. bf16 travels as 16 bits (the upper half of an fp32,
/// rounded to nearest even) and is summed in fp32.
enum class CommType { f32, bf16, f64, i64, byte };
/// Bytes of one element of t.
size_t comm_type_size(CommType t);
/// "f32", "bf16", "f64", "i64", "byte".
const char* comm_type_name(CommType t);

enum class ReduceOp { sum, max };

/// What a communicator did, for the run summary. Seconds are wall time of the calling thread.
struct CommStats {
  double wait_s = 0;        ///< seconds spent inside collectives (waiting or moving data)
  int64_t bytes_sent = 0;   ///< bytes this rank sent to other ranks
  int64_t collectives = 0;  ///< calls
};

/// The collectives of one job. Buffers are host memory, or device memory when
/// device_buffers() (NCCL). A collective must be called by every rank in the same order with
/// matching sizes; at most one thread may use a communicator at a time. A collective that does
/// not complete within the communicator's time-out (dist.timeout_s: another rank died or hung)
/// throws gt::Error naming the collective, its size and the time-out.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "local", "mpi", "nccl".
  virtual std::string name() const = 0;
  /// Whether buffers are device pointers of the CUDA backend (NCCL) rather than host memory.
  virtual bool device_buffers() const { return false; }

  /// buf (count elements of t) = the elementwise sum (or max) over ranks, in place. bf16:
  /// summed in fp32 in rank order, rounded to bf16 once.
  virtual void all_reduce(void* buf, size_t count, CommType t, ReduceOp op = ReduceOp::sum) = 0;
  /// send holds sum(counts) elements of send_type (f32 or bf16), chunk r (counts[r] elements)
  /// after the chunks of ranks 0..r-1. recv (counts[rank()] floats) receives the sum over
  /// ranks of their chunk rank(), accumulated in fp32 in rank order. recv may lie inside send
  /// (in place: recv == send + offset of this rank's chunk, f32 only). counts.size() == size().
  virtual void reduce_scatter(const void* send, CommType send_type, float* recv,
                              const std::vector<size_t>& counts) = 0;
  /// recv (sum(counts) elements of t, chunk r after chunks 0..r-1) receives every rank's send
  /// (counts[rank()] elements). send may be recv + offset of this rank's chunk (in place).
  virtual void all_gather(const void* send, void* recv, const std::vector<size_t>& counts,
                          CommType t) = 0;
  /// Copies `bytes` of root's buf into every rank's buf.
  virtual void broadcast(void* buf, size_t bytes, int root) = 0;
  /// Returns when every rank has called it.
  virtual void barrier() = 0;

  const CommStats& stats() const { return stats_; }

  /// While on, a collective waiting for other ranks polls without sleeping between tests (MPI:
  /// otherwise it sleeps up to 1 ms so that its core stays with the computation). GradSync turns
  /// it on while the trainer has nothing to do but wait for the last buckets. Any thread may
  /// call it.
  void set_busy_poll(bool on) { busy_poll_.store(on, std::memory_order_relaxed); }

 protected:
  /// Waits for a started collective: calls `done` (true when it has completed; it may throw)
  /// in a loop, spinning for the first 50 us, then sleeping 10 us doubling to 1 ms between
  /// calls so that a waiting rank leaves its core to the computation (spinning throughout while
  /// busy_poll()). Once timeout_s has passed it calls `timed_out`, which must throw. Then adds
  /// the wait, `bytes` sent and one collective to stats().
  void wait_for(const std::function<bool()>& done, double timeout_s,
                const std::function<void()>& timed_out, size_t bytes);
  bool busy_poll() const { return busy_poll_.load(std::memory_order_relaxed); }
  CommStats stats_;

 private:
  std::atomic<bool> busy_poll_{false};
};

/// The communicator of a job of one process: collectives are copies (host memory).
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "local"; }
  void all_reduce(void* buf, size_t count, CommType t, ReduceOp op) override;
  void reduce_scatter(const void* send, CommType send_type, float* recv,
                      const std::vector<size_t>& counts) override;
  void all_gather(const void* send, void* recv, const std::vector<size_t>& counts,
                  CommType t) override;
  void broadcast(void* buf, size_t bytes, int root) override {}
  void barrier() override {}
};

/// Splits n elements into `parts` contiguous chunks, the first ones one element longer when n
/// is not divisible (chunk r starts at the sum of counts 0..r-1).
std::vector<size_t> split_evenly(size_t n, int parts);

using gt::bf16_to_float;  // core/dtype.h
using gt::float_to_bf16;

}  // namespace gt::dist
