// run/metrics_jsonl.cpp: see metrics_jsonl.h.
#include "run/metrics_jsonl.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "run/fields.h"

namespace gt::run {

std::optional<MetricsRow> read_metrics_line(std::string_view line, std::string* why) {
  const std::optional<nlohmann::json> parsed = detail::parse_object(line, why);
  if (!parsed) return std::nullopt;
  const nlohmann::json& j = *parsed;
  MetricsRow r;
  detail::Fields f(j, "", r.problems);
  r.step = f.integer(key::step);
  r.loss = f.number(key::loss);
  r.lr = f.number(key::lr);
  r.grad_norm = f.number(key::grad_norm);
  r.loss_scale = f.number(key::loss_scale);
  r.skipped = f.boolean(key::skipped);
  r.skipped_steps = f.integer(key::skipped_steps);
  r.step_time_s = f.number(key::step_time_s);
  r.threads = f.integer(key::threads);
  r.tokens_per_s = f.number(key::tokens_per_s);
  r.val_loss = f.number(key::val_loss);
  r.val_bits_per_byte = f.number(key::val_bits_per_byte);
  r.target_reached = f.number(key::target_reached);
  r.energy_interval_tokens = f.number(key::energy_interval_tokens);
  r.energy_j = f.number(key::energy_j);
  r.power_w = f.number(key::power_w);
  r.joules_per_token = f.number(key::joules_per_token);
  r.g_co2e = f.number(key::g_co2e);
  r.gpu_energy_j = f.number(key::gpu_energy_j);
  r.energy_estimated = f.boolean(key::energy_estimated);
  r.energy_unknown_reason = f.text(key::energy_unknown_reason);
  r.power_w_by_domain = f.numbers_by_name(key::power_w_by_domain);
  r.note = f.text(key::note);
  return r;
}

Metrics read_metrics(std::string_view text) {
  Metrics m;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++m.lines;
    if (line.empty()) continue;
    std::string why;
    auto row = read_metrics_line(line, &why);
    if (row && row->step && row->problems.empty()) {
      m.rows.push_back(std::move(*row));
    } else if (m.unreadable++ == 0) {
      m.first_unreadable = m.lines;
    }
  }
  return m;
}

int64_t last_logged_step(std::string_view text) {
  std::string_view last;  // the last non-empty line
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    if (end > pos) last = text.substr(pos, end - pos);
    pos = end + 1;
  }
  if (last.empty()) return -1;
  std::string why;
  const auto row = read_metrics_line(last, &why);
  return row && row->step ? *row->step : -1;
}

}  // namespace gt::run
