// serve/requests.cpp: the daemon's answers (daemon_protocol.h lists the requests): hello, power
// limits under the policy, per-process attribution filtered by who asks. The reads themselves
// are answered by the server from the published sample.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "serve/server.h"

namespace gt::serve {

using nlohmann::json;
namespace ed = energy::daemon;

std::string read_response(const Published& p, const json& id) {
  // p.json is an object "{...}": splice the envelope in front of its fields.
  std::string out =
      fmt::format("{{\"v\":{},\"ok\":true,\"id\":{},", ed::kProtocolVersion, id.dump());
  out.append(p.json, 1, std::string::npos);
  return out;
}

namespace {

json hello(const ServeContext& ctx, const Peer& peer, const std::string& socket_path) {
  const NodeReader& r = *ctx.reader;
  json sensors = json::array();
  for (const auto& s : r.sensors()) sensors.push_back(ed::sensor_info_to_json(s));
  const auto& c = r.carbon();
  const Policy& pol = *ctx.policy;
  json out = {
      {"daemon",
       {{"name", "greentrain serve"},
        {"version", "0.1.0"},
        {"pid", ::getpid()},
        {"started_unix_s", ctx.started_unix_s},
        {"instance", r.instance()}}},
      {"socket", socket_path},
      {"sample_page", ctx.sample_page.empty() ? json(nullptr) : json(ctx.sample_page)},
      {"interval_s", r.interval_s()},
      {"sensors", sensors},
      {"carbon",
       {{"g_per_kwh", r.latest()->sample.carbon_g_per_kwh.value_or(0)},
        {"source", c.describe()},
        {"origin", energy::to_string(c.origin())},
        {"region", c.region()},
        {"country", c.country_iso_code()},
        {"csv", pol.carbon_csv.empty() ? json(nullptr) : json(pol.carbon_csv)},
        {"utc_offset_h", pol.carbon_utc_offset_h}}},
      {"you", {{"uid", peer.uid}, {"gid", peer.gid}, {"pid", peer.pid}, {"user", peer.user}}},
      {"may",
       {{"power_limit", ctx.leases ? ctx.leases->grants(peer, pol) : json::array()},
        {"read_all_processes", pol.may_read_all_processes(peer)}}}};
  // the node's GPUs by vendor, which a client's visible-devices entries index (AMD: ROCm SMI's
  // count; the daemon may read fewer of them, or none)
  if (ctx.node_amd_gpus) out["node_gpus"] = {{"amd", *ctx.node_amd_gpus}};
  return out;
}

uid_t owner_of(pid_t pid) {
  struct stat st {};
  if (::stat(fmt::format("/proc/{}", pid).c_str(), &st) != 0)
    throw ed::ProtocolError("no_such_device", fmt::format("no process {} on this node", pid));
  return st.st_uid;
}

json attribution(const ServeContext& ctx, const Peer& peer, const json& body) {
  const bool all_users = ctx.policy->may_read_all_processes(peer);
  enum { kTree, kCgroup, kAll } scope = kTree;
  unsigned root = static_cast<unsigned>(peer.pid);
  std::string cgroup, scope_text = fmt::format("the process tree of pid {} (you)", peer.pid);
  const std::string s = body.contains("scope") ? ed::string_field(body, "scope") : "self";
  if (body.contains("pid")) {
    const double p = ed::number_field(body, "pid");
    if (!(p >= 1 && p <= 4194304))
      throw ed::ProtocolError("bad_request", fmt::format("\"pid\": {}; expected a process id", p));
    root = static_cast<unsigned>(p);
    if (!all_users && owner_of(static_cast<pid_t>(root)) != peer.uid)
      throw ed::ProtocolError(
          "not_permitted",
          fmt::format("process {} belongs to another user; the daemon's policy does not let user "
                      "{} read other users' per-process figures (read_all_processes)",
                      root, peer.user));
    scope_text = fmt::format("the process tree of pid {}", root);
  } else if (body.contains("cgroup")) {
    cgroup = ed::string_field(body, "cgroup");
    scope = kCgroup;
    scope_text = "cgroup " + cgroup;
  } else if (s == "all") {
    scope = kAll;
    scope_text = all_users ? "every process" : "every process of yours";
  } else if (s != "self") {
    throw ed::ProtocolError("bad_request", fmt::format("\"scope\": \"{}\"; expected \"self\" or "
                                                       "\"all\" (or \"pid\" or \"cgroup\")",
                                                       s.substr(0, 40)));
  }
  const Attribution& a = ctx.reader->attribution();
  json procs = json::array();
  double total = 0;
  bool hidden = false;
  for (const auto& p : a.processes()) {
    const bool match = scope == kAll || (scope == kTree && Attribution::in_tree(p.info, root)) ||
                       (scope == kCgroup &&
                        (p.info.cgroup == cgroup || p.info.cgroup.rfind(cgroup + "/", 0) == 0));
    if (!match) continue;
    if (!all_users && p.info.uid != peer.uid) {
      hidden = true;
      continue;
    }
    total += p.energy_j;
    procs.push_back(
        {{"pid", p.info.pid},
         {"uid", p.info.uid == static_cast<uid_t>(-1) ? json(nullptr) : json(p.info.uid)},
         {"user", p.info.user},
         {"comm", p.info.comm},
         {"cgroup", p.info.cgroup},
         {"gpu", p.gpu},
         {"mig_device", p.device.empty() ? json(nullptr) : json(p.device)},
         {"energy_j", p.energy_j},
         {"exited", p.info.exited}});
  }
  json gpus = json::array();
  for (const auto& g : a.gpus()) {
    json mig = json::array();
    for (const auto& [name, e] : g.mig_instances)
      mig.push_back({{"device", name},
                     {"energy_j", e.energy_j},
                     {"attributed_j", e.attributed_j},
                     {"unattributed_j", std::max(0.0, e.energy_j - e.attributed_j)}});
    gpus.push_back({{"sensor", g.gpu},
                    {"energy_j", g.energy_j},
                    {"attributed_j", g.attributed_j},
                    {"unattributed_j", g.unattributed_j},
                    {"mig_instances", mig},
                    {"note", g.note}});
  }
  json out = {{"t_mono_s", ctx.reader->latest()->sample.t_mono_s},
              {"scope", scope_text},
              {"processes", procs},
              {"total_j", total},
              {"gpus", gpus},
              {"method",
               "attribution, not a measurement: each interval's GPU energy E split as E * u_p / "
               "max(100, sum u), u_p the process's SM utilization (NVML per-process samples); "
               "on a GPU in MIG mode (no per-process utilization there) each instance gets E * "
               "its compute slices / all instances' slices, split equally among its processes"}};
  if (hidden)
    out["hidden"] =
        "processes of other users are left out: the daemon's policy does not grant "
        "you read_all_processes";
  return out;
}

// Whom a set_power_limit is for: the peer, or the user a root peer names in "on_behalf_of"
// {uid, gid} (the SPANK plugin in slurmstepd, for the job's user), whose rules then apply. A
// peer other than root may name only itself.
Peer acting_for(const Peer& peer, const json& body) {
  if (!body.contains("on_behalf_of")) return peer;
  const json& o = body["on_behalf_of"];
  if (!o.is_object())
    throw ed::ProtocolError("bad_request", "\"on_behalf_of\": expected {\"uid\": N, \"gid\": N}");
  auto id = [&o](const char* key) {
    const double v = ed::number_field(o, key);
    if (!(v >= 0 && v < 4294967295.0 && v == std::floor(v)))
      throw ed::ProtocolError("bad_request",
                              fmt::format("\"on_behalf_of\".\"{}\": {}; expected an id", key, v));
    return static_cast<std::uint32_t>(v);
  };
  const uid_t uid = id("uid");
  const gid_t gid = id("gid");
  if (peer.uid != 0) {
    if (uid == peer.uid && gid == peer.gid) return peer;
    throw ed::ProtocolError(
        "not_permitted",
        fmt::format("user {} (uid {}, gid {}) may not ask on behalf of uid {} (gid {}): only root "
                    "may (the Slurm plugin in slurmstepd); a user's own requests are judged by "
                    "the uid of their connection",
                    peer.user, peer.uid, peer.gid, uid, gid));
  }
  Peer p = Peer::of_ids(uid, gid, peer.pid);
  p.via = fmt::format("{}, pid {}", peer.user, peer.pid);
  return p;
}

}  // namespace

json handle_request(const ServeContext& ctx, std::uint64_t conn, const Peer& peer,
                    const ed::Request& req, const std::string& socket_path) {
  const std::string& op = req.op;
  if (op == "hello") return hello(ctx, peer, socket_path);
  if (op == "attribution") return attribution(ctx, peer, req.body);
  if (op == "power_limits") return {{"devices", ctx.leases ? ctx.leases->list() : json::array()}};
  if (op == "set_power_limit" || op == "release_power_limit") {
    const std::string dev = ed::string_field(req.body, "device");
    if (!ctx.leases)
      throw ed::ProtocolError("no_such_device",
                              "this node has no power-limit device the daemon can set");
    json r;
    if (op == "set_power_limit") {
      const double w = ed::number_field(req.body, "limit_w");
      const Peer who = acting_for(peer, req.body);
      const bool clamp = req.body.contains("clamp") && req.body["clamp"].is_boolean() &&
                         req.body["clamp"].get<bool>();
      r = ctx.leases->set(conn, who, *ctx.policy, dev, w, clamp);
      ctx.log(fmt::format("{}: power limit {} W leased to user {} (pid {}{}), was {} W", dev,
                          r["limit_w"].get<double>(), who.user, peer.pid,
                          who.via.empty() ? "" : ", asked on their behalf by " + who.via,
                          r["previous_w"].get<double>()));
    } else {
      r = ctx.leases->release(conn, dev);
      ctx.log(r["log"].get<std::string>());
    }
    return r;
  }
  throw ed::ProtocolError("unknown_op",
                          fmt::format("op \"{}\" is not known; expected hello, read, power_limits, "
                                      "set_power_limit, release_power_limit or attribution",
                                      op.substr(0, 40)));
}

}  // namespace gt::serve
