// train/resume_plan.h: what resuming a run folder's checkpoint means for this run: its record read
// and reconciled with this run's configuration before the data is loaded (another number of
// ranks, a changed policy, another tokenizer), and the data checked against the checkpoint's
// after (data_identity()). The Trainer (trainer.h) restores the tensors and the position.
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "train/checkpoint.h"
#include "train/config.h"
#include "train/data.h"

namespace gt {

/// The resume of a run (plan_resume()); a fresh run has no state.
struct ResumePlan {
  std::optional<CheckpointState> state;  ///< the checkpoint's record (state.json)
  TrainConfig saved;                     ///< the configuration the checkpoint was trained with
  bool new_tokenizer = false;            ///< another tokenizer (--allow-data-change)
  /// Set when the data or tokenizer changed (--allow-data-change): the note said and kept in
  /// metrics.jsonl; the data position then restarts at the beginning.
  std::string data_note;
};

/// Throws gt::Error naming train.max_steps, the checkpoint's step and run_dir when max_steps is
/// below checkpoint_step (resuming would train no step and overwrite the run's results).
void check_resume_steps(int64_t max_steps, int64_t checkpoint_step, const std::string& run_dir);

/// Reads run_dir's checkpoint record when `resume` and reconciles cfg (this run's
/// configuration) with it: on another number of ranks (world) train.grad_accum_steps is
/// rescaled to keep the global batch when it was left as the checkpoint's (gt::Error when the
/// micro-batches cannot be shared evenly); each changed policy (device, precision, fusion,
/// recompute, rounding, batch) is noted to log (nullptr: silent). Another tokenizer is a
/// gt::Error naming both unless allow_data_change. Throws gt::Error for an unreadable checkpoint
/// and from check_resume_steps.
ResumePlan plan_resume(TrainConfig& cfg, const std::string& run_dir, bool resume, int world,
                       FILE* log, bool allow_data_change);

/// Loads the data of cfg (load_data()) with the checkpoint's tokenizer unless it changed; an
/// error (e.g. a character the checkpoint's tokenizer does not know) names the checkpoint.
TokenData load_resumed_data(const TrainConfig& cfg, const ResumePlan& plan);

/// After the data is loaded (data_id: its data_identity()): other data than the checkpoint's
/// is a gt::Error naming both unless allow_data_change, which sets plan.data_note.
void check_resume_data(ResumePlan& plan, const nlohmann::json& data_id, bool allow_data_change);

}  // namespace gt
