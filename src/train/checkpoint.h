// train/checkpoint.h: a checkpoint is a folder RUN_DIR/checkpoint holding
//   model.safetensors      parameters, Hugging Face GPT-2 names and layouts;
//   optimizer.safetensors  AdamW first and second moments ("exp_avg.<name>", "exp_avg_sq.<name>");
//   config.json            the model's shapes as Hugging Face's GPT2Config (train/hf_gpt2.h);
//   state.json             step, data position, seed, tokenizer, full configuration (TOML),
//                          the size and XXH64 checksum of each .safetensors file ("files"),
//                          and the run up to its step ("run": session, first_step, tokens);
//   tokenizer.model        a bpe tokenizer's SentencePiece model, or
//   vocab.json, merges.txt a gpt2 tokenizer's vocabulary (train/tokenizer.h).
// It is written into a temporary folder that is then renamed over the old one, so a crash
// never leaves a half-written checkpoint in place. A tensor file whose size or checksum differs
// from state.json's record is refused as damaged when it is loaded; a checkpoint written before
// checksums were recorded loads unchecked, with a note.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "core/arena.h"
#include "model/gpt.h"
#include "train/config.h"
#include "train/data.h"

namespace gt {

/// What state.json records of one file of the checkpoint, to find it damaged when loaded.
struct FileChecksum {
  uint64_t bytes = 0;
  std::string xxh64;  ///< XXH64 (seed 0) of the whole file, 16 lower-case hex digits
};

/// Everything besides tensors that a checkpoint stores.
struct CheckpointState {
  int64_t step = 0;        ///< optimizer steps completed
  int64_t data_epoch = 0;  ///< BatchSampler position
  int64_t data_cursor = 0;
  double last_loss = 0;   ///< training loss of the last step (state.json: null at step 0)
  double loss_scale = 1;  ///< fp16 GradScaler state (train/precision.h)
  int64_t scaler_clean_steps = 0;
  int64_t skipped_steps = 0;  ///< steps skipped for inf/NaN gradients (fp16)
  int world_size = 1;         ///< ranks of the data-parallel job that wrote it
  std::string config_toml;    ///< the full resolved configuration
  Tokenizer tokenizer;
  /// What the run was trained on (data_identity() in train/data.h); null in a checkpoint
  /// written before it was recorded.
  nlohmann::json data;
  /// model.safetensors and optimizer.safetensors as written (set by save_checkpoint); empty in
  /// a checkpoint written before they were recorded.
  std::map<std::string, FileChecksum> files;
  /// The run up to this step, so that a resume after a session killed without its summary
  /// still knows it: {"session" (the writer's number in its run, from 1), "first_step" (the
  /// run's first session's start), "tokens" (trained in steps first_step+1..step, all sessions
  /// together)}, each a whole number or null (unknown); null in a checkpoint written before it
  /// was recorded.
  nlohmann::json run;
};

/// Path of the checkpoint folder inside a run folder.
std::string checkpoint_dir(const std::string& run_dir);
/// True when run_dir holds a checkpoint (or the previous one kept during a rename).
bool has_checkpoint(const std::string& run_dir);

/// Removes the temporary folders `checkpoint.tmp-PID` (save_checkpoint's) that a writer killed
/// mid-write (SIGKILL, a node lost) left in run_dir, when process PID is not running on this
/// host; a running writer's is left alone. Returns a one-line note naming those removed
/// ("removed checkpoint.tmp-123 in RUN_DIR, left by a checkpoint write that was killed"), empty
/// when none was (or run_dir does not exist). One that cannot be removed is said on stderr.
std::string remove_stale_checkpoint_temporaries(const std::string& run_dir);

/// Writes the checkpoint atomically (temporary folder, then rename), with state.json's "files"
/// record of the tensor files (st.files is ignored). m and v are the AdamW
/// moment arenas with the same tensors as model.params(). Throws gt::Error on I/O failure, and
/// before writing anything when a tensor holds inf or NaN (naming it; the checkpoint already
/// on disk is left as it was).
void save_checkpoint(const std::string& run_dir, GPT& model, const Arena& m, const Arena& v,
                     const CheckpointState& st);
/// The text of state.json for `st`, written to `path` (named in errors). Throws gt::Error naming
/// it when a field cannot be written (a string that is not UTF-8: paths go through
/// core/bytes_json.h so that none is). The trainer calls it before the first step, so a record
/// that could not be written is found before any training, never after it.
std::string checkpoint_state_json(const CheckpointState& st, const std::string& path);
/// Reads state.json only. Throws gt::Error naming the file when it is missing or invalid.
CheckpointState load_checkpoint_state(const std::string& run_dir);
/// Parses the text of a state.json; `path` names it in errors. Throws gt::Error naming the file
/// and the key when it is not valid JSON or a key is missing or of the wrong type. `dir`: the
/// checkpoint folder, where bpe and gpt2 tokenizers read their files.
CheckpointState parse_checkpoint_state(const std::string& text, const std::string& path,
                                       const std::string& dir = "");
/// Loads parameters (and, when m and v are not null, AdamW moments) into an allocated model.
/// Each file is first checked against state.json's record: a size or XXH64 checksum that
/// differs is a gt::Error naming the file as damaged, with the recorded and the found values
/// (no record: a note on stderr, read unchecked).
/// Throws gt::Error naming the file and tensor when one is missing, truncated, misshapen or
/// holds inf or NaN, or when the file holds a tensor the model does not have (an lm_head.weight
/// equal to wte.weight, the tied output layer, is accepted). Names that carry a prefix other
/// tools write (_orig_mod. from torch.compile, module. from DDP, transformer. from Hugging Face)
/// are read without it, with a note on stderr; another prefix is named in the error.
void load_checkpoint_tensors(const std::string& run_dir, GPT& model, Arena* m, Arena* v);
/// Loads the parameters of one safetensors file (a checkpoint's or a Hugging Face folder's
/// model.safetensors) into an allocated model, with the checks of load_checkpoint_tensors.
void load_parameters(const std::string& path, GPT& model);

}  // namespace gt
