// run/writer.cpp: see writer.h.
#include "run/writer.h"

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "core/atomic_file.h"
#include "core/bytes_json.h"
#include "run/resume.h"
#include "run/schema.h"

namespace gt::run {

void write_summary(const std::string& dir, const nlohmann::ordered_json& summary) {
  nlohmann::ordered_json s;
  s[key::schema_version] = kSchemaVersion;
  for (const auto& [k, v] : summary.items())
    if (k != key::schema_version) s[k] = v;
  write_file_atomic(path_in(dir, file::summary), dump_json(s, 2) + "\n");
}

void write_config(const std::string& dir, const std::string& toml) {
  write_file_atomic(path_in(dir, file::config), toml);
}

MetricsLog::MetricsLog(const std::string& dir) : out_(path_in(dir, file::metrics), std::ios::app) {}

void MetricsLog::append(const nlohmann::ordered_json& line) {
  if (!out_.is_open()) return;
  out_ << line.dump() << "\n";
  out_.flush();
}

void keep_metrics_up_to(const std::string& dir, int64_t step) {
  const std::string p = path_in(dir, file::metrics);
  if (!std::filesystem::exists(p)) return;
  std::ifstream f(p, std::ios::binary);
  std::stringstream text;
  text << f.rdbuf();
  write_file_atomic(p, metrics_lines_up_to(text.str(), step));
}

void remove_metrics(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove(path_in(dir, file::metrics), ec);
}

namespace {

// The text of DIR/name, or empty when there is no such file.
std::optional<std::string> read_if_there(const std::string& dir, const char* name) {
  const std::string p = path_in(dir, name);
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return std::nullopt;
  std::ifstream f(p, std::ios::binary);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

}  // namespace

nlohmann::json read_prior_sessions(const std::string& dir, int64_t start,
                                   const nlohmann::json& checkpoint_run, std::string* note) {
  return prior_sessions(read_if_there(dir, file::summary), read_if_there(dir, file::session_open),
                        start, checkpoint_run, note);
}

void open_session(const std::string& dir, std::optional<int64_t> session, int64_t start) {
  nlohmann::ordered_json j;
  j[key::session] = session ? nlohmann::ordered_json(*session) : nlohmann::ordered_json();
  j[key::session_start_step] = start;
  j[key::pid] = static_cast<int64_t>(::getpid());
  write_file_atomic(path_in(dir, file::session_open), j.dump(2) + "\n");
}

void close_session(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove(path_in(dir, file::session_open), ec);
}

}  // namespace gt::run
