// train/data_parallel.cpp: the data-parallel strategies of strategy.h: the gradient buckets and
// their communicator, the ZeRO-1 optimizer step over this rank's shard, gathering and
// scattering the sharded AdamW state for checkpoints, and the run summary's "dist" record.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "backend/adam_math.h"
#include "core/error.h"
#include "dist/grad_sync.h"
#include "dist/mpi_comm.h"
#include "train/strategy.h"
#include "train/trainer.h"
#ifdef GT_HAVE_NCCL
#include "dist/nccl_comm.h"
#endif

namespace gt {
namespace {

float* flat(Arena& a) { return static_cast<float*>(a.base()); }
size_t elems(const Arena& a) { return a.bytes() / sizeof(float); }

// Every rank holds AdamW's whole state; the gradients are reduced bucket by bucket while the
// backward goes on (GradSync), then each rank applies the same update.
class DataParallel : public TrainStrategy {
 public:
  DataParallel(StepContext ctx, dist::Communicator& comm) : c_(ctx), comm_(comm) {
    dist::Communicator* grad_comm = &comm_;
    if (!c_.be.host_readable()) {
#ifdef GT_HAVE_NCCL
      dev_comm_ = dist::make_nccl_communicator(comm_, parse_device(c_.be.name()).index,
                                               c_.cfg.dist_timeout_s);
      grad_comm = dev_comm_.get();
#endif
      // without NCCL the gradients go through host memory (GradSync stages them)
    }
    Arena& g = c_.model.grads();
    const float* base = flat(g);
    std::vector<dist::Range> buckets;  // one per group of the backward, in its order
    for (const GPT::GradGroup& gr : c_.model.grad_groups())
      buckets.push_back({static_cast<size_t>(gr.begin - base), static_cast<size_t>(gr.end - base)});
    sync_ = std::make_unique<dist::GradSync>(
        *grad_comm, c_.be, flat(g), elems(g), buckets, c_.cfg.zero == 1,
        c_.cfg.grad_comm == "bf16" ? dist::CommType::bf16 : dist::CommType::f32);
  }

  int rank() const override { return comm_.rank(); }
  int world() const override { return comm_.size(); }

  void begin_last_backward() override {
    // reduce each layer's gradients as soon as they are final
    c_.model.set_grad_ready_hook([this](const GPT::GradGroup& group) {
      // a mark, not a synchronization: the communication thread waits for it (an event on a
      // GPU) while this thread queues the rest of the backward
      sync_->start(sync_->bucket_at(static_cast<size_t>(group.begin - flat(c_.model.grads()))),
                   c_.be.mark_queued());
    });
  }
  void end_last_backward() override { c_.model.set_grad_ready_hook({}); }

  double reduce_step(double loss, const std::atomic<int>& stop_signal) override {
    sync_->wait();
    double sum = loss;  // the mean over ranks; and whether any rank was asked to stop
    comm_.all_reduce(&sum, 1, dist::CommType::f64, dist::ReduceOp::sum);
    double sig = stop_signal.load();
    comm_.all_reduce(&sig, 1, dist::CommType::f64, dist::ReduceOp::max);
    agreed_stop_ = static_cast<int>(sig);
    return sum / world();
  }
  int stop_signal(int) const override { return agreed_stop_; }
  void clear_stop_signal() override { agreed_stop_ = 0; }

  OptimizerResult optimizer_step(float lr, int64_t t, double loss_scale) override {
    return gt::optimizer_step(c_.be, c_.model, adam_, c_.cfg, lr, t, loss_scale);
  }
  std::string nonfinite_state() override {
    return first_nonfinite_state(c_.be, c_.model, c_.m, c_.v);
  }
  void load_checkpoint(const std::string& run_dir) override {
    load_checkpoint_tensors(run_dir, c_.model, &c_.m, &c_.v);
  }
  void save_checkpoint(const std::string& run_dir, const CheckpointState& st) override {
    if (rank() == 0) gt::save_checkpoint(run_dir, c_.model, c_.m, c_.v, st);
    comm_.barrier();  // the checkpoint is on disk when any rank goes on
  }

  double evaluate(const std::vector<int32_t>& val, int B, int T, int eval_steps) override {
    // rank r evaluates batches r, r + N, ...; the sum over ranks
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
    double sum = 0.0;
    for (int i = rank(); i < eval_steps; i += world()) {
      eval_batch(val, B, T, i, inputs.data(), targets.data());
      sum += c_.model.forward(inputs.data(), targets.data(), B, T, /*for_backward=*/false);
    }
    comm_.all_reduce(&sum, 1, dist::CommType::f64, dist::ReduceOp::sum);
    return sum / eval_steps;
  }

  nlohmann::json summary() override;

  /// Plans and allocates AdamW's moments tensor for tensor (ZeRO-1 has its shard instead).
  void allocate_whole_moments() {
    for (auto& s : c_.model.specs()) {
      c_.m.plan(s.name, s.shape);
      c_.v.plan(s.name, s.shape);
    }
    c_.m.allocate(c_.be);
    c_.v.allocate(c_.be);
    adam_ = whole_tensor_pieces(c_.model, c_.m, c_.v, c_.cfg);
  }

 protected:
  StepContext c_;
  dist::Communicator& comm_;                      // host collectives (MPI)
  std::unique_ptr<dist::Communicator> dev_comm_;  // device collectives (NCCL), when any
  std::unique_ptr<dist::GradSync> sync_;
  int agreed_stop_ = 0;  // the largest stop signal any rank had at the end of the last step
  AdamPieces adam_;      // what AdamW updates (this rank's shard under ZeRO-1), built once
};

nlohmann::json DataParallel::summary() {
  // per rank: seconds in collectives on the trainer's thread, seconds of the communication
  // thread, its exposed part, bytes sent; gathered to every rank with the node names
  const dist::SyncStats ss = sync_->stats();
  const dist::CommStats cs = comm_.stats();
  const double grad_wait_on_comm = dev_comm_ ? 0.0 : ss.comm_wait_s;  // counted in cs too
  constexpr int kVals = 6;
  std::vector<double> mine = {cs.wait_s - grad_wait_on_comm + ss.exposed_s,
                              ss.comm_s,
                              ss.exposed_s,
                              double(ss.grad_bytes_sent),
                              double(ss.param_bytes_sent),
                              double(cs.bytes_sent - (dev_comm_ ? 0 : ss.grad_bytes_sent))};
  std::vector<double> all(kVals * world());
  std::vector<size_t> counts(world(), kVals);
  std::memcpy(all.data() + kVals * rank(), mine.data(), sizeof(double) * kVals);
  comm_.all_gather(all.data() + kVals * rank(), all.data(), counts, dist::CommType::f64);
  const std::vector<std::string> names = dist::gather_node_names(comm_);
  nlohmann::ordered_json d;
  d["ranks"] = world();
  d["communicator"] = comm_.name();
  d["grad_communicator"] = dev_comm_ ? dev_comm_->name() : comm_.name();
  d["zero"] = c_.cfg.zero;
  d["grad_comm"] = c_.cfg.grad_comm;
  d["buckets"] = sync_->buckets().size();
  const int64_t steps = std::max<int64_t>(ss.buckets / (int64_t)sync_->buckets().size(), 1);
  d["steps_measured"] = ss.buckets / (int64_t)sync_->buckets().size();
  const double grad_bytes = double(elems(c_.model.grads())) * sizeof(float);
  d["gradient_bytes"] = grad_bytes;
  d["bytes_per_step"] = (ss.grad_bytes_sent + ss.param_bytes_sent) / double(steps);
  d["ring_allreduce_bytes_per_step"] = 2.0 * (world() - 1) / world() * grad_bytes;
  nlohmann::ordered_json per = nlohmann::ordered_json::array();
  for (int r = 0; r < world(); ++r) {
    const double* v = all.data() + kVals * r;
    nlohmann::ordered_json e;
    e["rank"] = r;
    e["node"] = names[r];
    e["collective_wait_s"] = v[0];
    e["grad_comm_s"] = v[1];
    e["grad_comm_exposed_s"] = v[2];
    e["hidden_fraction"] =
        v[1] > 0 ? nlohmann::json(std::clamp(1.0 - v[2] / v[1], 0.0, 1.0)) : nlohmann::json();
    e["grad_bytes_sent"] = v[3];
    e["param_bytes_sent"] = v[4];
    e["other_bytes_sent"] = v[5];
    per.push_back(e);
  }
  d["per_rank"] = per;
  return d;
}

// ZeRO-1: rank r keeps the reduced sum of its chunk of each bucket (GradSync with zero1), and
// updates only those elements of the weights and of AdamW's state, which it alone holds (its
// shard); the weights are all-gathered after the update.
class Zero1 final : public DataParallel {
 public:
  Zero1(StepContext ctx, dist::Communicator& comm) : DataParallel(ctx, comm) {
    // this rank's chunk of each bucket, cut at the tensors (AdamW's weight decay is per tensor)
    Arena& g = c_.model.grads();
    const float* base = flat(g);
    for (size_t b = 0; b < sync_->buckets().size(); ++b) {
      const dist::Range my = sync_->chunk(b);
      for (size_t i = 0; i < g.size(); ++i) {  // the tensors my chunk of the bucket holds
        const size_t t0 = static_cast<size_t>(g.at(i).f32() - base);
        const size_t lo = std::max(t0, my.begin),
                     hi = std::min(t0 + static_cast<size_t>(g.at(i).numel()), my.end);
        if (lo < hi) pieces_.push_back({i, {lo, hi}, sync_->shard_offset(b) + (lo - my.begin)});
      }
    }
  }

  void allocate_shard_moments() {
    const int64_t n = (int64_t)std::max<size_t>(sync_->shard_elems(), 1);
    c_.m.plan("shard", {n});
    c_.v.plan("shard", {n});
    c_.m.allocate(c_.be);
    c_.v.allocate(c_.be);
    // the same update as one process's, over this rank's shard
    float *P = flat(c_.model.params()), *G = flat(c_.model.grads());
    float *M = c_.m.at(0).f32(), *V = c_.v.at(0).f32();
    std::vector<AdamPiece> pieces;
    for (auto& pc : pieces_)
      pieces.push_back(
          {P + pc.range.begin, G + pc.range.begin, M + pc.shard_offset, V + pc.shard_offset,
           (int64_t)pc.range.size(),
           c_.model.specs()[pc.tensor].decay ? static_cast<float>(c_.cfg.weight_decay) : 0.0f});
    adam_ = AdamPieces(std::move(pieces));
  }

  OptimizerResult optimizer_step(float lr, int64_t t, double loss_scale) override;
  std::string nonfinite_state() override;
  void load_checkpoint(const std::string& run_dir) override;
  void save_checkpoint(const std::string& run_dir, const CheckpointState& st) override;

 private:
  /// AdamW's whole state, planned tensor for tensor (for checkpoints).
  void plan_full(Arena& mf, Arena& vf) {
    for (auto& s : c_.model.specs()) {
      mf.plan(s.name, s.shape);
      vf.plan(s.name, s.shape);
    }
    mf.allocate(c_.be);
    vf.allocate(c_.be);
  }
  /// This rank's part of the weights: (tensor, element range of the flat buffers, offset in
  /// the shard).
  struct ShardPiece {
    size_t tensor;
    dist::Range range;
    size_t shard_offset;
  };
  std::vector<ShardPiece> pieces_;
};

OptimizerResult Zero1::optimizer_step(float lr, int64_t t, double loss_scale) {
  OptimizerResult r;
  Backend& be = c_.be;
  float *P = flat(c_.model.params()), *G = flat(c_.model.grads());
  double sq = 0.0;
  size_t bad = SIZE_MAX;
  for (auto& pc : pieces_) {
    const double x = be.sum_squares(G + pc.range.begin, (int64_t)pc.range.size());
    if (!std::isfinite(x) && bad == SIZE_MAX) bad = pc.tensor;
    sq += x;
  }
  comm_.all_reduce(&sq, 1, dist::CommType::f64, dist::ReduceOp::sum);
  if (!std::isfinite(sq)) {  // every rank sees it: all skip (fp16) or all stop
    double first = bad == SIZE_MAX ? -1e18 : -double(bad);  // the lowest tensor index of all
    comm_.all_reduce(&first, 1, dist::CommType::f64, dist::ReduceOp::max);
    r.grad_norm = sq;
    r.skipped = true;
    r.nonfinite_tensor = first > -1e17 ? c_.model.specs()[(size_t)(-first)].name : "?";
    return r;
  }
  r.grad_norm = std::sqrt(sq) / loss_scale;
  adamw_apply(be, adam_, adam_grad_mult(sq, loss_scale, c_.cfg.grad_clip), lr, c_.cfg,
              c_.cfg.fusion, t);
  if (!be.host_readable()) be.synchronize();
  sync_->gather_params(P);  // every rank's updated chunks
  be.weights_updated();
  return r;
}

std::string Zero1::nonfinite_state() {
  double x = c_.be.sum_squares(c_.m.at(0).f32(), c_.m.at(0).numel()) +
             c_.be.sum_squares(c_.v.at(0).f32(), c_.v.at(0).numel());
  comm_.all_reduce(&x, 1, dist::CommType::f64, dist::ReduceOp::sum);
  if (!std::isfinite(x)) return "AdamW's moments (exp_avg, exp_avg_sq; sharded over the ranks)";
  Arena& p = c_.model.params();  // the same on every rank after the all-gather
  for (size_t i = 0; i < p.size(); ++i)
    if (!std::isfinite(c_.be.sum_squares(p.at(i).f32(), p.at(i).numel())))
      return fmt::format("parameter '{}'", c_.model.specs()[i].name);
  return {};
}

void Zero1::load_checkpoint(const std::string& run_dir) {
  Arena mf("adamw.exp_avg"), vf("adamw.exp_avg_sq");
  plan_full(mf, vf);
  load_checkpoint_tensors(run_dir, c_.model, &mf, &vf);
  std::vector<unsigned char> stage;
  for (size_t b = 0; b < sync_->buckets().size(); ++b) {
    const dist::Range my = sync_->chunk(b);
    const size_t bytes = my.size() * sizeof(float), off = sync_->shard_offset(b);
    for (auto [full, shard] : {std::pair{&mf, &c_.m}, std::pair{&vf, &c_.v}})
      c_.be.copy_to_device(shard->at(0).f32() + off,
                           c_.be.read_on_host(flat(*full) + my.begin, bytes, stage), bytes);
  }
}

void Zero1::save_checkpoint(const std::string& run_dir, const CheckpointState& st) {
  // the whole AdamW state, gathered from the shards
  Arena mf("adamw.exp_avg"), vf("adamw.exp_avg_sq");
  plan_full(mf, vf);
  if (!c_.be.host_readable()) c_.be.synchronize();
  sync_->gather_shard(c_.m.at(0).f32(), flat(mf));
  sync_->gather_shard(c_.v.at(0).f32(), flat(vf));
  if (rank() == 0) gt::save_checkpoint(run_dir, c_.model, mf, vf, st);
  comm_.barrier();  // the checkpoint is on disk when any rank goes on
}

}  // namespace

std::unique_ptr<TrainStrategy> make_data_parallel(StepContext ctx, dist::Communicator& comm) {
  if (ctx.cfg.zero == 1) {
    auto z = std::make_unique<Zero1>(ctx, comm);
    z->allocate_shard_moments();
    return z;
  }
  auto d = std::make_unique<DataParallel>(ctx, comm);
  d->allocate_whole_moments();
  return d;
}

}  // namespace gt
