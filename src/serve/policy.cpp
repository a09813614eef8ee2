// serve/policy.cpp: see policy.h.
#include "serve/policy.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "energy/carbon_regions.h"

namespace gt::serve {

Peer Peer::of_socket(int fd) {
  ucred c{};
  socklen_t len = sizeof c;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0)
    throw Error(fmt::format("SO_PEERCRED: {}", std::strerror(errno)));
  return of_ids(c.uid, c.gid, c.pid);
}

Peer Peer::of_ids(uid_t uid, gid_t gid, pid_t pid) {
  Peer p;
  p.uid = uid;
  p.gid = gid;
  p.pid = pid;
  p.user = std::to_string(uid);
  passwd pw{}, *res = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &res) == 0 && res) {
    p.user = pw.pw_name;
    int n = 64;
    std::vector<gid_t> g(static_cast<std::size_t>(n));
    if (::getgrouplist(pw.pw_name, gid, g.data(), &n) < 0) {
      g.resize(static_cast<std::size_t>(n));
      ::getgrouplist(pw.pw_name, gid, g.data(), &n);
    }
    g.resize(static_cast<std::size_t>(std::max(n, 0)));
    p.groups = g;
  }
  if (std::find(p.groups.begin(), p.groups.end(), gid) == p.groups.end()) p.groups.push_back(gid);
  return p;
}

bool device_matches(const std::string& pattern, const std::string& id) {
  if (!pattern.empty() && pattern.back() == '*')
    return id.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return pattern == id;
}

namespace {

std::string at(const std::string& where, const toml::node& n, const std::string& key) {
  return fmt::format("{}:{}: key '{}'", where, n.source().begin.line, key);
}

std::vector<std::string> string_list(const toml::node& n, const std::string& where,
                                     const std::string& key) {
  std::vector<std::string> out;
  const auto* a = n.as_array();
  if (!a) throw Error(at(where, n, key) + ": expected an array of strings, e.g. [\"alice\"]");
  for (const auto& x : *a) {
    if (auto s = x.value<std::string>())
      out.push_back(*s);
    else if (auto i = x.value<int64_t>())  // a numeric id
      out.push_back(std::to_string(*i));
    else
      throw Error(at(where, x, key) + ": expected names or numeric ids in the array");
  }
  return out;
}

double number(const toml::node& n, const std::string& where, const std::string& key, double lo,
              double hi) {
  auto v = n.value<double>();
  if (!v || !std::isfinite(*v) || *v < lo || *v > hi)
    throw Error(fmt::format("{}: expected a number in [{}, {}]", at(where, n, key), lo, hi));
  return *v;
}

std::string text(const toml::node& n, const std::string& where, const std::string& key) {
  auto v = n.value<std::string>();
  if (!v) throw Error(at(where, n, key) + ": expected a string");
  return *v;
}

bool boolean(const toml::node& n, const std::string& where, const std::string& key) {
  if (!n.is_boolean()) throw Error(at(where, n, key) + ": expected true or false");
  return *n.value<bool>();
}

void daemon_table(const toml::table& t, const std::string& where, Policy& p) {
  const toml::node* utc_offset = nullptr;  // where carbon_utc_offset_h was set, for messages
  const toml::node* unit = nullptr;        // where carbon_unit was set
  for (auto&& [k, v] : t) {
    const std::string key = "daemon." + std::string(k.str());
    const std::string name(k.str());
    if (name == "socket") {
      p.socket = text(v, where, key);
    } else if (name == "socket_mode") {
      const std::string s = text(v, where, key);
      char* end = nullptr;
      const unsigned long m = std::strtoul(s.c_str(), &end, 8);
      if (s.empty() || *end || m > 0777)
        throw Error(at(where, v, key) + ": '" + s + "': expected octal permissions, e.g. \"0660\"");
      p.socket_mode = static_cast<unsigned>(m);
    } else if (name == "socket_group") {
      p.socket_group = text(v, where, key);
    } else if (name == "state_file") {
      p.state_file = text(v, where, key);
    } else if (name == "interval_ms") {
      p.interval_s = number(v, where, key, 1, 60000) / 1000.0;
    } else if (name == "max_clients") {
      p.max_clients = static_cast<int>(number(v, where, key, 1, 100000));
    } else if (name == "prometheus_port") {
      p.prometheus_port = static_cast<int>(number(v, where, key, 0, 65535));
    } else if (name == "prometheus_per_process") {
      p.prometheus_per_process = boolean(v, where, key);
    } else if (name == "carbon_intensity") {
      p.carbon_intensity = number(v, where, key, 0, 1e5);
    } else if (name == "carbon_csv") {
      p.carbon_csv = text(v, where, key);
    } else if (name == "carbon_region") {
      p.carbon_region = text(v, where, key);
      energy::country_or_throw(p.carbon_region, at(where, v, key));  // measure's look-up
    } else if (name == "carbon_utc_offset_h") {
      p.carbon_utc_offset_h = number(v, where, key, -14, 14);
      utc_offset = &v;
    } else if (name == "carbon_unit") {
      p.carbon_unit = text(v, where, key);
      if (auto e = energy::carbon_choice_error("unit", p.carbon_unit); !e.empty())
        throw Error(at(where, v, key) + ": unit " + e);
      unit = &v;
    } else {
      throw Error(at(where, v, key) +
                  " is unknown; known keys of [daemon] are socket, socket_mode, socket_group, "
                  "state_file, interval_ms, max_clients, prometheus_port, prometheus_per_process, "
                  "carbon_intensity, carbon_csv, carbon_region, carbon_utc_offset_h, carbon_unit");
    }
  }
  if (p.carbon_intensity && !p.carbon_csv.empty())
    throw Error(where + ": [daemon] has both carbon_intensity and carbon_csv; expected one");
  // as measure and train refuse them: how a series is read, and no series to read
  if (p.carbon_csv.empty() && unit)
    throw Error(
        fmt::format("{} = '{}': says how a series file is read; expected daemon.carbon_csv "
                    "with it (carbon_intensity is in gCO2e/kWh)",
                    at(where, *unit, "daemon.carbon_unit"), p.carbon_unit));
  if (p.carbon_csv.empty() && utc_offset)
    energy::CarbonReadOptions{}.refuse_without_series(
        "daemon.carbon_csv", p.carbon_utc_offset_h,
        at(where, *utc_offset, "daemon.carbon_utc_offset_h"));
}

AllowRule allow_table(const toml::table& t, const std::string& where) {
  AllowRule r;
  r.line = static_cast<int>(t.source().begin.line);
  for (auto&& [k, v] : t) {
    const std::string name(k.str()), key = "allow." + name;
    if (name == "users")
      r.users = string_list(v, where, key);
    else if (name == "groups")
      r.groups = string_list(v, where, key);
    else if (name == "power_limit")
      r.power_limit = string_list(v, where, key);
    else if (name == "min_w")
      r.min_w = number(v, where, key, 0, 1e5);
    else if (name == "max_w")
      r.max_w = number(v, where, key, 0, 1e5);
    else if (name == "read_all_processes")
      r.read_all_processes = boolean(v, where, key);
    else
      throw Error(at(where, v, key) +
                  " is unknown; known keys of [[allow]] are users, groups, power_limit, min_w, "
                  "max_w, read_all_processes");
  }
  if (r.users.empty() && r.groups.empty())
    throw Error(
        fmt::format("{}:{}: an [[allow]] rule names no users and no groups; expected "
                    "users = [...] or groups = [...]",
                    where, r.line));
  // a range bounds the limits the rule grants: without power_limit it grants none, and the key
  // would be read as a restriction that does nothing
  for (const auto& [key, w] : {std::pair{"min_w", r.min_w}, std::pair{"max_w", r.max_w}})
    if (w && r.power_limit.empty())
      throw Error(fmt::format(
          "{}:{}: [[allow]] {} = {} has no effect: the rule grants no power limit; expected "
          "power_limit = [\"nvml:*\"] (the devices it bounds) beside it, or no {}",
          where, r.line, key, *w, key));
  if (r.min_w && r.max_w && *r.min_w > *r.max_w)
    throw Error(fmt::format("{}:{}: [[allow]] min_w {} W > max_w {} W; expected min_w <= max_w",
                            where, r.line, *r.min_w, *r.max_w));
  return r;
}

bool is_number(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool names_user(const AllowRule& r, const Peer& p) {
  for (const auto& u : r.users)
    if (u == p.user || (is_number(u) && std::stoul(u) == p.uid)) return true;
  for (const auto& g : r.groups) {
    gid_t gid = 0;
    if (is_number(g)) {
      gid = static_cast<gid_t>(std::stoul(g));
    } else {
      group gr{}, *res = nullptr;
      std::vector<char> buf(16384);
      if (::getgrnam_r(g.c_str(), &gr, buf.data(), buf.size(), &res) != 0 || !res) continue;
      gid = gr.gr_gid;
    }
    if (std::find(p.groups.begin(), p.groups.end(), gid) != p.groups.end()) return true;
  }
  return false;
}

}  // namespace

Policy Policy::parse(const std::string& src, const std::string& where) {
  toml::table tbl;
  try {
    tbl = toml::parse(src, where);
  } catch (const toml::parse_error& e) {
    throw Error(fmt::format("{}:{}:{}: {}", where, e.source().begin.line, e.source().begin.column,
                            e.description()));
  }
  Policy p;
  p.path = where;
  for (auto&& [k, v] : tbl) {
    const std::string name(k.str());
    if (name == "daemon") {
      const auto* t = v.as_table();
      if (!t) throw Error(at(where, v, name) + ": expected a table [daemon]");
      daemon_table(*t, where, p);
    } else if (name == "allow") {
      const auto* a = v.as_array();
      if (!a || !a->is_array_of_tables())
        throw Error(at(where, v, name) + ": expected rules as [[allow]] blocks");
      for (const auto& x : *a) p.rules.push_back(allow_table(*x.as_table(), where));
    } else {
      throw Error(at(where, v, name) + " is unknown; expected [daemon] or [[allow]] blocks");
    }
  }
  return p;
}

Policy Policy::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(fmt::format("{}: cannot open the policy file", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return parse(ss.str(), path);
}

LimitGrant Policy::power_limit_grant(const Peer& peer, const std::string& device_id,
                                     double dev_min_w, double dev_max_w) const {
  LimitGrant g;
  if (peer.uid == 0) {
    g.allowed = true;
    g.min_w = dev_min_w;
    g.max_w = dev_max_w;
    return g;
  }
  bool any = false;
  double lo = 1e300, hi = -1e300;
  for (const auto& r : rules) {
    if (!names_user(r, peer)) continue;
    bool dev = false;
    for (const auto& pat : r.power_limit) dev = dev || device_matches(pat, device_id);
    if (!dev) continue;
    any = true;
    lo = std::min(lo, r.min_w.value_or(dev_min_w));
    hi = std::max(hi, r.max_w.value_or(dev_max_w));
  }
  if (!any) {
    g.why = fmt::format(
        "user {} (uid {}{}) may not set the power limit of {}: no [[allow]] rule of the daemon's "
        "policy ({}) grants it (power_limit = [\"{}\"]); reading is open to everyone",
        peer.user, peer.uid, peer.via.empty() ? "" : ", on whose behalf " + peer.via + " asked",
        device_id, path.empty() ? "built-in: read-only for everyone" : path, device_id);
    return g;
  }
  g.min_w = std::max(lo, dev_min_w);
  g.max_w = std::min(hi, dev_max_w);
  if (g.min_w > g.max_w) {
    g.why = fmt::format("the policy's range for {} lies outside the device's [{}, {}] W", device_id,
                        dev_min_w, dev_max_w);
    return g;
  }
  g.allowed = true;
  return g;
}

std::vector<std::string> Policy::warnings() const {
  std::vector<std::string> out;
  std::vector<char> buf(16384);
  const auto user_exists = [&buf](const std::string& name) {
    passwd pw{}, *res = nullptr;
    return ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &res) == 0 && res;
  };
  const auto group_exists = [&buf](const std::string& name) {
    group gr{}, *res = nullptr;
    return ::getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &res) == 0 && res;
  };
  // a name (not a number) the look-up does not find; `word` is "user" or "group", `by` what the
  // rule matches by ("name", "group")
  const auto warn_unknown = [&](const AllowRule& r, const std::vector<std::string>& names,
                                const auto& exists, const char* word, const char* by) {
    for (const auto& n : names)
      if (!is_number(n) && !exists(n))
        out.push_back(fmt::format(
            "{}:{}: [[allow]] {} '{}' does not exist on this machine: the rule matches no one "
            "by that {}",
            path, r.line, word, n, by));
  };
  for (const auto& r : rules) {
    warn_unknown(r, r.users, user_exists, "user", "name");
    warn_unknown(r, r.groups, group_exists, "group", "group");
  }
  return out;
}

energy::CarbonIntensity Policy::carbon() const {
  const std::string of = path.empty() ? "" : " of " + path;
  // none set: the default says where the daemon's is set (not train's or measure's options)
  energy::CarbonIntensity c = energy::CarbonIntensity::world_average(fmt::format(
      "carbon_region, carbon_intensity or carbon_csv in the [daemon] table of the daemon's "
      "policy ({})",
      path.empty() ? "none was read: /etc/greentrain/serve.toml or serve --policy FILE" : path));
  if (!carbon_csv.empty()) {
    energy::CarbonReadOptions read;
    read.unit = carbon_unit;
    read.option_prefix = "daemon.carbon_";  // a warning's hint names the policy's key
    c = energy::CarbonIntensity::from_csv(carbon_csv, carbon_utc_offset_h, "", read);
  } else if (carbon_intensity)
    c = energy::CarbonIntensity::constant(*carbon_intensity, "", "daemon.carbon_intensity" + of);
  else if (!carbon_region.empty())
    c = energy::CarbonIntensity::for_country(carbon_region, "daemon.carbon_region" + of);
  if (!carbon_region.empty() && c.origin() != energy::CarbonOrigin::kCountry)
    c = c.with_country(carbon_region, "daemon.carbon_region" + of);
  return c;
}

bool Policy::may_read_all_processes(const Peer& peer) const {
  if (peer.uid == 0) return true;
  for (const auto& r : rules)
    if (r.read_all_processes && names_user(r, peer)) return true;
  return false;
}

}  // namespace gt::serve
