// energy/daemon_client.cpp: see daemon_client.h.
#include "energy/daemon_client.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "core/json_number.h"
#include "energy/cpu_estimate.h"
#include "energy/gpu_sensors.h"
#include "energy/nvml.h"

namespace gt::energy::daemon {

using nlohmann::json;

namespace {

double mono_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Waits until fd is ready for `events` or the deadline passes; false on timeout.
bool wait_fd(int fd, short events, double deadline) {
  for (;;) {
    const double left = deadline - mono_now();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return true;  // let the read or write report the error
  }
}

}  // namespace

std::unique_ptr<DaemonClient> DaemonClient::connect(const std::string& path_in, std::string* why,
                                                    bool* present, double timeout_s) {
  const std::string path = socket_path(path_in);
  if (present) *present = false;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    *why = fmt::format("no daemon: {} does not exist ({})", path, std::strerror(errno));
    return nullptr;
  }
  if (present) *present = true;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    *why = fmt::format("{}: socket path longer than {} bytes", path, sizeof addr.sun_path - 1);
    return nullptr;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = fmt::format("socket: {}", std::strerror(errno));
    return nullptr;
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    ::close(fd);
    if (e == ECONNREFUSED)
      *why =
          fmt::format("no daemon listens at {} (a socket file left by a daemon that ended)", path);
    else if (e == EACCES || e == EPERM)
      *why = fmt::format(
          "{}: permission denied: the daemon's policy lets only some users or groups connect "
          "(socket_group); ask the node's administrator",
          path);
    else
      *why = fmt::format("cannot connect to {}: {}", path, std::strerror(e));
    return nullptr;
  }
  std::unique_ptr<DaemonClient> c(new DaemonClient(fd, path));
  try {
    c->hello_ = c->call({{"op", "hello"}}, timeout_s);
  } catch (const std::exception& e) {
    *why = fmt::format("the daemon at {} did not say hello: {}", path, e.what());
    return nullptr;
  }
  return c;
}

DaemonClient::~DaemonClient() { close_fd(); }

void DaemonClient::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void DaemonClient::abort_connection() noexcept {
  const int fd = fd_;
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

std::string DaemonClient::describe() const {
  auto d = hello_.find("daemon");
  long long pid = 0;
  if (d != hello_.end() && d->is_object() && d->contains("pid") && (*d)["pid"].is_number())
    pid = (*d)["pid"].get<long long>();
  return fmt::format("greentrain serve (pid {}) at {}", pid, path_);
}

json DaemonClient::call(json request, double timeout_s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) throw Error(fmt::format("{}: the connection to the daemon is closed", path_));
  request["v"] = kProtocolVersion;
  const std::uint64_t id = next_id_++;
  request["id"] = id;
  std::string out;
  append_frame(out, request.dump(), kMaxRequestBytes);
  const double deadline = mono_now() + timeout_s;
  auto fail = [this](const std::string& what) {
    close_fd();
    return Error(fmt::format("{}: {}", path_, what));
  };
  for (std::size_t sent = 0; sent < out.size();) {
    if (!wait_fd(fd_, POLLOUT, deadline)) throw fail("the daemon takes no request (timed out)");
    ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw fail(fmt::format("sending to the daemon: {}", std::strerror(errno)));
    sent += static_cast<std::size_t>(n);
  }
  FrameReader reader(kMaxResponseBytes);
  std::string payload;
  char buf[65536];
  for (;;) {
    const auto st = reader.next(&payload);
    if (st == FrameReader::Status::kFrame) break;
    if (st == FrameReader::Status::kTooLarge)
      throw fail(fmt::format("the daemon's response is longer than {} bytes", kMaxResponseBytes));
    if (!wait_fd(fd_, POLLIN, deadline))
      throw fail(fmt::format("no answer from the daemon within {:g} s", timeout_s));
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) throw fail("the daemon closed the connection");
    if (n < 0) throw fail(fmt::format("reading from the daemon: {}", std::strerror(errno)));
    reader.feed(buf, static_cast<std::size_t>(n));
  }
  json r = json::parse(payload, nullptr, false);
  if (r.is_discarded() || !r.is_object()) throw fail("the daemon's response is not a JSON object");
  if (!r.value("ok", false)) {
    std::string code = "failed", msg = "the daemon refused the request";
    if (r.contains("code") && r["code"].is_string()) code = r["code"].get<std::string>();
    if (r.contains("error") && r["error"].is_string()) msg = r["error"].get<std::string>();
    throw DaemonError(code, msg);
  }
  return r;
}

bool DaemonClient::same_daemon(const json& sample) const {
  const auto d = hello_.find("daemon");
  if (d == hello_.end() || !d->is_object() || !d->contains("instance")) return false;
  const auto i = sample.find("instance");
  return i != sample.end() && *i == (*d)["instance"];
}

std::optional<std::string> DaemonClient::read_sample_page() {
  std::lock_guard<std::mutex> g(mu_);
  if (!page_tried_) {
    page_tried_ = true;
    auto p = hello_.find("sample_page");
    if (p != hello_.end() && p->is_string()) {
      std::string why;
      page_ = SamplePageReader::open(p->get<std::string>(), &why);
      const double interval = hello_.value("interval_s", 0.1);
      page_max_age_s_ = std::max(1.0, 5 * interval);
    }
  }
  if (!page_ || fd_ < 0) return std::nullopt;
  return page_->read(page_max_age_s_);
}

// ------------------------------------------------------------ sensors read through the daemon
namespace {

// One sample per meter tick for all of a meter's daemon sensors. Reconnects once per tick when
// the connection broke (a daemon restarted by its unit); readings of a new daemon run are
// re-based by the sensors (its counters begin again).
class DaemonBatch : public SensorBatch {
 public:
  DaemonBatch(std::unique_ptr<DaemonClient> c, std::string path)
      : client_(std::move(c)), path_(std::move(path)) {}

  std::optional<double> refresh(bool boundary) override {
    for (int attempt = 0; attempt < 2; ++attempt) {
      error_.clear();
      try {
        if (!client_ || client_->broken()) {
          std::string why;
          client_ = DaemonClient::connect(path_, &why);
          if (!client_) throw Error(why);
        }
        json r;
        // the latest sample from the shared page (no request), a window boundary's fresh one
        // (or the latest when there is no usable page) from the daemon
        // (never older than a sample the socket gave: the page is written just after)
        if (auto text = boundary ? std::nullopt : client_->read_sample_page())
          r = json::parse(*text, nullptr, false);
        if (r.is_object() && !client_->same_daemon(r)) r = json();  // another daemon's page
        if (r.is_object() && r.value("instance", std::string()) == sample_.instance &&
            r.value("seq", std::uint64_t{0}) < sample_.seq)
          r = json();
        if (!r.is_object()) r = client_->call({{"op", "read"}, {"fresh", boundary}});
        sample_ = sample_from_json(r);
        index_.clear();
        for (std::size_t i = 0; i < sample_.readings.size(); ++i)
          index_[sample_.readings[i].sensor] = i;
        return sample_.t_mono_s;
      } catch (const std::exception& e) {
        error_ = fmt::format("daemon: {}", e.what());
        // A connection that broke (a daemon restarted by its unit): connect again, once.
        if (!(client_ && client_->broken())) break;
      }
    }
    return std::nullopt;
  }

  // The reading of `sensor` in the current sample, or nullptr with *err.
  const SensorReading* find(const std::string& sensor, std::string* err) const {
    if (!error_.empty()) {
      *err = error_;
      return nullptr;
    }
    auto it = index_.find(sensor);
    if (it == index_.end()) {
      *err = fmt::format("daemon: sensor {} is not in the daemon's readings", sensor);
      return nullptr;
    }
    return &sample_.readings[it->second];
  }
  const std::string& instance() const { return sample_.instance; }

 private:
  std::unique_ptr<DaemonClient> client_;
  std::string path_;
  Sample sample_;
  std::map<std::string, std::size_t> index_;
  std::string error_;
};

class DaemonSensor : public Sensor {
 public:
  DaemonSensor(SensorInfo info, std::shared_ptr<DaemonBatch> batch)
      : info_(std::move(info)), batch_(std::move(batch)) {}
  const SensorInfo& info() const override { return info_; }

  Reading read(double) override {
    Reading r;
    std::string err;
    const SensorReading* x = batch_->find(info_.name, &err);
    if (!x) {
      r.ok = false;
      r.error = err;
      return r;
    }
    if (!instance_.empty() && batch_->instance() != instance_) {
      // A new daemon run: its cumulative energies began again at 0. Carry on from the last
      // value handed out; the energy between the two runs was not measured, and is flagged.
      instance_ = batch_->instance();
      offset_j_ = last_j_ - x->energy_j;
      last_untrusted_s_ = x->untrusted_s;
      last_unknown_s_ = x->unknown_s;
      r.ok = true;
      r.energy_j = last_j_;
      r.untrusted = "the daemon restarted: the energy between its two runs was not measured";
      r.incomplete = true;
      return r;
    }
    instance_ = batch_->instance();
    // The daemon applies the accumulator rule (fills over failed reads) to its cumulative
    // energy; what it filled is passed on as untrusted, with its reason.
    r.ok = true;
    r.energy_j = x->energy_j + offset_j_;
    r.power_w = x->power_w;
    if (x->untrusted_s > last_untrusted_s_ + 1e-9 || x->unknown_s > last_unknown_s_ + 1e-9) {
      const std::string why = !x->note.empty()    ? x->note
                              : !x->error.empty() ? x->error
                                                  : "a reading failed";
      r.untrusted = "filled by the daemon: " + why;
      r.incomplete = x->unknown_s > last_unknown_s_ + 1e-9;
    }
    last_untrusted_s_ = x->untrusted_s;
    last_unknown_s_ = x->unknown_s;
    last_j_ = *r.energy_j;
    return r;
  }

 private:
  SensorInfo info_;
  std::shared_ptr<DaemonBatch> batch_;
  std::string instance_;
  double last_untrusted_s_ = 0, last_unknown_s_ = 0;
  double offset_j_ = 0, last_j_ = 0;  // continuity over a daemon restart (J)
};

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// A GPU this process sees, as the daemon keys it: its device_key there ("nvml-<uuid>",
// "rocm-<ROCm SMI index>"), the sensor name it would have ("nvml:2") and the entries of the
// *_VISIBLE_DEVICES variables that named it (empty where none is set).
struct VisibleGpu {
  std::string key, name, requested;
};

std::string joined(const std::vector<std::string>& notes) {
  std::string t;
  for (const auto& n : notes) t += (t.empty() ? "" : "; ") + n;
  return t;
}

// The NVIDIA GPUs of this process's CUDA_VISIBLE_DEVICES, in its order (resolved to UUIDs
// through NVML when this process can load it; otherwise all of the daemon's, in its order).
std::vector<VisibleGpu> visible_nvml(const std::vector<SensorInfo>& all,
                                     std::vector<std::string>* notes) {
  std::vector<VisibleGpu> daemons;
  for (const auto& s : all)
    if (starts_with(s.device_key, "nvml-")) daemons.push_back({s.device_key, s.name, ""});
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!cvd || daemons.empty()) return daemons;
  std::string err;
  auto lib = nvml::Library::load(&err);
  if (!lib) return daemons;
  std::vector<VisibleGpu> out;
  for (const auto& g : nvml::resolve_visible(*lib, cvd, notes))
    out.push_back({"nvml-" + g.uuid, fmt::format("nvml:{}", g.nvml_index),
                   "CUDA_VISIBLE_DEVICES " + g.requested});
  return out;
}

// The node's AMD GPU count that the daemon's hello tells ("node_gpus": {"amd": N}, ROCm SMI's
// count there); empty where it does not (a daemon older than the key, or one that could not
// count them) or tells it in another form.
std::optional<uint32_t> node_amd_gpus(const json& hello) {
  const auto g = hello.find("node_gpus");
  if (g == hello.end() || !g->is_object() || !g->contains("amd")) return std::nullopt;
  return json_integer<uint32_t>((*g)["amd"], 0, 1u << 16);
}

// The AMD GPUs this process's HIP programs see (ROCR_VISIBLE_DEVICES, then
// HIP_VISIBLE_DEVICES: rocm_visible_here, as detect_rocm_smi chooses them), in their order,
// of the node's `node_count` GPUs (hello's node_amd_gpus, as ROCm SMI counts them when read
// directly); where the daemon does not tell the count, of the GPUs that ROCm SMI numbers up to
// the daemon's highest (a visible-devices entry above it then matches nothing).
std::vector<VisibleGpu> visible_rocm(const std::vector<SensorInfo>& all,
                                     std::optional<uint32_t> node_count,
                                     std::vector<std::string>* notes) {
  uint32_t n = node_count.value_or(0);
  for (const auto& s : all) {
    if (!starts_with(s.device_key, "rocm-")) continue;
    uint32_t i = 0;
    const char* p = s.device_key.data() + 5;
    const char* e = s.device_key.data() + s.device_key.size();
    if (auto [end, ec] = std::from_chars(p, e, i); ec == std::errc() && end == e && p != e)
      n = std::max(n, i + 1);
  }
  std::vector<VisibleGpu> out;
  if (n == 0) return out;
  for (const RocmVisible& g : rocm_visible_here(n, notes))
    out.push_back(
        {fmt::format("rocm-{}", g.rsmi_index), fmt::format("rocm:{}", g.rsmi_index), g.requested});
  return out;
}

// The sensor read through the daemon for `i` (unavailable where the daemon cannot read it).
// The daemon is the device's reader: the lock the meter takes is `lock_key`'s (none if empty).
std::unique_ptr<Sensor> through(SensorInfo i, const std::shared_ptr<DaemonBatch>& batch,
                                std::string lock_key = {}) {
  i.device_key = std::move(lock_key);
  if (i.available && i.counted) return std::make_unique<DaemonSensor>(i, batch);
  return std::make_unique<UnavailableSensor>(i);
}

// One vendor's GPUs read through the daemon, each at its position among the `visible` ones
// (SensorInfo::index: CUDA's or HIP's number in this process); a visible GPU the daemon does not
// read is there, unavailable. None visible: the daemon's placeholder `vendor_name` saying why
// ("nvml", "rocm-smi"), or one made here. The list choose_gpus takes, as from detect_nvml.
SensorList vendor_gpus(const std::vector<SensorInfo>& all, const std::vector<VisibleGpu>& visible,
                       const std::string& vendor_name, const std::string& none_reason,
                       const std::string& source, const std::shared_ptr<DaemonBatch>& batch) {
  SensorList out;
  for (const VisibleGpu& v : visible) {
    SensorInfo i;
    const auto it = std::find_if(all.begin(), all.end(),
                                 [&v](const SensorInfo& s) { return s.device_key == v.key; });
    if (it != all.end()) {
      i = *it;
    } else {
      i.name = v.name;
      i.domain = "gpu";
      i.reason = fmt::format("{} does not read this GPU ({})", source, v.key);
    }
    if (!v.requested.empty()) i.device += " (" + v.requested + ")";
    i.index = static_cast<int>(out.size());
    out.push_back(through(i, batch));
  }
  if (!out.empty()) return out;
  SensorInfo none;
  for (const auto& s : all)
    if (s.name == vendor_name && s.device_key.empty()) none = s;
  if (none.name.empty()) {
    none.name = vendor_name;
    none.domain = "gpu";
    none.reason = none_reason;
  }
  out.push_back(through(none, batch));
  return out;
}

// The GPUs read through the daemon, chosen as detect_sensors chooses those read directly:
// each vendor's visible GPUs, then opt.gpus's positions among them (choose_gpus).
// `amd_count`: the node's AMD GPUs as hello tells them (node_amd_gpus; empty: not told).
SensorList daemon_gpus(const std::vector<SensorInfo>& all, std::optional<uint32_t> amd_count,
                       const MeterOptions& opt, const std::string& source,
                       const std::shared_ptr<DaemonBatch>& batch, std::vector<std::string>* flags) {
  std::vector<VendorGpus> vendors;
  // why a vendor has no GPU here: none visible (the notes say why), or the daemon reads none
  auto none = [&source](const char* vendor, const std::vector<std::string>& notes) {
    return notes.empty() ? fmt::format("{} reads no {} GPU", source, vendor)
                         : fmt::format("no {} GPU visible: {}", vendor, joined(notes));
  };
  if (opt.use_nvml) {
    std::vector<std::string> notes;
    const auto vis = visible_nvml(all, &notes);
    vendors.push_back(
        {"NVIDIA", vendor_gpus(all, vis, "nvml", none("NVIDIA", notes), source, batch)});
  }
  if (opt.use_rocm_smi) {
    std::vector<std::string> notes;
    const auto vis = visible_rocm(all, amd_count, &notes);
    vendors.push_back(
        {"AMD", vendor_gpus(all, vis, "rocm-smi", none("AMD", notes), source, batch)});
  }
  return choose_gpus(std::move(vendors), opt, flags);
}

std::optional<CarbonIntensity> daemon_carbon(const json& hello) {
  auto c = hello.find("carbon");
  if (c == hello.end() || !c->is_object()) return std::nullopt;
  const std::string region = c->value("region", std::string());
  // the country the figure is of (the policy's carbon_region): its annual average, or the
  // country a series or a constant is for
  const std::string country = c->contains("country") && (*c)["country"].is_string()
                                  ? (*c)["country"].get<std::string>()
                                  : "";
  const char* set_by = "greentrain serve's policy";
  try {
    std::optional<CarbonIntensity> out;
    const std::string origin = c->value("origin", std::string());
    if (c->contains("csv") && (*c)["csv"].is_string() && !(*c)["csv"].get<std::string>().empty())
      out = CarbonIntensity::from_csv((*c)["csv"].get<std::string>(), c->value("utc_offset_h", 0.0),
                                      region);
    else if (origin == "default")
      return std::nullopt;
    else if (origin == "country" && !country.empty())
      out = CarbonIntensity::for_country(country, set_by);
    else if (c->contains("g_per_kwh") && (*c)["g_per_kwh"].is_number())
      out = CarbonIntensity::constant((*c)["g_per_kwh"].get<double>(), region, set_by);
    if (out && !country.empty() && out->origin() != CarbonOrigin::kCountry)
      out = out->with_country(country, set_by);
    return out;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

std::string node_share_key(const SensorInfo& s) {
  return "through-daemon-" + (s.device_key.empty() ? s.name : s.device_key);
}

const char* const kNodeShareRole =
    "counts it for the ranks of its job on this node, reading through the node daemon";

std::optional<DaemonSensors> daemon_sensors(const MeterOptions& opt, std::string* why,
                                            bool* present) {
  auto client = DaemonClient::connect(opt.daemon_socket, why, present);
  if (!client) return std::nullopt;
  std::vector<SensorInfo> all;
  try {
    const json& s = client->hello().at("sensors");
    if (!s.is_array()) throw ProtocolError("bad_request", "\"sensors\" is not an array");
    for (const auto& x : s) all.push_back(sensor_info_from_json(x));
  } catch (const std::exception& e) {
    *why = fmt::format("the daemon at {} sent a sensor list that cannot be read: {}",
                       client->path(), e.what());
    return std::nullopt;
  }
  DaemonSensors out;
  out.source = client->describe();
  out.carbon = daemon_carbon(client->hello());
  const std::optional<uint32_t> amd_count = node_amd_gpus(client->hello());
  auto batch = std::make_shared<DaemonBatch>(std::move(client), socket_path(opt.daemon_socket));
  out.batch = batch;
  // A node-wide sensor (RAPL, a machine-wide estimate) of a multi-rank job is counted by one of
  // its ranks on the node, as when they read directly: the first to take its lock, here a
  // share lock of its own (the daemon holds the device's) that the Meter takes.
  auto add = [&out, &batch, &opt](SensorInfo i) {
    const bool shared = opt.node_devices_shared && i.domain != "gpu" && i.available && i.counted;
    out.sensors.push_back(through(i, batch, shared ? node_share_key(i) : std::string()));
  };
  for (auto& g : daemon_gpus(all, amd_count, opt, out.source, batch, &out.flags))
    out.sensors.push_back(std::move(g));
  for (const auto& s : all) {
    if (opt.use_rapl && starts_with(s.name, "rapl")) {
      SensorInfo i = s;
      if (opt.pid != 0 && i.available && i.counted) {  // the process tree's are estimates
        i.counted = false;
        i.reason = kMachineWideReason;
      }
      add(i);
    }
    if (opt.use_estimate && opt.pid == 0 && s.domain != "gpu" && !starts_with(s.name, "rapl") &&
        s.kind == SensorKind::kEstimate)
      add(s);
  }
  if (opt.use_estimate && opt.pid != 0) {
    // A process tree's estimate is this process's own figure (no lock, nothing shared).
    std::set<std::string> covered;
    for (const auto& s : out.sensors) {
      const auto& i = s->info();
      if (i.available && i.counted && i.domain != "gpu") {
        covered.insert(i.domain);
        if (i.domain == "psys") covered.insert({"cpu", "ram"});
      }
    }
    CpuEstimateOptions eo;
    eo.tdp_w = opt.cpu_tdp_w;
    eo.ram_w_per_gb = opt.ram_w_per_gb;
    eo.pid = opt.pid;
    for (auto& s : make_cpu_estimate(eo)) {
      if (covered.count(s->info().domain)) {
        SensorInfo i = s->info();
        i.counted = false;
        i.reason = "a RAPL counter measures this domain";
        out.sensors.push_back(std::make_unique<UnavailableSensor>(i));
      } else {
        out.sensors.push_back(std::move(s));
      }
    }
  }
  return out;
}

}  // namespace gt::energy::daemon
