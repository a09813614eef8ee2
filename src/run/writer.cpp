// run/writer.cpp: see writer.h.
#include "run/writer.h"

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

}  // namespace gt::run
