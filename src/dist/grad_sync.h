// dist/grad_sync.h: data-parallel gradient synchronisation, overlapped with the backward pass.
// The gradient buffer (one flat fp32 arena) is cut into buckets, one per group of parameters
// whose gradients the backward finishes together (a transformer block, ln_f, the embeddings).
// When the backward has finished a bucket the trainer hands it over (start()); a communication
// thread reduces it while the backward goes on with the next layers (as PyTorch DDP's bucketed
// all-reduce), and wait() returns when every bucket is done.
//
// Each bucket is split evenly into one chunk per rank (split_evenly). Its reduction is a
// reduce-scatter (rank r receives the sum of chunk r, in fp32, in rank order) followed, with
// zero = 0, by an all-gather of the reduced chunks: 2(N-1)/N x the bucket's bytes per rank, as
// a ring all-reduce. With zero = 1 (ZeRO stage 1, Rajbhandari et al. 2020) the all-gather is
// left out: rank r keeps the sum of its chunks, updates only those elements of the weights and
// AdamW state, and the trainer all-gathers the weights after the update (gather_params()).
// wire = bf16 sends the gradients as bf16 (half the bytes); the sums are still taken in fp32
// (rounded once more for the all-gather with zero = 0).
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/memory.h"
#include "dist/communicator.h"

namespace gt::dist {

/// A range of elements [begin, end) of a flat fp32 buffer.
struct Range {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

/// Timing of the gradient synchronisation, for the run summary (s).
struct SyncStats {
  double comm_s = 0;       ///< seconds the communication thread spent in collectives
  double exposed_s = 0;    ///< seconds the trainer waited in wait() (not hidden by the backward)
  double comm_wait_s = 0;  ///< of comm_s, seconds inside the communicator's collectives
  int64_t grad_bytes_sent = 0;   ///< bytes of gradients this rank sent
  int64_t param_bytes_sent = 0;  ///< bytes of weights and optimizer state this rank sent (zero1)
  int64_t buckets = 0;           ///< buckets reduced
};

class GradSync {
 public:
  /// comm: the communicator of the gradients (host memory, or device memory when
  /// comm.device_buffers()); mem: the device holding `grads`; grads: the flat gradient buffer
  /// of `total` floats; buckets: disjoint ranges of it in the order the backward finishes them;
  /// zero1: keep only this rank's chunks (ZeRO-1); wire: f32 or bf16. Starts the communication
  /// thread. Throws gt::Error for bf16 on device buffers (not implemented for NCCL).
  GradSync(Communicator& comm, DeviceMemory& mem, float* grads, size_t total,
           std::vector<Range> buckets, bool zero1, CommType wire);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  const std::vector<Range>& buckets() const { return buckets_; }
  /// Index of the bucket that starts at element `begin` of the buffer; buckets().size() if none.
  size_t bucket_at(size_t begin) const;
  /// This rank's chunk of bucket b (absolute element range of the buffer).
  Range chunk(size_t b) const { return mine_[b]; }
  /// Chunk sizes of bucket b, one per rank.
  const std::vector<size_t>& chunk_counts(size_t b) const { return counts_[b]; }

  /// Hands bucket b, whose gradients are final, to the communication thread (called from the
  /// backward). mark: the device's mark (DeviceMemory::mark_queued) after the bucket's gradients
  /// were queued; the communication thread waits for it (not the trainer's thread, which goes on
  /// queuing the backward: no host synchronization per bucket on a GPU). 0: ready now.
  void start(size_t b, uint64_t mark = 0);
  /// Waits until every started bucket is reduced; rethrows the communication thread's error
  /// (a time-out, say). Afterwards the communicator may be used by the caller's thread.
  void wait();
  /// With zero1: all-gathers every bucket's chunks of `params` (a flat fp32 buffer laid out as
  /// the gradients) after this rank updated its chunks; on the calling thread.
  void gather_params(float* params);
  /// Offset of this rank's chunk of bucket b in a shard that holds its chunks of every bucket
  /// one after the other (the ZeRO-1 AdamW state), and the shard's size in elements.
  size_t shard_offset(size_t b) const { return shard_off_[b]; }
  size_t shard_elems() const { return shard_elems_; }
  /// All-gathers a shard laid out as above into `full` (a flat fp32 buffer laid out as the
  /// gradients), bucket by bucket; on the calling thread (after wait()).
  void gather_shard(const float* shard, float* full);
  const SyncStats& stats() const { return stats_; }

 private:
  void thread_main();
  void reduce_bucket(size_t b);
  void gather(const float* shard, float* full);

  Communicator& comm_;
  DeviceMemory& mem_;
  float* grads_;
  std::vector<Range> buckets_, mine_;
  std::vector<std::vector<size_t>> counts_;
  std::vector<size_t> shard_off_;
  size_t shard_elems_ = 0;
  bool zero1_;
  CommType wire_;
  std::vector<uint16_t> wire_buf_;  // bf16 staging of one bucket (host buffers)
  std::vector<float> host_buf_;     // one bucket, when the gradients are not host memory

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<size_t, uint64_t>> queue_;  ///< (bucket, its mark)
  size_t pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  SyncStats stats_;
};

}  // namespace gt::dist
