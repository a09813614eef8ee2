#include "train/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/bytes_json.h"
#include "core/error.h"
#include "core/xxhash64.h"
#include "train/hf_gpt2.h"
#include "train/safetensors.h"

namespace fs = std::filesystem;

namespace gt {
namespace {

// save_checkpoint writes into "<checkpoint folder>.tmp-<pid>" before renaming it in.
constexpr const char* kTmpInfix = ".tmp-";

std::string resolve_dir(const std::string& run_dir) {
  std::string d = checkpoint_dir(run_dir);
  if (fs::exists(fs::path(d) / "state.json")) return d;
  // a crash between the two renames of save_checkpoint leaves only the previous one
  std::string old = d + ".old";
  if (fs::exists(fs::path(old) / "state.json")) return old;
  throw Error(fmt::format("{}: no checkpoint (expected {}/state.json)", run_dir, d));
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
  f.flush();
  if (!f) throw Error(fmt::format("{}: write failed", p.string()));
}

// Prefixes other tools put before the model's names: torch.compile's wrapper, DDP's, and
// Hugging Face's GPT2LMHeadModel (its body is `transformer`).
constexpr const char* kKnownPrefixes[] = {"_orig_mod.", "module.", "transformer."};

// The prefix before the model's names in `f` ("" when they have none), found from where
// `anchor` (e.g. "wte.weight") sits. A prefix made of known ones is accepted with a note; any
// other is an error that names it. Without the anchor at all: "" (read() then names it).
std::string name_prefix(const SafetensorsFile& f, const std::string& anchor) {
  if (f.has(anchor)) return "";
  for (const auto& n : f.names()) {
    if (n.size() <= anchor.size() || n.compare(n.size() - anchor.size(), anchor.size(), anchor))
      continue;
    const std::string prefix = n.substr(0, n.size() - anchor.size());
    if (prefix.back() != '.') continue;
    std::string rest = prefix;
    for (bool stripped = true; stripped && !rest.empty();) {
      stripped = false;
      for (const char* k : kKnownPrefixes)
        if (rest.rfind(k, 0) == 0) {
          rest.erase(0, std::strlen(k));
          stripped = true;
        }
    }
    if (!rest.empty())
      throw Error(fmt::format(
          "{}: tensor '{}' is missing; the file has '{}', whose prefix '{}' is not one that "
          "greentrain knows (_orig_mod. from torch.compile, module. from DDP, transformer. from "
          "Hugging Face)",
          f.path(), anchor, n, prefix));
    std::fprintf(stderr,
                 "greentrain: note: %s: tensor names carry the prefix '%s'; read without it\n",
                 f.path().c_str(), prefix.c_str());
    return prefix;
  }
  return "";
}

// Every tensor of `f` must be one of `expected` (already read): an extra or unknown one is an
// error naming it, except an lm_head.weight that equals wte.weight bit for bit (the tied output
// embedding, as torch.save of a GPT2LMHeadModel's state_dict writes it).
void check_no_extra(const SafetensorsFile& f, const std::set<std::string>& expected,
                    const std::string& prefix, const std::vector<float>* wte,
                    const Shape* wte_shape) {
  std::vector<std::string> extra;
  for (const auto& n : f.names()) {
    if (expected.count(n)) continue;
    if (wte && (n == prefix + "lm_head.weight" || n == "lm_head.weight")) {
      std::vector<float> head(wte->size());
      bool same = false;
      try {
        f.read(n, *wte_shape, head.data());
        same = std::memcmp(head.data(), wte->data(), head.size() * sizeof(float)) == 0;
      } catch (const Error&) {
      }
      if (same) continue;
    }
    extra.push_back("'" + n + "'");
  }
  if (extra.empty()) return;
  std::string list;
  for (size_t i = 0; i < extra.size() && i < 8; ++i) list += (i ? ", " : "") + extra[i];
  if (extra.size() > 8) list += fmt::format(" and {} more", extra.size() - 8);
  throw Error(fmt::format(
      "{}: {} tensor{} that this model does not have: {} (the model's output layer is tied to "
      "wte.weight; a checkpoint must hold exactly the model's tensors)",
      f.path(), extra.size(), extra.size() == 1 ? "" : "s", list));
}

// Reads one tensor into host memory, checks it is finite, and copies it to the device.
void load_tensor(const SafetensorsFile& f, const std::string& name, const Shape& shape,
                 const Tensor& dst, Backend& be, std::vector<float>& host) {
  host.resize(shape.numel());
  f.read(name, shape, host.data());
  for (size_t k = 0; k < host.size(); ++k)
    if (!std::isfinite(host[k]))
      throw Error(fmt::format("{}: tensor '{}' holds {} at element {}; expected finite values",
                              f.path(), name, host[k], k));
  be.upload(dst, host.data());
}

// The tensor files whose size and checksum state.json records.
constexpr const char* kCheckedFiles[] = {"model.safetensors", "optimizer.safetensors"};

// Checks dir/name against state.json's record (`state` names it) before it is read: a size or
// XXH64 checksum that differs is an error naming the file as damaged. A file without a record,
// or missing (its reader then names it), is left to the reader.
void verify_file(const fs::path& dir, const char* name, const CheckpointState& st,
                 const std::string& state) {
  const auto it = st.files.find(name);
  const fs::path p = dir / name;
  if (it == st.files.end() || !fs::exists(p)) return;
  uint64_t bytes = 0;
  const std::string found = xxh64_hex(xxh64_file(p.string(), &bytes));
  const FileChecksum& want = it->second;
  const char* advice =
      "restore the checkpoint folder from a copy (or, if the file was replaced on purpose, remove "
      "its entry under \"files\" in state.json to load it unchecked)";
  if (bytes != want.bytes)
    throw Error(fmt::format(
        "{}: damaged: it is {} bytes, but {} recorded {} bytes when the checkpoint was saved "
        "({}); {}",
        shown_bytes(p.string()), bytes, shown_bytes(state), want.bytes,
        bytes < want.bytes ? "truncated" : "longer", advice));
  if (found != want.xxh64)
    throw Error(fmt::format(
        "{}: damaged: its XXH64 checksum is {}, but {} recorded {} when the checkpoint was saved "
        "(the bytes changed after it was written); {}",
        shown_bytes(p.string()), found, shown_bytes(state), want.xxh64, advice));
}

// The checkpoint's record of its files, read from dir/state.json; a note on stderr when it has
// none (a checkpoint written before checksums were recorded).
CheckpointState checked_state(const fs::path& dir) {
  const std::string path = (dir / "state.json").string();
  CheckpointState st = parse_checkpoint_state(read_file(path), path, dir.string());
  if (st.files.empty())
    std::fprintf(stderr,
                 "greentrain: note: %s records no checksums of the tensor files (a checkpoint "
                 "written before they were); they are read unchecked\n",
                 shown_bytes(path).c_str());
  return st;
}

}  // namespace

std::string checkpoint_dir(const std::string& run_dir) {
  return (fs::path(run_dir) / "checkpoint").string();
}

bool has_checkpoint(const std::string& run_dir) {
  std::string d = checkpoint_dir(run_dir);
  return fs::exists(fs::path(d) / "state.json") || fs::exists(fs::path(d + ".old") / "state.json");
}

std::string remove_stale_checkpoint_temporaries(const std::string& run_dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  const std::string prefix = fs::path(checkpoint_dir(run_dir)).filename().string() + kTmpInfix;
  for (const fs::directory_entry& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;  // not a name save_checkpoint gives
    const long pid = std::stol(digits);
    // running (EPERM: another user's, running too): its writer may still rename it in
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;
    std::error_code rm;
    fs::remove_all(e.path(), rm);
    if (rm)
      std::fprintf(stderr,
                   "greentrain: warning: cannot remove %s, left by a writer that ended: %s\n",
                   shown_bytes(e.path().string()).c_str(), rm.message().c_str());
    else
      removed.push_back(name);
  }
  if (removed.empty()) return "";
  return fmt::format("removed {} in {}, left by a checkpoint write that was killed",
                     fmt::join(removed, ", "), run_dir);
}

void save_checkpoint(const std::string& run_dir, GPT& model, const Arena& m, const Arena& v,
                     const CheckpointState& st) {
  fs::path final_dir = checkpoint_dir(run_dir);
  fs::path tmp = final_dir.string() + fmt::format("{}{}", kTmpInfix, getpid());
  fs::path old = final_dir.string() + ".old";
  std::error_code ec;
  // the tensors as the host may read them, through the backend: the arenas themselves where
  // device memory is host memory (no copy, no extra peak memory), else staged host copies
  Backend& be = model.backend();
  std::vector<unsigned char> staged[3];
  auto host_arena = [&](const Arena& a, int k) {
    return static_cast<const char*>(be.read_on_host(a.base(), a.bytes(), staged[k]));
  };
  auto host_at = [](const char* base, const Arena& a, size_t i) {
    return reinterpret_cast<const float*>(
        base + (static_cast<const char*>(a.at(i).data) - static_cast<const char*>(a.base())));
  };
  const char* hp = host_arena(model.params(), 0);
  const char* hm = host_arena(m, 1);
  const char* hv = host_arena(v, 2);
  std::vector<NamedTensor> params, moments;
  auto& specs = model.specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    params.push_back({specs[i].name, specs[i].shape, host_at(hp, model.params(), i)});
    moments.push_back({"exp_avg." + specs[i].name, specs[i].shape, host_at(hm, m, i)});
    moments.push_back({"exp_avg_sq." + specs[i].name, specs[i].shape, host_at(hv, v, i)});
  }
  // inf or NaN is never written: the checkpoint on disk stays the last good one
  for (const auto* list : {&params, &moments})
    for (const NamedTensor& t : *list)
      for (int64_t k = 0; k < t.shape.numel(); ++k)
        if (!std::isfinite(t.data[k]))
          throw Error(
              fmt::format("{}: not saving the checkpoint: tensor '{}' holds {} at element {}; the "
                          "checkpoint there is left as it was",
                          final_dir.string(), t.name, t.data[k], k));
  // the record first: a state that cannot be written stops here, before any file is touched
  (void)checkpoint_state_json(st, (tmp / "state.json").string());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  // a failure below (disk full, ...) leaves no half checkpoint folder behind
  struct RemoveTmp {
    const fs::path& p;
    bool armed = true;
    ~RemoveTmp() {
      std::error_code e;
      if (armed) fs::remove_all(p, e);
    }
  } remove_tmp{tmp};
  write_safetensors((tmp / "model.safetensors").string(), params, {{"format", "pt"}});
  write_safetensors((tmp / "optimizer.safetensors").string(), moments);
  // so that the folder loads in transformers (GPT2LMHeadModel.from_pretrained) as it is
  write_text(tmp / "config.json", hf_gpt2_config_json(model.config()));
  // a bpe or gpt2 tokenizer's own files (tokenizer.model; vocab.json and merges.txt) beside it
  for (const auto& [name, content] : st.tokenizer.files()) write_text(tmp / name, content);
  // each tensor file's size and checksum as it is on disk, recorded in state.json (written
  // last, into the same temporary folder): a file damaged later is found when it is loaded
  CheckpointState recorded = st;
  recorded.files.clear();
  for (const char* name : kCheckedFiles) {
    FileChecksum& c = recorded.files[name];
    c.xxh64 = xxh64_hex(xxh64_file((tmp / name).string(), &c.bytes));
  }
  write_text(tmp / "state.json", checkpoint_state_json(recorded, (tmp / "state.json").string()));
  sync();
  // swap in: current -> .old, tmp -> current, drop .old
  fs::remove_all(old, ec);
  if (fs::exists(final_dir)) fs::rename(final_dir, old);
  fs::rename(tmp, final_dir);
  remove_tmp.armed = false;
  fs::remove_all(old, ec);
}

CheckpointState load_checkpoint_state(const std::string& run_dir) {
  const std::string dir = resolve_dir(run_dir);
  const std::string path = (fs::path(dir) / "state.json").string();
  return parse_checkpoint_state(read_file(path), path, dir);
}

void load_parameters(const std::string& path, GPT& model) {
  auto& specs = model.specs();
  Backend& be = model.backend();
  std::vector<float> host;
  SafetensorsFile pf(path);
  const std::string prefix = specs.empty() ? "" : name_prefix(pf, specs[0].name);
  std::set<std::string> expected;
  std::vector<float> wte;  // specs[0], kept to recognise a tied lm_head.weight
  for (size_t i = 0; i < specs.size(); ++i) {
    load_tensor(pf, prefix + specs[i].name, specs[i].shape, model.params().at(i), be, host);
    expected.insert(prefix + specs[i].name);
    if (i == 0) wte = host;
  }
  check_no_extra(pf, expected, prefix, specs.empty() ? nullptr : &wte,
                 specs.empty() ? nullptr : &specs[0].shape);
}

void load_checkpoint_tensors(const std::string& run_dir, GPT& model, Arena* m, Arena* v) {
  fs::path dir = resolve_dir(run_dir);
  auto& specs = model.specs();
  Backend& be = model.backend();
  std::vector<float> host;
  const CheckpointState st = checked_state(dir);
  const std::string state = (dir / "state.json").string();
  verify_file(dir, "model.safetensors", st, state);
  load_parameters((dir / "model.safetensors").string(), model);
  if (m && v) {
    verify_file(dir, "optimizer.safetensors", st, state);
    SafetensorsFile of((dir / "optimizer.safetensors").string());
    std::set<std::string> expected;
    for (size_t i = 0; i < specs.size(); ++i) {
      load_tensor(of, "exp_avg." + specs[i].name, specs[i].shape, m->at(i), be, host);
      load_tensor(of, "exp_avg_sq." + specs[i].name, specs[i].shape, v->at(i), be, host);
      expected.insert("exp_avg." + specs[i].name);
      expected.insert("exp_avg_sq." + specs[i].name);
    }
    check_no_extra(of, expected, "", nullptr, nullptr);
  }
}

}  // namespace gt
