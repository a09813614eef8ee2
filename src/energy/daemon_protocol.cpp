// energy/daemon_protocol.cpp: see daemon_protocol.h.
#include "energy/daemon_protocol.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

namespace gt::energy::daemon {

using nlohmann::json;

std::string socket_path(const std::string& override_path) {
  if (!override_path.empty()) return override_path;
  if (const char* e = std::getenv("GT_DAEMON_SOCKET"); e && *e) return e;
  return kDefaultSocket;
}

void append_frame(std::string& out, std::string_view payload, std::size_t max_bytes) {
  if (payload.size() > max_bytes)
    throw ProtocolError("too_large", fmt::format("message of {} bytes; expected at most {} bytes",
                                                 payload.size(), max_bytes));
  const auto n = static_cast<std::uint32_t>(payload.size());
  const char len[4] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                       static_cast<char>(n >> 8), static_cast<char>(n)};
  out.append(len, 4);
  out.append(payload);
}

std::optional<std::uint32_t> FrameReader::pending_length() const {
  if (buf_.size() - pos_ < 4) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + pos_);
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

FrameReader::Status FrameReader::next(std::string* payload) {
  const auto len = pending_length();
  if (!len) return Status::kNeedMore;
  if (*len > max_) return Status::kTooLarge;
  if (buf_.size() - pos_ < 4 + std::size_t{*len}) return Status::kNeedMore;
  payload->assign(buf_, pos_ + 4, *len);
  pos_ += 4 + std::size_t{*len};
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > 65536) {  // keep the buffer from growing with what was handed out
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  return Status::kFrame;
}

Request parse_request(std::string_view payload) {
  json j = json::parse(payload.begin(), payload.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw ProtocolError("bad_json",
                        fmt::format("the request ({} bytes) is not valid JSON; expected "
                                    "one JSON object",
                                    payload.size()));
  if (!j.is_object())
    throw ProtocolError("bad_json",
                        fmt::format("the request is a JSON {}; expected an object", j.type_name()));
  Request r;
  if (auto it = j.find("id"); it != j.end()) r.id = *it;
  auto v = j.find("v");
  if (v == j.end() || !v->is_number_integer() || v->get<long long>() != kProtocolVersion)
    throw ProtocolError(
        "unknown_version",
        fmt::format("protocol version {} is not spoken here; expected \"v\": {}",
                    v == j.end() ? std::string("(none)") : v->dump(), kProtocolVersion),
        r.id);
  auto op = j.find("op");
  if (op == j.end() || !op->is_string())
    throw ProtocolError("bad_request",
                        "the request has no \"op\" string; expected e.g. {\"v\": 1, \"op\": "
                        "\"read\"}",
                        r.id);
  r.op = op->get<std::string>();
  r.body = std::move(j);
  return r;
}

std::string error_response(const json& id, std::string_view code, std::string_view message) {
  json j = {{"v", kProtocolVersion},
            {"ok", false},
            {"code", std::string(code)},
            {"error", std::string(message)}};
  if (!id.is_null()) j["id"] = id;
  if (code == "unknown_version") j["versions"] = {kProtocolVersion};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

const json& field(const json& body, const char* key, const char* expected) {
  auto it = body.find(key);
  if (it == body.end())
    throw ProtocolError("bad_request",
                        fmt::format("\"{}\" is missing; expected {}", key, expected));
  return *it;
}

[[noreturn]] void wrong(const char* key, const json& v, const char* expected) {
  std::string shown = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
  throw ProtocolError("bad_request", fmt::format("\"{}\": {}; expected {}", key, shown, expected));
}

double opt_number(const json& j, const char* key, double def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_number() || !std::isfinite(it->get<double>())) wrong(key, *it, "a finite number");
  return it->get<double>();
}

std::optional<double> opt_maybe(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number() || !std::isfinite(it->get<double>())) wrong(key, *it, "a finite number");
  return it->get<double>();
}

std::string opt_string(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (!it->is_string()) wrong(key, *it, "a string");
  return it->get<std::string>();
}

bool opt_bool(const json& j, const char* key, bool def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_boolean()) wrong(key, *it, "true or false");
  return it->get<bool>();
}

json maybe(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

SensorKind kind_from(const std::string& s) {
  if (s == to_string(SensorKind::kEnergyCounter)) return SensorKind::kEnergyCounter;
  if (s == to_string(SensorKind::kPowerGauge)) return SensorKind::kPowerGauge;
  if (s == to_string(SensorKind::kEstimate)) return SensorKind::kEstimate;
  throw ProtocolError("bad_request",
                      fmt::format("sensor kind \"{}\"; expected \"energy counter\", \"power "
                                  "gauge\" or \"estimate\"",
                                  s.substr(0, 40)));
}

void need_object(const json& j, const char* what) {
  if (!j.is_object())
    throw ProtocolError("bad_request",
                        fmt::format("{} is a JSON {}; expected an object", what, j.type_name()));
}

}  // namespace

double number_field(const json& body, const char* key) {
  const json& v = field(body, key, "a number");
  if (!v.is_number() || !std::isfinite(v.get<double>())) wrong(key, v, "a finite number");
  return v.get<double>();
}

std::string string_field(const json& body, const char* key) {
  const json& v = field(body, key, "a string");
  if (!v.is_string()) wrong(key, v, "a string");
  return v.get<std::string>();
}

json sensor_info_to_json(const SensorInfo& s) {
  return {{"name", s.name},
          {"domain", s.domain},
          {"index", s.index},
          {"device", s.device},
          {"device_key", s.device_key},
          {"kind", to_string(s.kind)},
          {"unit", s.unit},
          {"available", s.available},
          {"counted", s.counted},
          {"reason", s.reason},
          {"method", s.method},
          {"refresh_period_s", s.refresh_period_s},
          {"wrap_j", maybe(s.wrap_j)}};
}

SensorInfo sensor_info_from_json(const json& j) {
  need_object(j, "a sensor");
  SensorInfo s;
  s.name = string_field(j, "name");
  s.domain = opt_string(j, "domain");
  const double index = opt_number(j, "index", 0);
  if (index < 0 || index > 1e6) wrong("index", j["index"], "a device number >= 0");
  s.index = static_cast<int>(index);
  s.device = opt_string(j, "device");
  s.device_key = opt_string(j, "device_key");
  s.kind = kind_from(string_field(j, "kind"));
  s.unit = opt_string(j, "unit");
  s.available = opt_bool(j, "available", false);
  s.counted = opt_bool(j, "counted", true);
  s.reason = opt_string(j, "reason");
  s.method = opt_string(j, "method");
  s.refresh_period_s = opt_number(j, "refresh_period_s", 0);
  s.wrap_j = opt_maybe(j, "wrap_j");
  return s;
}

json sample_to_json(const Sample& s) {
  json r = json::array();
  for (const auto& x : s.readings) {
    json o = {{"sensor", x.sensor},           {"ok", x.ok},
              {"energy_j", x.energy_j},       {"power_w", maybe(x.power_w)},
              {"untrusted_s", x.untrusted_s}, {"unknown_s", x.unknown_s}};
    if (!x.error.empty()) o["error"] = x.error;
    if (!x.note.empty()) o["note"] = x.note;
    if (x.failing_since_unix_s) o["failing_since_unix_s"] = *x.failing_since_unix_s;
    r.push_back(std::move(o));
  }
  return {{"seq", s.seq},
          {"t_mono_s", s.t_mono_s},
          {"t_unix_s", s.t_unix_s},
          {"instance", s.instance},
          {"readings", std::move(r)},
          {"carbon_g_per_kwh", maybe(s.carbon_g_per_kwh)}};
}

Sample sample_from_json(const json& j) {
  need_object(j, "a sample");
  Sample s;
  const double seq = number_field(j, "seq");
  if (seq < 0 || seq > 9e15) wrong("seq", j["seq"], "a count >= 0");
  s.seq = static_cast<std::uint64_t>(seq);
  s.t_mono_s = number_field(j, "t_mono_s");
  s.t_unix_s = opt_number(j, "t_unix_s", 0);
  s.instance = opt_string(j, "instance");
  s.carbon_g_per_kwh = opt_maybe(j, "carbon_g_per_kwh");
  const json& rs = field(j, "readings", "an array");
  if (!rs.is_array()) wrong("readings", rs, "an array");
  for (const json& x : rs) {
    need_object(x, "a reading");
    SensorReading r;
    r.sensor = string_field(x, "sensor");
    r.ok = opt_bool(x, "ok", false);
    r.error = opt_string(x, "error");
    r.energy_j = opt_number(x, "energy_j", 0);
    r.power_w = opt_maybe(x, "power_w");
    r.untrusted_s = opt_number(x, "untrusted_s", 0);
    r.unknown_s = opt_number(x, "unknown_s", 0);
    r.note = opt_string(x, "note");
    r.failing_since_unix_s = opt_maybe(x, "failing_since_unix_s");
    s.readings.push_back(std::move(r));
  }
  return s;
}

}  // namespace gt::energy::daemon
