#include "train/run_summary.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/bytes_json.h"
#include "core/error.h"
#include "core/json_number.h"
#include "run/resume.h"
#include "run/schema.h"
#include "run/writer.h"

namespace fs = std::filesystem;

namespace gt {
namespace {

namespace key = run::key;

// summary.json's "target": what it took to first reach train.target_loss, or why it was not
// the run's target seconds are wall time: earlier sessions' wall_s (whole) plus this session's
// from its start to the end of the evaluation that reached the target (TargetHit::seconds, the
// figure of the progress line too)
nlohmann::ordered_json target_json(const TrainConfig& c, const RunResult& r,
                                   const std::optional<nlohmann::json>& prev_session) {
  // reached in an earlier session of this run: that session's record stands
  if (prev_session && prev_session->contains(key::target) &&
      (*prev_session)[key::target].value(key::reached, false))
    return (*prev_session)[key::target];
  nlohmann::ordered_json t;
  t[key::target_loss] = c.target_loss;
  t[key::reached] = r.target.has_value();
  const nlohmann::ordered_json null;
  if (!r.target) {
    for (const char* k : {key::step, key::tokens, key::seconds, key::energy_j, key::g_co2e})
      t[k] = null;
    std::string why;
    if (r.best_val_loss)
      why = fmt::format("the validation loss never reached {:g}: best {:.4f} at step {}",
                        c.target_loss, *r.best_val_loss, r.best_val_step);
    else
      why = fmt::format("the validation loss never reached {:g}: no validation pass ran{}",
                        c.target_loss,
                        c.val_fraction > 0 || !c.data_val_path.empty()
                            ? ""
                            : " (no validation split: data.val_fraction = 0)");
    if (r.interrupted_by)
      why += fmt::format("; the run was stopped by signal {} at step {}", r.interrupted_by, r.step);
    else
      why += fmt::format("; the run ended at step {} of {}", r.step, c.max_steps);
    t[key::reason] = why;
    return t;
  }
  const TargetHit& h = *r.target;
  // earlier sessions of a resumed run add their totals (unknown there: unknown here)
  nlohmann::json before = nlohmann::json::object();
  if (prev_session)
    before =
        prev_session->contains(key::run_totals) ? (*prev_session)[key::run_totals] : *prev_session;
  auto plus = [&](const char* name, const nlohmann::json& now) -> nlohmann::ordered_json {
    if (!now.is_number()) return null;
    if (!prev_session) return now;
    if (!before.contains(name) || !before[name].is_number()) return null;
    return before[name].get<double>() + now.get<double>();
  };
  t[key::step] = h.step;
  t[key::tokens] = plus(key::tokens, h.tokens);
  if (t[key::tokens].is_number()) t[key::tokens] = int64_t(t[key::tokens].get<double>() + 0.5);
  t[key::seconds] = h.seconds ? nlohmann::ordered_json(*h.seconds) : null;
  if (!h.seconds)
    t[key::seconds_unknown_reason] =
        before.contains(key::unknown_reason)
            ? before[key::unknown_reason].get<std::string>()
            : std::string(
                  "an earlier session's wall time is unknown (its summary.json has no "
                  "wall_s)");
  t[key::energy_j] = plus(key::energy_j, h.energy.value(key::energy_j, nlohmann::json()));
  t[key::g_co2e] = plus(key::g_co2e, h.energy.value(key::g_co2e, nlohmann::json()));
  t[key::val_loss] = h.val_loss;
  // the joules to target add up earlier sessions': an estimate there makes them one here
  t[key::energy_estimated] = h.energy.value(key::energy_estimated, false) ||
                             (prev_session && before.value(key::energy_estimated, false));
  if (h.energy.contains(key::energy_unknown_reason))
    t[key::energy_unknown_reason] = h.energy[key::energy_unknown_reason];
  else if (!t[key::energy_j].is_number())
    t[key::energy_unknown_reason] = h.energy.empty() ? std::string("no energy meter ran")
                                    : before.contains(key::unknown_reason)
                                        ? before[key::unknown_reason].get<std::string>()
                                        : std::string("an earlier session's energy is unknown");
  t[key::stopped_at_target] = r.stopped_at_target;
  t[key::seconds_basis] =
      "wall time of the run's sessions (loading, steps, evaluations, checkpoints; earlier "
      "sessions whole) up to the end of the evaluation that reached the target";
  return t;
}

// The text of the file at p, or empty when there is none.
std::optional<std::string> read_text(const std::string& p) {
  if (!fs::exists(p)) return std::nullopt;
  std::ifstream f(p, std::ios::binary);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

// Why summary.json's val_loss is null: no evaluation ran in this session.
std::string val_loss_unknown_reason(const TrainConfig& c, const RunResult& r) {
  if (c.val_fraction <= 0 && c.data_val_path.empty())
    return "no validation split (data.val_fraction = 0 and no data.val_path)";
  if (r.interrupted_by)
    return fmt::format(
        "no evaluation ran in this session: stopped by signal {} at step {}, before the first "
        "(train.eval_interval = {}; evaluations run at those steps and at the last)",
        r.interrupted_by, r.step, c.eval_interval);
  if (r.losses.empty())
    return fmt::format("no step ran in this session (train.max_steps = {}), so no evaluation",
                       c.max_steps);
  return "no evaluation ran in this session";
}

}  // namespace

nlohmann::ordered_json RunSummaryWriter::run_totals(const nlohmann::ordered_json& s,
                                                    int64_t start) const {
  nlohmann::ordered_json totals;
  totals[key::sessions] = 1;
  totals[key::first_step] = start;
  for (const char* k : {key::tokens, key::duration_s, key::wall_s, key::energy_j, key::g_co2e})
    if (s.contains(k)) totals[k] = s[k];
  // whether the run's energy is an estimate, at least in part (absent: no meter recorded it)
  if (s.contains(key::energy_estimated)) totals[key::energy_estimated] = s[key::energy_estimated];
  if (!prior_) return totals;
  const auto& pt = (*prior_)[key::run_totals];
  const nlohmann::ordered_json null;
  // unknown (null) there: unknown here
  totals[key::sessions] = pt[key::sessions].is_number()
                              ? nlohmann::ordered_json(pt[key::sessions].get<int64_t>() + 1)
                              : null;
  totals[key::first_step] = pt[key::first_step];
  if (pt.contains(key::tokens))
    totals[key::tokens] = pt[key::tokens].is_number()
                              ? nlohmann::ordered_json(totals[key::tokens].get<int64_t>() +
                                                       pt[key::tokens].get<int64_t>())
                              : null;
  // An unknown (null) figure in any session makes the total unknown, not a partial sum.
  for (const char* k : {key::duration_s, key::wall_s, key::energy_j, key::g_co2e})
    if (totals.contains(k) && pt.contains(k))
      totals[k] = totals[k].is_number() && pt[k].is_number()
                      ? nlohmann::ordered_json(totals[k].get<double>() + pt[k].get<double>())
                      : null;
  // a session written before wall_s existed: the run's wall time is unknown, not this
  // session's alone
  if (!pt.contains(key::wall_s)) totals.erase(key::wall_s);
  // an estimate in any session makes the run's energy one (previous_session gives an older
  // summary's session flag where its run_totals have none)
  if (pt.contains(key::energy_estimated))
    totals[key::energy_estimated] =
        totals.value(key::energy_estimated, false) || pt[key::energy_estimated].get<bool>();
  // an earlier session not accounted for (killed without its summary): said with the totals
  if (pt.contains(key::unknown_reason)) totals[key::unknown_reason] = pt[key::unknown_reason];
  return totals;
}

void RunSummaryWriter::finish(const RunResult& r) {
  const TrainConfig& c = trainer_.config();
  const auto mem = trainer_.model().memory();
  const int64_t tokens_per_step = (int64_t)c.batch_size * c.model.block_size * c.grad_accum_steps;
  nlohmann::ordered_json s;
  s[key::run_dir] = bytes_to_json(dir_);  // any bytes: a Linux path need not be UTF-8
  s[key::step] = r.step;
  s[key::max_steps] = c.max_steps;
  // no step ran in this session (train.max_steps = 0, a signal before the first): unknown, not 0
  s[key::last_loss] =
      r.losses.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(r.last_loss);
  if (r.losses.empty()) s[key::last_loss_unknown_reason] = "no step ran in this session";
  // no evaluation in this session: unknown, not absent nor 0
  s[key::val_loss] = r.val_loss ? nlohmann::ordered_json(*r.val_loss) : nlohmann::ordered_json();
  if (!r.val_loss) s[key::val_loss_unknown_reason] = val_loss_unknown_reason(c, r);
  if (r.val_loss) {
    s[key::val_bits_per_byte] = r.val_bits_per_byte ? nlohmann::ordered_json(*r.val_bits_per_byte)
                                                    : nlohmann::ordered_json();
    if (!r.val_bits_per_byte)
      s[key::val_bits_per_byte_unknown_reason] =
          "pre-tokenized data without a tokenizer: the bytes of the tokens are unknown (set "
          "data.tokenizer to the shards' own: byte, bpe with data.tokenizer_model, or gpt2 with "
          "data.tokenizer_path, as `greentrain prepare` prints them)";
  }
  s[key::tokens] = r.tokens;
  s[key::duration_s] = r.train_time_s;  // optimizer steps only
  // the session's wall time: loading, steps, evaluations, checkpoints (what a scheduler plans)
  s[key::wall_s] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - session_start_).count();
  // no step ran (a run stopped before its first): the speed is unknown, not 0
  if (r.tokens > 0 && r.train_time_s > 0) {
    s[key::tokens_per_s] = r.tokens / r.train_time_s;
  } else {
    s[key::tokens_per_s] = nlohmann::ordered_json();
    s[key::tokens_per_s_unknown_reason] = "no step ran in this session";
  }
  // median step time is robust to the first (warm-up) step and to noise
  if (!r.losses.empty()) {
    s[key::flops_per_token] = gpt_flops_per_token(c.model, c.model.block_size);
  }
  s[key::num_params] = gpt_num_params(c.model);
  s[key::device] = c.device;
  s[key::precision] = to_string(c.precision);
  s[key::recompute] = to_string(c.recompute);
  s[key::fusion] = c.fusion ? "on" : "off";
  s[key::attention] = c.attention;  // train.attention: own | cudnn
  if (c.precision == Precision::fp16) {
    s[key::loss_scale] = r.loss_scale;
    s[key::skipped_steps] = r.skipped_steps;
  }
  s[key::memory_planned_bytes] = mem.total();
  s[key::memory_runtime_bytes] = trainer_.runtime_bytes();
  s[key::memory_load_peak_bytes] = trainer_.load_peak_bytes();
  s[key::memory_peak_rss_bytes] = peak_rss_bytes();
  s[key::interrupted_by_signal] = r.interrupted_by;
  if (!r.dist.is_null()) s[key::dist] = r.dist;
  if (!r.cuda_graph.is_null()) s[key::cuda_graph] = r.cuda_graph;
  if (r.products) {  // what ran the matrix products, and whether emulated
    const ProductPath& p = *r.products;
    nlohmann::ordered_json j;
    j[key::precision] = p.precision;
    j[key::kernel] = p.kernel;
    if (p.kernel != "oneDNN")  // the own kernel's share of the layers' product FLOPs
      j[key::own_share] =
          p.own_share ? nlohmann::ordered_json(*p.own_share) : nlohmann::ordered_json();
    j[key::isa] = p.isa;
    j[key::emulated] = p.emulated;
    if (p.emulated) j[key::emulated_reason] = p.emulated_reason;
    s[key::products] = j;
  }
  if (r.threads) {  // the CPU backend's team (train.thread_policy)
    const ThreadPolicy& t = *r.threads;
    nlohmann::ordered_json j;
    j[key::policy] = t.policy;
    j[key::team] = t.team;
    j[key::threads_at_end] = t.threads;
    j[key::steps_with_fewer] = t.smaller_steps;
    j[key::wait_at_end] = t.yielding ? "sleep" : "spin";
    j[key::steps_waits_sleeping] = t.yield_steps;
    if (!t.yield_unavailable_reason.empty())
      j[key::sleeping_waits_unavailable] = t.yield_unavailable_reason;
    j[key::changes] = t.changes;
    j[key::runqueue_wait_fraction] =
        t.runqueue_wait ? nlohmann::ordered_json(*t.runqueue_wait) : nlohmann::ordered_json();
    if (!t.runqueue_wait) j[key::runqueue_wait_unknown_reason] = t.runqueue_wait_unknown_reason;
    s[key::threads] = j;
  }
  std::printf("\n");
  if (r.val_loss)
    std::printf("validation loss %.4f at step %lld%s\n", *r.val_loss, (long long)r.step,
                r.val_bits_per_byte
                    ? fmt::format(" ({:.4f} bits per byte)", *r.val_bits_per_byte).c_str()
                    : "");
  const size_t planned = mem.total() + trainer_.runtime_bytes(), peak = peak_rss_bytes();
  std::printf(
      "trained %lld steps (%lld tokens) in %.1f s: %s tokens/s; peak memory %s (planned %s = "
      "arenas %s + runtime before allocation %s; peak %+.1f %%; loading the data peaked at "
      "%s)\n",
      (long long)r.losses.size(), (long long)r.tokens, r.train_time_s,
      r.tokens > 0 && r.train_time_s > 0 ? fmt::format("{:.0f}", r.tokens / r.train_time_s).c_str()
                                         : "unknown (no step ran)",
      format_bytes(peak).c_str(), format_bytes(planned).c_str(), format_bytes(mem.total()).c_str(),
      format_bytes(trainer_.runtime_bytes()).c_str(),
      planned ? 100.0 * ((double)peak - (double)planned) / (double)planned : 0.0,
      format_bytes(trainer_.load_peak_bytes()).c_str());
  (void)tokens_per_step;
  nlohmann::json extra;
  if (observer_hook_) observer_hook_(extra);
  for (auto& [k, v] : extra.items()) s[k] = v;
  // The figures above are this session's. run_totals adds up every session of the run
  // (set_prior: the summary.json the previous session left, if that session ended at the step
  // this one started from and no session began after it; else the figures summed over
  // sessions are unknown, with the reason).
  const int64_t start = r.step - (int64_t)r.losses.size();
  s[key::session_start_step] = start;
  // What an interruption costs this run, for `greentrain schedule` (sched/jobs.h): the
  // checkpoint written at the end of this session (on SIGTERM, the one a preemption waits for)
  // and the start-up from the process start to the first step (loading the checkpoint and the
  // data when the session resumed).
  nlohmann::ordered_json in;
  const nlohmann::ordered_json null;
  in[key::checkpoint_write_s] =
      r.checkpoint_write_s ? nlohmann::ordered_json(*r.checkpoint_write_s) : null;
  in[key::restart_s] =
      r.first_step_at
          ? nlohmann::ordered_json(
                std::chrono::duration<double>(*r.first_step_at - session_start_).count())
          : null;
  in[key::restart_resumed] = start > 0;
  if (!r.first_step_at) in[key::seconds_unknown_reason] = "no step ran in this session";
  in[key::checkpoint_write_j] = null;
  in[key::restart_j] = null;
  in[key::energy_unknown_reason] =
      "the energy meter measures the run and its logged intervals, not the checkpoint write or "
      "the start-up on their own";
  s[key::interruption] = in;
  // prior_: the sessions before this one, decided as it started (set_prior), else read now
  if (!prior_set_ && start > 0) {
    std::string note;
    prior_ = run::prior_sessions(read_text(run::path_in(dir_, run::file::summary)), std::nullopt,
                                 start, trainer_.resumed_run_record(), &note);
  }
  const std::optional<nlohmann::json>& prev_session = prior_;
  s[key::run_totals] = run_totals(s, start);
  if (const auto& t = s[key::run_totals]; t.contains(key::unknown_reason))
    std::printf("whole run (steps %s..%lld, %s tokens): time, energy and carbon unknown: %s\n",
                t[key::first_step].is_number()
                    ? std::to_string(t[key::first_step].get<int64_t>()).c_str()
                    : "?",
                (long long)r.step,
                t[key::tokens].is_number() ? std::to_string(t[key::tokens].get<int64_t>()).c_str()
                                           : "unknown",
                t[key::unknown_reason].get<std::string>().c_str());
  if (c.target_loss > 0) {
    const auto t = target_json(c, r, prev_session);
    auto num = [](const nlohmann::ordered_json& v, const char* spec) {
      return v.is_number() ? fmt::format(fmt::runtime(spec), v.get<double>()) : "unknown";
    };
    if (t.value(key::reached, false))
      std::printf(
          "target validation loss %g reached at step %lld: %s tokens, %s s, %s J%s, %s gCO2e\n",
          c.target_loss, (long long)t[key::step].get<int64_t>(),
          num(t[key::tokens], "{:.0f}").c_str(), num(t[key::seconds], "{:.1f}").c_str(),
          num(t[key::energy_j], "{:.4g}").c_str(),
          t.value(key::energy_estimated, false) ? " (estimated)" : "",
          num(t[key::g_co2e], "{:.3g}").c_str());
    else
      std::printf("target validation loss %g not reached: %s\n", c.target_loss,
                  t.value(key::reason, std::string()).c_str());
    s[key::target] = t;
  }
  run::write_summary(dir_, s);
  run::close_session(dir_);  // the session's figures are written: it is accounted for
}

}  // namespace gt
