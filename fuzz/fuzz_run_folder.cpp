// fuzz/fuzz_run_folder.cpp: every file greentrain reads back from its own run folders and
// records, on any bytes. The first byte picks the file:
//   0 checkpoint/state.json: the resume's reader, its data identity (paths in either form of
//     core/bytes_json.h) and saved configuration, and the record written back from it;
//   1 summary.json: the run folder's reader (run/summary.h) and the previous session's run totals
//     a resumed run adds to (run/resume.h);
//   2 metrics.jsonl: the run folder's reader (run/metrics_jsonl.h) and the lines a resumed run
//   keeps; 3 a run folder for the report: the rest split at 0xff bytes into metrics.jsonl,
//   summary.json
//     and config.toml, read by report::read_run and rendered;
//   4 a `greentrain tune` power profile, reused by the search (on a simulated device);
//   5 a `schedule --submit` record of the sbatch calls already made (sched/slurm.h);
//   6 ablation.json of an `ablate` folder, read by the report.
#include <filesystem>

#include "core/bytes_json.h"
#include "fuzz/fuzz_util.h"
#include "report/report.h"
#include "run/metrics_jsonl.h"
#include "run/resume.h"
#include "run/summary.h"
#include "sched/slurm.h"
#include "train/checkpoint.h"
#include "tune/simulated.h"
#include "tune/tuner.h"

namespace {

using namespace gt;

void state_json(const std::string& text) {
  CheckpointState st = parse_checkpoint_state(text, "state.json");
  if (!st.data.is_null()) {
    (void)describe_data(st.data);
    (void)same_data(st.data, st.data);
    for (const char* k : {"path", "val_path"})
      if (st.data.contains(k)) (void)bytes_from_json(st.data[k], k);
  }
  TrainConfig cfg;
  load_config_string(st.config_toml, "state.json: config_toml", cfg);
  // what was read back is written again as a later checkpoint writes it, and read once more
  st.config_toml = cfg.to_toml();
  const std::string again = checkpoint_state_json(st, "state.json");
  (void)parse_checkpoint_state(again, "state.json (written again)");
}

void report_folder(std::string_view in) {
  const std::string dir = (fuzz::scratch_dir() / "run").string();
  std::string_view parts[3];
  for (auto& p : parts) {
    const size_t cut = in.find('\xff');
    p = in.substr(0, cut);
    in = cut == std::string_view::npos ? std::string_view() : in.substr(cut + 1);
  }
  fuzz::write_file("run/metrics.jsonl", parts[0]);
  fuzz::write_file("run/summary.json", parts[1]);
  fuzz::write_file("run/config.toml", parts[2]);
  const report::RunData run = report::read_run(dir);
  (void)report::render_html({run}, nullptr, "");
}

void tune_profile(std::string_view in) {
  const std::string path = fuzz::write_file("profile.json", in);
  tune::SimulatedModel model;
  auto dev = std::make_shared<tune::SimulatedDevice>(model, "sim:0");
  tune::TuneOptions opt;
  opt.profile_path = path;
  opt.step_w = 100;  // few candidates: a profile that does not match is searched quickly
  opt.warmup_steps = 0;
  opt.profile_steps = 1;
  (void)tune::tune_power_limit({dev}, tune::simulated_profile({dev}), opt);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const uint8_t kind = fuzz::take_byte(in) % 7;
  const std::string text(in);
  fuzz::expect_errors([&] {
    switch (kind) {
      case 0:
        state_json(text);
        break;
      case 1: {
        std::string why;
        if (auto s = run::read_summary(text, &why)) {
          (void)s->problem_with(run::key::energy_unknown);
          if (s->target) (void)dump_json(s->target->raw);
        }
        auto prev = run::previous_session(text, 4, &why);
        if (prev) (void)dump_json(*prev);
        break;
      }
      case 2:
        (void)run::read_metrics(text);
        (void)run::last_logged_step(text);
        (void)run::metrics_lines_up_to(text, 4);
        break;
      case 3:
        report_folder(in);
        break;
      case 4:
        tune_profile(in);
        break;
      case 5:
        (void)sched::read_submission_record(fuzz::write_file("jobs.toml.submitted.json", in));
        break;
      default: {
        fuzz::write_file("abl/ablation.json", in);
        std::vector<report::RunData> rows;
        const auto abl = report::read_ablation((fuzz::scratch_dir() / "abl").string(), rows);
        (void)report::render_html(rows, &abl, "");
      }
    }
  });
  return 0;
}
