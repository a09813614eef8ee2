// dist/grad_sync.cpp: see grad_sync.h.
#include "dist/grad_sync.h"

#include <fmt/format.h>

#include <chrono>
#include <tuple>

#include "core/error.h"

namespace gt::dist {

GradSync::GradSync(Communicator& comm, DeviceMemory& mem, float* grads, size_t total,
                   std::vector<Range> buckets, bool zero1, CommType wire)
    : comm_(comm),
      mem_(mem),
      grads_(grads),
      buckets_(std::move(buckets)),
      zero1_(zero1),
      wire_(wire) {
  check(wire == CommType::f32 || wire == CommType::bf16, "train.grad_comm: expected fp32 or bf16");
  check(!(wire == CommType::bf16 && comm.device_buffers()),
        "train.grad_comm = 'bf16' is not implemented for NCCL (device buffers) yet; use fp32");
  for (auto& b : buckets_) {
    check(b.begin <= b.end && b.end <= total,
          fmt::format("gradient bucket [{}, {}) outside the buffer of {} elements", b.begin, b.end,
                      total));
    counts_.push_back(split_evenly(b.size(), comm.size()));
    size_t off = b.begin;
    for (int r = 0; r < comm.rank(); ++r) off += counts_.back()[r];
    mine_.push_back({off, off + counts_.back()[comm.rank()]});
    shard_off_.push_back(shard_elems_);
    shard_elems_ += mine_.back().size();
  }
  thread_ = std::thread([this] { thread_main(); });
}

GradSync::~GradSync() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

size_t GradSync::bucket_at(size_t begin) const {
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (buckets_[b].begin == begin) return b;
  return buckets_.size();
}

void GradSync::start(size_t b, uint64_t mark) {
  {
    std::lock_guard<std::mutex> g(mu_);
    queue_.push_back({b, mark});
    ++pending_;
  }
  cv_.notify_all();
}

void GradSync::wait() {
  const auto t0 = std::chrono::steady_clock::now();
  comm_.set_busy_poll(true);  // the backward is over: the last buckets may poll without pauses
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return pending_ == 0 || error_; });
  comm_.set_busy_poll(false);
  stats_.exposed_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (error_) {
    queue_.clear();
    pending_ = 0;
    auto e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void GradSync::thread_main() {
  try {
    mem_.bind_thread();  // the device is the trainer thread's; this thread selects it too
  } catch (...) {
    std::lock_guard<std::mutex> g(mu_);
    error_ = std::current_exception();
  }
  while (true) {
    size_t b;
    uint64_t mark;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || (!queue_.empty() && !error_); });
      if (stop_) return;
      std::tie(b, mark) = queue_.front();
      queue_.pop_front();
    }
    try {
      mem_.wait_for_mark(mark);  // the bucket's gradients are computed (the backward goes on)
      const auto t0 = std::chrono::steady_clock::now();
      const CommStats before = comm_.stats();
      reduce_bucket(b);
      const double dt =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::lock_guard<std::mutex> g(mu_);
      stats_.comm_s += dt;
      stats_.comm_wait_s += comm_.stats().wait_s - before.wait_s;
      stats_.grad_bytes_sent += comm_.stats().bytes_sent - before.bytes_sent;
      ++stats_.buckets;
      --pending_;
    } catch (...) {
      std::lock_guard<std::mutex> g(mu_);
      error_ = std::current_exception();
    }
    cv_.notify_all();
  }
}

// The reduction of one bucket; host buffers (MPI) or device buffers (NCCL, f32 only).
void GradSync::reduce_bucket(size_t b) {
  const Range& bk = buckets_[b];
  const Range& my = mine_[b];
  const auto& counts = counts_[b];
  const bool staged = !comm_.device_buffers() && !mem_.host_readable();
  float* g = grads_ + bk.begin;
  if (staged) {  // a device without a device communicator: through host memory
    host_buf_.resize(bk.size());
    mem_.copy_to_host(host_buf_.data(), g, bk.size() * sizeof(float));
    g = host_buf_.data();
  }
  float* mine = g + (my.begin - bk.begin);
  if (wire_ == CommType::f32) {
    comm_.reduce_scatter(g, CommType::f32, mine, counts);
    if (!zero1_) comm_.all_gather(mine, g, counts, CommType::f32);
  } else {
    wire_buf_.resize(bk.size());
    for (size_t i = 0; i < bk.size(); ++i) wire_buf_[i] = float_to_bf16(g[i]);
    comm_.reduce_scatter(wire_buf_.data(), CommType::bf16, mine, counts);
    if (!zero1_) {
      uint16_t* w = wire_buf_.data() + (my.begin - bk.begin);
      for (size_t i = 0; i < my.size(); ++i) w[i] = float_to_bf16(mine[i]);
      comm_.all_gather(w, wire_buf_.data(), counts, CommType::bf16);
      for (size_t i = 0; i < bk.size(); ++i) g[i] = bf16_to_float(wire_buf_[i]);
    }
  }
  if (staged) {
    if (zero1_)
      mem_.copy_to_device(grads_ + my.begin, mine, my.size() * sizeof(float));
    else
      mem_.copy_to_device(grads_ + bk.begin, g, bk.size() * sizeof(float));
  }
}

void GradSync::gather_params(float* params) {
  check(zero1_, "gather_params: only with zero1");
  gather(nullptr, params);
}

void GradSync::gather_shard(const float* shard, float* full) { gather(shard, full); }

// shard == nullptr: this rank's chunks are in place in `full`.
void GradSync::gather(const float* shard, float* full) {
  const bool staged = !comm_.device_buffers() && !mem_.host_readable();
  const int64_t bytes0 = comm_.stats().bytes_sent;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Range& bk = buckets_[b];
    const Range& my = mine_[b];
    const float* src = shard ? shard + shard_off_[b] : full + my.begin;
    float* dst = full + bk.begin;
    if (staged) {  // a device without a device communicator: through host memory
      host_buf_.resize(bk.size());
      mem_.copy_to_host(host_buf_.data() + (my.begin - bk.begin), src, my.size() * sizeof(float));
      src = host_buf_.data() + (my.begin - bk.begin);
      dst = host_buf_.data();
    }
    comm_.all_gather(src, dst, counts_[b], CommType::f32);
    if (staged) mem_.copy_to_device(full + bk.begin, host_buf_.data(), bk.size() * sizeof(float));
  }
  stats_.param_bytes_sent += comm_.stats().bytes_sent - bytes0;
}

}  // namespace gt::dist
