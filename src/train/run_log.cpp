// train/run_log.cpp: the run log of run_log.h.
#include "train/run_log.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>

#include "run/schema.h"

namespace gt {

RunLog::RunLog(const std::string& run_dir, FILE* log, bool writes_folder) : log_(log) {
  if (writes_folder) metrics_.emplace(run_dir);
}

std::string RunLog::format_duration(double s) {
  if (!(s >= 0) || std::isinf(s)) return "?";
  int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

nlohmann::ordered_json RunLog::record(const StepReport& s) {
  nlohmann::ordered_json rec;
  rec[run::key::step] = s.step;
  rec[run::key::loss] = s.loss;
  rec[run::key::lr] = s.lr;
  rec[run::key::grad_norm] = s.grad_norm;
  if (s.loss_scale) {
    rec[run::key::loss_scale] = *s.loss_scale;
    rec[run::key::skipped] = s.skipped;
    rec[run::key::skipped_steps] = s.skipped_steps;
  }
  rec[run::key::step_time_s] = s.step_time_s;
  if (s.threads.team > 0) rec[run::key::threads] = s.threads.threads;
  rec[run::key::tokens_per_s] = s.tokens / s.step_time_s;
  for (auto& [k, v] : s.extra.items()) rec[k] = v;
  if (s.val_loss) {
    rec[run::key::val_loss] = *s.val_loss;
    rec[run::key::val_bits_per_byte] =
        s.val_bits_per_byte ? nlohmann::json(*s.val_bits_per_byte) : nlohmann::json();
  }
  if (s.target_loss) rec[run::key::target_reached] = *s.target_loss;
  return rec;
}

void RunLog::step(const StepReport& s) {
  if (metrics_) metrics_->append(record(s));
  recent_.push_back(s.step_time_s);
  if (recent_.size() > 20) recent_.erase(recent_.begin());
  double mean_dt = 0;
  for (double x : recent_) mean_dt += x;
  mean_dt /= recent_.size();
  // the line's window: the energy interval its W and J/token cover, else the steps since the
  // last line that stayed (this one included)
  since_tokens_ += s.tokens;
  since_s_ += s.step_time_s;
  ++since_steps_;
  const bool energy_window = s.energy.window_s > 0 && s.energy.window_steps > 0;
  const double window_s = energy_window ? s.energy.window_s : since_s_;
  const double window_tokens =
      energy_window ? static_cast<double>(s.energy.window_tokens) : since_tokens_;
  const double window_steps =
      static_cast<double>(energy_window ? s.energy.window_steps : since_steps_);
  if (s.final_line) {
    since_tokens_ = since_s_ = 0;
    since_steps_ = 0;
  }
  std::string val_text;
  if (s.val_loss) {
    val_text = fmt::format(" | val {:.4f}", *s.val_loss);
    if (s.val_bits_per_byte) val_text += fmt::format(" ({:.3f} bits/byte)", *s.val_bits_per_byte);
  }
  if (s.target_loss)
    val_text +=
        fmt::format(" | TARGET {:g} reached ({:.1f} s, {})", *s.target_loss, s.target_s,
                    s.target_energy_j ? fmt::format("{:.4g} J{}", *s.target_energy_j,
                                                    s.target_energy_estimated ? " estimated" : "")
                                      : std::string("energy unknown"));
  print(fmt::format(
            "step {:>5}/{} | loss {:.4f}{}{} | lr {:.2e} | {:.0f} tok/s | {:.0f} ms/step{}{} | "
            "ETA {}",
            s.step, s.max_steps, s.loss, val_text,
            s.skipped ? fmt::format(" | SKIPPED (inf/NaN gradients), loss scale now {:g}",
                                    s.loss_scale.value_or(1.0))
                      : "",
            s.lr, window_tokens / window_s, window_s / window_steps * 1000,
            s.threads.threads < s.threads.team
                ? fmt::format(" | {} of {} threads (cores busy)", s.threads.threads, s.threads.team)
            : s.threads.yielding
                ? fmt::format(" | {} threads, waits sleeping (cores busy)", s.threads.threads)
                : "",
            s.energy.text.empty() ? "" : " | " + s.energy.text,
            format_duration(mean_dt * (s.last - s.step))),
        s.final_line);
}

void RunLog::print(const std::string& line, bool final_line) {
  if (!log_) return;
  static const bool tty = isatty(fileno(log_));
  if (tty) {
    std::fprintf(log_, "\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
  } else if (final_line) {
    std::fprintf(log_, "%s\n", line.c_str());
  }
  std::fflush(log_);
}

}  // namespace gt
