// run/schema.h: the run folder's schema, defined once: the names of its files, the schema
// version, and the keys of summary.json and of metrics.jsonl's lines. `greentrain train` writes
// them (train/trainer.cpp, train/run_summary.cpp, train/energy_hook.cpp through run/writer.h);
// report, ablate and sched read them through run/summary.h and run/metrics_jsonl.h, never by keys
// of their own.
//
// A run folder (DESIGN.md, module run):
//   config.toml    the resolved configuration of the run
//   metrics.jsonl  one JSON object per logged step (MetricsRow, run/metrics_jsonl.h), appended
//   energy.csv     CodeCarbon's columns, one row per session (energy/emissions_csv.h)
//   summary.json   this session's figures, run_totals over resumed sessions, the energy to a
//                  target loss, interruption costs (Summary, run/summary.h)
//   report.html    `greentrain report` of the folder
//   checkpoint/    the checkpoint a resumed run continues from (train/checkpoint.h)
//   session_open.json  while a session trains: {"session", "session_start_step", "pid"};
//                  removed once its summary.json is written, so a resume that finds one knows
//                  that session ended without its figures (killed: SIGKILL, out of memory)
#pragma once
#include <string>

namespace gt::run {

/// The version of the schema below, written as summary.json's "schema_version". A summary.json
/// without one was written before the key existed: version 1, which is this schema (the keys
/// below were all written then). Bump it when a key changes meaning or type, and teach the
/// readers the older version.
inline constexpr int kSchemaVersion = 1;

/// The files of a run folder.
namespace file {
inline constexpr char config[] = "config.toml";
inline constexpr char metrics[] = "metrics.jsonl";
inline constexpr char energy[] = "energy.csv";
inline constexpr char summary[] = "summary.json";
inline constexpr char report[] = "report.html";
inline constexpr char checkpoint[] = "checkpoint";
inline constexpr char session_open[] = "session_open.json";
}  // namespace file

/// An ablation row's energy basis where its J/token and tokens/s come from the logged training
/// intervals (ablate/runner.h AblationRow::energy_basis; otherwise the whole run's), as the
/// ablation table writes it and the report reads it.
inline constexpr char kTrainingIntervalsBasis[] = "training intervals";

/// `dir`/`name` (a plain join: "runs/a" + "summary.json" -> "runs/a/summary.json").
std::string path_in(const std::string& dir, const char* name);

/// A key of a run folder's file that holds another type than the schema says, as the readers
/// (run/summary.h, run/metrics_jsonl.h) name it; the figure reads as unknown.
struct Problem {
  std::string key;   ///< its path: "energy_estimated", "target.reached", "run_totals.wall_s"
  std::string text;  ///< "target.reached is string; expected true or false"
};

/// The keys of summary.json and metrics.jsonl. One constant per key; a key both files hold
/// (step, energy_j, ...) means the same figure in the same unit in both: the session's (summary)
/// or the logged interval's (metrics line). Units are in the names (_s, _j, _w, _bytes).
namespace key {
// summary.json: the session
inline constexpr char schema_version[] = "schema_version";
inline constexpr char run_dir[] = "run_dir";  // core/bytes_json.h form: any bytes of a path
inline constexpr char step[] = "step";        // the last step (metrics: the line's step)
inline constexpr char max_steps[] = "max_steps";
inline constexpr char last_loss[] = "last_loss";  // null when no step ran in the session
inline constexpr char last_loss_unknown_reason[] = "last_loss_unknown_reason";
inline constexpr char val_loss_unknown_reason[] = "val_loss_unknown_reason";
inline constexpr char val_loss[] = "val_loss";
inline constexpr char val_bits_per_byte[] = "val_bits_per_byte";
inline constexpr char val_bits_per_byte_unknown_reason[] = "val_bits_per_byte_unknown_reason";
inline constexpr char tokens[] = "tokens";
inline constexpr char duration_s[] = "duration_s";  // optimizer steps only
inline constexpr char wall_s[] = "wall_s";          // loading, steps, evaluations, checkpoints
inline constexpr char tokens_per_s[] = "tokens_per_s";
inline constexpr char tokens_per_s_unknown_reason[] = "tokens_per_s_unknown_reason";
inline constexpr char flops_per_token[] = "flops_per_token";
inline constexpr char num_params[] = "num_params";
inline constexpr char device[] = "device";
inline constexpr char precision[] = "precision";
inline constexpr char recompute[] = "recompute";
inline constexpr char fusion[] = "fusion";
inline constexpr char cuda_graph[] = "cuda_graph";
inline constexpr char attention[] = "attention";
inline constexpr char loss_scale[] = "loss_scale";
inline constexpr char skipped_steps[] = "skipped_steps";
inline constexpr char memory_planned_bytes[] = "memory_planned_bytes";
inline constexpr char memory_runtime_bytes[] = "memory_runtime_bytes";
inline constexpr char memory_load_peak_bytes[] = "memory_load_peak_bytes";
inline constexpr char memory_peak_rss_bytes[] = "memory_peak_rss_bytes";
inline constexpr char interrupted_by_signal[] = "interrupted_by_signal";
inline constexpr char dist[] = "dist";        // train/data_parallel.cpp's record
inline constexpr char threads[] = "threads";  // summary: the CPU team's record; metrics: count
inline constexpr char session_start_step[] = "session_start_step";
inline constexpr char power_limit[] = "power_limit";  // train/power_limit_policy.h's record:
inline constexpr char requested_w[] = "requested_w";  //   the limit asked for, W
inline constexpr char applied[] = "applied";          //   whether it was set (else "reason")
// summary.json: "products", what ran the matrix products (backend.h ProductPath)
inline constexpr char products[] = "products";
inline constexpr char kernel[] = "kernel";
inline constexpr char own_share[] = "own_kernel_flop_share";  // null: no product ran
inline constexpr char isa[] = "isa";
inline constexpr char emulated[] = "emulated";
inline constexpr char emulated_reason[] = "emulated_reason";
// summary.json: "threads", the CPU backend's team (train.thread_policy)
inline constexpr char policy[] = "policy";
inline constexpr char team[] = "team";
inline constexpr char threads_at_end[] = "threads_at_end";
inline constexpr char steps_with_fewer[] = "steps_with_fewer";
inline constexpr char wait_at_end[] = "wait_at_end";  // "spin" or "sleep" (parked threads)
inline constexpr char steps_waits_sleeping[] = "steps_waits_sleeping";
inline constexpr char sleeping_waits_unavailable[] = "sleeping_waits_unavailable";  // reason
inline constexpr char changes[] = "changes";
inline constexpr char runqueue_wait_fraction[] = "runqueue_wait_fraction";
inline constexpr char runqueue_wait_unknown_reason[] = "runqueue_wait_unknown_reason";
// summary.json: the energy of the session (train/energy_hook.h); also on metrics lines
inline constexpr char energy_j[] = "energy_j";
inline constexpr char power_w[] = "power_w";
inline constexpr char joules_per_token[] = "joules_per_token";
inline constexpr char g_co2e[] = "g_co2e";
inline constexpr char carbon_g_per_kwh[] = "carbon_g_per_kwh";
inline constexpr char carbon_origin[] = "carbon_origin";
inline constexpr char carbon_source[] = "carbon_source";
inline constexpr char gpu_energy_j[] = "gpu_energy_j";
inline constexpr char gpu_joules_per_token[] = "gpu_joules_per_token";
inline constexpr char gpu_energy_unknown_reason[] = "gpu_energy_unknown_reason";
inline constexpr char energy_estimated[] = "energy_estimated";
inline constexpr char energy_unknown_reason[] = "energy_unknown_reason";
inline constexpr char energy_flags[] = "energy_flags";
inline constexpr char energy_nodes[] = "energy_nodes";  // [{node, ranks, energy_j, estimated}]
inline constexpr char node[] = "node";
inline constexpr char ranks[] = "ranks";
inline constexpr char estimated[] = "estimated";
inline constexpr char power_scope[] = "power_scope";
inline constexpr char energy_unknown[] = "energy_unknown";
inline constexpr char tokens_per_joule[] = "tokens_per_joule";
inline constexpr char gflops_per_watt[] = "gflops_per_watt";
inline constexpr char efficiency_unknown_reason[] = "efficiency_unknown_reason";
inline constexpr char energy_method[] = "energy_method";
inline constexpr char energy[] = "energy";  // energy::to_json of the run's window
inline constexpr char flags[] = "flags";    // energy.flags: the meter's flags
// summary.json: "interruption", what an interruption costs (sched/jobs.h reads it)
inline constexpr char interruption[] = "interruption";
inline constexpr char checkpoint_write_s[] = "checkpoint_write_s";
inline constexpr char restart_s[] = "restart_s";
inline constexpr char restart_resumed[] = "restart_resumed";
inline constexpr char seconds_unknown_reason[] = "seconds_unknown_reason";
inline constexpr char checkpoint_write_j[] = "checkpoint_write_j";
inline constexpr char restart_j[] = "restart_j";
// summary.json: "run_totals", every session of a resumed run added up: sessions, first_step,
// tokens, duration_s, wall_s, energy_j, g_co2e (unknown in any session: null), and
// energy_estimated, true when any session's energy was an estimate (energy_j and g_co2e are
// then estimates at least in part). A run_totals without energy_estimated (written before the
// key existed) leaves it unknown: readers (Summary::run_energy_estimated) and a resumed run
// take the session's energy_estimated in its stead, which covers the last session only.
// When an earlier session is not accounted for (it ended without its summary.json: killed,
// out of memory, node lost), every figure summed over sessions is null and unknown_reason says
// which session and why; tokens stay known from the checkpoint's "run" record
// (train/checkpoint.h), sessions and first_step too where it has them (else null).
inline constexpr char run_totals[] = "run_totals";
inline constexpr char sessions[] = "sessions";
inline constexpr char first_step[] = "first_step";
inline constexpr char unknown_reason[] = "unknown_reason";
// session_open.json (and a checkpoint's "run" record): the session's number in its run, from 1
inline constexpr char session[] = "session";
inline constexpr char pid[] = "pid";
// summary.json: "target", what it took to first reach train.target_loss
inline constexpr char target[] = "target";
inline constexpr char target_loss[] = "target_loss";
inline constexpr char reached[] = "reached";
inline constexpr char seconds[] = "seconds";
inline constexpr char reason[] = "reason";
inline constexpr char stopped_at_target[] = "stopped_at_target";
inline constexpr char seconds_basis[] = "seconds_basis";
// metrics.jsonl: one logged step
inline constexpr char loss[] = "loss";
inline constexpr char lr[] = "lr";
inline constexpr char grad_norm[] = "grad_norm";
inline constexpr char skipped[] = "skipped";
inline constexpr char step_time_s[] = "step_time_s";
inline constexpr char energy_interval_tokens[] = "energy_interval_tokens";
inline constexpr char energy_interval_s[] = "energy_interval_s";
inline constexpr char power_w_by_domain[] = "power_w_by_domain";
inline constexpr char power_estimated_domains[] = "power_estimated_domains";
inline constexpr char target_reached[] = "target_reached";
// metrics.jsonl: a note line (a resumed run whose data changed)
inline constexpr char note[] = "note";
inline constexpr char data_was[] = "data_was";
inline constexpr char data_now[] = "data_now";
}  // namespace key

}  // namespace gt::run
