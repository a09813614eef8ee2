// train/dist_train.cpp: the data-parallel parts of the Trainer (trainer.h): the gradient
// buckets and their communicator, the ZeRO-1 optimizer step over this rank's shard, gathering
// and scattering the sharded AdamW state for checkpoints, and the run summary's "dist" record.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "dist/mpi_comm.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#ifdef GT_HAVE_NCCL
#include "dist/nccl_comm.h"
#endif

namespace gt {

namespace {
float* flat(Arena& a) { return static_cast<float*>(a.base()); }
size_t elems(const Arena& a) { return a.bytes() / sizeof(float); }
}  // namespace

void Trainer::setup_dist() {
  if (world_ == 1) return;
  dist::Communicator* grad_comm = comm_;
  if (!backend_->host_readable()) {
#ifdef GT_HAVE_NCCL
    dev_comm_ = dist::make_nccl_communicator(*comm_, parse_device(backend_->name()).index,
                                             cfg_.dist_timeout_s);
    grad_comm = dev_comm_.get();
#endif
    // without NCCL the gradients go through host memory (GradSync stages them)
  }
  Arena& g = model_->grads();
  const float* base = flat(g);
  std::vector<dist::Range> buckets;
  const auto groups = model_->grad_groups();
  for (auto [first, end] : groups)
    buckets.push_back({static_cast<size_t>(g.at(first).f32() - base),
                       static_cast<size_t>(g.at(end - 1).f32() - base) +
                           static_cast<size_t>(g.at(end - 1).numel())});
  sync_ = std::make_unique<dist::GradSync>(
      *grad_comm, *backend_, flat(g), elems(g), buckets, cfg_.zero == 1,
      cfg_.grad_comm == "bf16" ? dist::CommType::bf16 : dist::CommType::f32);
  if (cfg_.zero != 1) return;
  // this rank's chunk of each bucket, cut at the tensors (AdamW's weight decay is per tensor)
  for (size_t b = 0; b < buckets.size(); ++b) {
    const dist::Range my = sync_->chunk(b);
    for (size_t i = groups[b].first; i < groups[b].second; ++i) {
      const size_t t0 = static_cast<size_t>(g.at(i).f32() - base);
      const size_t lo = std::max(t0, my.begin),
                   hi = std::min(t0 + static_cast<size_t>(g.at(i).numel()), my.end);
      if (lo < hi) pieces_.push_back({i, {lo, hi}, sync_->shard_offset(b) + (lo - my.begin)});
    }
  }
  shard_elems_ = sync_->shard_elems();
}

OptimizerResult Trainer::sharded_optimizer_step(float lr, int64_t t, double loss_scale) {
  OptimizerResult r;
  Backend& be = *backend_;
  float *P = flat(model_->params()), *G = flat(model_->grads());
  float *M = m_->at(0).f32(), *V = v_->at(0).f32();
  double sq = 0.0;
  size_t bad = SIZE_MAX;
  for (auto& pc : pieces_) {
    const double x = be.sum_squares(G + pc.range.begin, (int64_t)pc.range.size());
    if (!std::isfinite(x) && bad == SIZE_MAX) bad = pc.tensor;
    sq += x;
  }
  comm_->all_reduce(&sq, 1, dist::CommType::f64, dist::ReduceOp::sum);
  if (!std::isfinite(sq)) {  // every rank sees it: all skip (fp16) or all stop
    double first = bad == SIZE_MAX ? -1e18 : -double(bad);  // the lowest tensor index of all
    comm_->all_reduce(&first, 1, dist::CommType::f64, dist::ReduceOp::max);
    r.grad_norm = sq;
    r.skipped = true;
    r.nonfinite_tensor = first > -1e17 ? model_->specs()[(size_t)(-first)].name : "?";
    return r;
  }
  r.grad_norm = std::sqrt(sq) / loss_scale;
  double mult = 1.0 / loss_scale;
  if (cfg_.grad_clip > 0) {
    const double coef = cfg_.grad_clip / (r.grad_norm + 1e-6);
    if (coef < 1.0) mult *= coef;
  }
  const auto wd = [&](size_t i) {
    return model_->specs()[i].decay ? static_cast<float>(cfg_.weight_decay) : 0.0f;
  };
  const float b1 = static_cast<float>(cfg_.beta1), b2 = static_cast<float>(cfg_.beta2),
              eps = static_cast<float>(cfg_.eps);
  if (cfg_.fusion && !pieces_.empty()) {  // the same update as optimizer_step's, per piece
    const size_t n = pieces_.size();
    std::vector<float*> pp(n), mm(n), vv(n);
    std::vector<const float*> gg(n);
    std::vector<int64_t> cnt(n);
    std::vector<float> w(n);
    for (size_t k = 0; k < n; ++k) {
      const auto& pc = pieces_[k];
      pp[k] = P + pc.range.begin;
      gg[k] = G + pc.range.begin;
      mm[k] = M + pc.shard_offset;
      vv[k] = V + pc.shard_offset;
      cnt[k] = (int64_t)pc.range.size();
      w[k] = wd(pc.tensor);
    }
    be.adamw_fused(pp.data(), gg.data(), mm.data(), vv.data(), cnt.data(), w.data(), (int)n,
                   static_cast<float>(mult), lr, b1, b2, eps, t);
  } else if (!cfg_.fusion) {
    for (auto& pc : pieces_) {
      const int64_t n = (int64_t)pc.range.size();
      if (mult != 1.0) be.scale(G + pc.range.begin, static_cast<float>(mult), n);
      be.adamw_update(P + pc.range.begin, G + pc.range.begin, M + pc.shard_offset,
                      V + pc.shard_offset, n, lr, b1, b2, eps, wd(pc.tensor), t);
    }
  }
  if (!backend_->host_readable()) backend_->synchronize();
  sync_->gather_params(P);  // every rank's updated chunks
  be.weights_updated();
  return r;
}

std::string Trainer::sharded_nonfinite_state() {
  double x = backend_->sum_squares(m_->at(0).f32(), m_->at(0).numel()) +
             backend_->sum_squares(v_->at(0).f32(), v_->at(0).numel());
  comm_->all_reduce(&x, 1, dist::CommType::f64, dist::ReduceOp::sum);
  if (!std::isfinite(x)) return "AdamW's moments (exp_avg, exp_avg_sq; sharded over the ranks)";
  Arena& p = model_->params();  // the same on every rank after the all-gather
  for (size_t i = 0; i < p.size(); ++i)
    if (!std::isfinite(backend_->sum_squares(p.at(i).f32(), p.at(i).numel())))
      return fmt::format("parameter '{}'", model_->specs()[i].name);
  return {};
}

void Trainer::load_sharded_state() {
  Arena mf("adamw.exp_avg"), vf("adamw.exp_avg_sq");
  for (auto& s : model_->specs()) {
    mf.plan(s.name, s.shape);
    vf.plan(s.name, s.shape);
  }
  mf.allocate(*backend_);
  vf.allocate(*backend_);
  load_checkpoint_tensors(run_dir_, *model_, &mf, &vf);
  std::vector<unsigned char> stage;
  for (size_t b = 0; b < sync_->buckets().size(); ++b) {
    const dist::Range my = sync_->chunk(b);
    const size_t bytes = my.size() * sizeof(float), off = sync_->shard_offset(b);
    for (auto [full, shard] : {std::pair{&mf, m_.get()}, std::pair{&vf, v_.get()}})
      backend_->copy_to_device(shard->at(0).f32() + off,
                               backend_->read_on_host(flat(*full) + my.begin, bytes, stage), bytes);
  }
}

void Trainer::gather_sharded_state(Arena& m_full, Arena& v_full) {
  if (!backend_->host_readable()) backend_->synchronize();
  sync_->gather_shard(m_->at(0).f32(), flat(m_full));
  sync_->gather_shard(v_->at(0).f32(), flat(v_full));
}

nlohmann::json Trainer::dist_summary() {
  // per rank: seconds in collectives on the trainer's thread, seconds of the communication
  // thread, its exposed part, bytes sent; gathered to every rank with the node names
  const dist::SyncStats ss = sync_->stats();
  const dist::CommStats cs = comm_->stats();
  const double grad_wait_on_comm = dev_comm_ ? 0.0 : ss.comm_wait_s;  // counted in cs too
  constexpr int kVals = 6;
  std::vector<double> mine = {cs.wait_s - grad_wait_on_comm + ss.exposed_s,
                              ss.comm_s,
                              ss.exposed_s,
                              double(ss.grad_bytes_sent),
                              double(ss.param_bytes_sent),
                              double(cs.bytes_sent - (dev_comm_ ? 0 : ss.grad_bytes_sent))};
  std::vector<double> all(kVals * world_);
  std::vector<size_t> counts(world_, kVals);
  std::memcpy(all.data() + kVals * rank_, mine.data(), sizeof(double) * kVals);
  comm_->all_gather(all.data() + kVals * rank_, all.data(), counts, dist::CommType::f64);
  const std::vector<std::string> names = dist::gather_node_names(*comm_);
  nlohmann::ordered_json d;
  d["ranks"] = world_;
  d["communicator"] = comm_->name();
  d["grad_communicator"] = dev_comm_ ? dev_comm_->name() : comm_->name();
  d["zero"] = cfg_.zero;
  d["grad_comm"] = cfg_.grad_comm;
  d["buckets"] = sync_->buckets().size();
  const int64_t steps = std::max<int64_t>(ss.buckets / (int64_t)sync_->buckets().size(), 1);
  d["steps_measured"] = ss.buckets / (int64_t)sync_->buckets().size();
  const double grad_bytes = double(elems(model_->grads())) * sizeof(float);
  d["gradient_bytes"] = grad_bytes;
  d["bytes_per_step"] = (ss.grad_bytes_sent + ss.param_bytes_sent) / double(steps);
  d["ring_allreduce_bytes_per_step"] = 2.0 * (world_ - 1) / world_ * grad_bytes;
  nlohmann::ordered_json per = nlohmann::ordered_json::array();
  for (int r = 0; r < world_; ++r) {
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

}  // namespace gt
