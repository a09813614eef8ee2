// tests/serve/test_protocol.cpp: the daemon protocol's framing and parsing (both ends use it),
// the policy file, and the attribution formula against hand-computed shares.
#include <gtest/gtest.h>
#include <unistd.h>

#include "core/error.h"
#include "energy/daemon_protocol.h"
#include "serve/attribution.h"
#include "serve/policy.h"

namespace gt::serve {
namespace ed = energy::daemon;
using nlohmann::json;

TEST(Protocol, FramesSplitAnywhereAreReassembled) {
  std::string stream;
  ed::append_frame(stream, R"({"v":1,"op":"hello"})");
  ed::append_frame(stream, R"({"v":1,"op":"read","fresh":true})");
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    ed::FrameReader r(ed::kMaxRequestBytes);
    std::vector<std::string> got;
    std::string p;
    r.feed(stream.data(), cut);
    while (r.next(&p) == ed::FrameReader::Status::kFrame) got.push_back(p);
    r.feed(stream.data() + cut, stream.size() - cut);
    while (r.next(&p) == ed::FrameReader::Status::kFrame) got.push_back(p);
    ASSERT_EQ(got.size(), 2u) << cut;
    EXPECT_EQ(got[1], R"({"v":1,"op":"read","fresh":true})");
    EXPECT_EQ(r.buffered(), 0u);
  }
}

TEST(Protocol, OversizedLengthIsRefusedBeforeItArrives) {
  ed::FrameReader r(ed::kMaxRequestBytes);
  const unsigned char len[4] = {0x00, 0x01, 0x00, 0x01};  // 65537 bytes
  r.feed(reinterpret_cast<const char*>(len), 4);
  std::string p;
  EXPECT_EQ(r.next(&p), ed::FrameReader::Status::kTooLarge);
  EXPECT_EQ(*r.pending_length(), 65537u);
  std::string out;
  EXPECT_THROW(
      ed::append_frame(out, std::string(ed::kMaxRequestBytes + 1, 'x'), ed::kMaxRequestBytes),
      ed::ProtocolError);
}

TEST(Protocol, BadRequestsGetTheirCode) {
  auto code = [](const std::string& s) {
    try {
      ed::parse_request(s);
    } catch (const ed::ProtocolError& e) {
      return e.code();
    }
    return std::string("ok");
  };
  EXPECT_EQ(code("{\"v\":1,\"op\":\"read\"}"), "ok");
  EXPECT_EQ(code("{\"v\":1,\"op\":"), "bad_json");
  EXPECT_EQ(code("[1,2]"), "bad_json");
  EXPECT_EQ(code("{\"v\":2,\"op\":\"read\"}"), "unknown_version");
  EXPECT_EQ(code("{\"op\":\"read\"}"), "unknown_version");
  EXPECT_EQ(code("{\"v\":1}"), "bad_request");
  EXPECT_EQ(code("{\"v\":1,\"op\":7}"), "bad_request");
  const json e = json::parse(ed::error_response(5, "unknown_version", "x"));
  EXPECT_EQ(e["versions"], json::array({1}));
  EXPECT_EQ(e["id"], 5);
  EXPECT_FALSE(e["ok"].get<bool>());
}

TEST(Protocol, SampleAndSensorRoundTrip) {
  ed::Sample s;
  s.seq = 42;
  s.t_mono_s = 123.5;
  s.instance = "7-abc";
  s.carbon_g_per_kwh = 300;
  ed::SensorReading r;
  r.sensor = "rapl:package-0";
  r.energy_j = 10.25;
  r.power_w = 5;
  r.untrusted_s = 0.5;
  r.note = "reading failed: x";
  s.readings.push_back(r);
  const ed::Sample b = ed::sample_from_json(json::parse(ed::sample_to_json(s).dump()));
  EXPECT_EQ(b.seq, 42u);
  EXPECT_EQ(b.instance, "7-abc");
  ASSERT_EQ(b.readings.size(), 1u);
  EXPECT_DOUBLE_EQ(b.readings[0].energy_j, 10.25);
  EXPECT_DOUBLE_EQ(*b.readings[0].power_w, 5);
  EXPECT_EQ(b.readings[0].note, "reading failed: x");
  energy::SensorInfo i;
  i.name = "nvml:0";
  i.kind = energy::SensorKind::kPowerGauge;
  i.wrap_j = 262143.0;
  const auto j = ed::sensor_info_from_json(ed::sensor_info_to_json(i));
  EXPECT_EQ(j.kind, energy::SensorKind::kPowerGauge);
  EXPECT_DOUBLE_EQ(*j.wrap_j, 262143.0);
  EXPECT_THROW(ed::sample_from_json(json::parse(R"({"seq":1,"t_mono_s":"x","readings":[]})")),
               ed::ProtocolError);
  EXPECT_THROW(ed::sensor_info_from_json(json::parse(R"({"name":"a","kind":"magic"})")),
               ed::ProtocolError);
}

// ------------------------------------------------------------------------------------ policy
Peer peer(uid_t uid, const std::string& user, std::vector<gid_t> groups = {}) {
  Peer p;
  p.uid = uid;
  p.user = user;
  p.groups = std::move(groups);
  return p;
}

// The error Policy::parse gives for `text` read as p.toml; "parsed" when there is none.
std::string policy_error(const std::string& text) {
  try {
    Policy::parse(text, "p.toml");
  } catch (const Error& e) {
    return e.what();
  }
  return "parsed";
}

TEST(Policy, RulesGrantDevicesWithinTheirRange) {
  const Policy p = Policy::parse(R"(
[daemon]
interval_ms = 50
prometheus_port = 9464
socket_mode = "0660"

[[allow]]
users = ["alice", "1234"]
power_limit = ["nvml:*"]
min_w = 150
max_w = 250

[[allow]]
groups = ["4321"]
power_limit = ["rapl:intel-rapl:0"]
read_all_processes = true
)",
                                 "serve.toml");
  EXPECT_DOUBLE_EQ(p.interval_s, 0.05);
  EXPECT_EQ(p.prometheus_port, 9464);
  EXPECT_EQ(p.socket_mode, 0660u);
  auto g = p.power_limit_grant(peer(1000, "alice"), "nvml:1", 100, 400);
  EXPECT_TRUE(g.allowed);
  EXPECT_DOUBLE_EQ(g.min_w, 150);
  EXPECT_DOUBLE_EQ(g.max_w, 250);
  EXPECT_TRUE(p.power_limit_grant(peer(1234, "x"), "nvml:0", 100, 400).allowed);  // by uid
  g = p.power_limit_grant(peer(1000, "alice"), "rapl:intel-rapl:0", 10, 100);
  EXPECT_FALSE(g.allowed);
  EXPECT_NE(g.why.find("user alice"), std::string::npos) << g.why;
  EXPECT_NE(g.why.find("[[allow]]"), std::string::npos) << g.why;
  g = p.power_limit_grant(peer(1001, "bob", {4321}), "rapl:intel-rapl:0", 10, 100);
  EXPECT_TRUE(g.allowed);  // by group, the device's own range
  EXPECT_DOUBLE_EQ(g.max_w, 100);
  EXPECT_TRUE(p.may_read_all_processes(peer(1001, "bob", {4321})));
  EXPECT_FALSE(p.may_read_all_processes(peer(1000, "alice")));
  EXPECT_TRUE(p.may_read_all_processes(peer(0, "root")));
  EXPECT_TRUE(p.power_limit_grant(peer(0, "root"), "rapl:intel-rapl:0", 10, 100).allowed);
  EXPECT_FALSE(Policy{}.power_limit_grant(peer(1000, "alice"), "nvml:0", 100, 400).allowed);
}

TEST(Policy, BadFilesNameTheLineAndKey) {
  EXPECT_NE(policy_error("[daemon]\nintervl_ms = 5\n")
                .find("p.toml:2: key 'daemon.intervl_ms' is unknown"),
            std::string::npos);
  EXPECT_NE(policy_error("[daemon]\nsocket_mode = \"999\"\n").find("expected octal"),
            std::string::npos);
  EXPECT_NE(policy_error("[[allow]]\npower_limit = [\"nvml:0\"]\n").find("names no users"),
            std::string::npos);
  EXPECT_NE(policy_error("[[allow]]\nusers = [\"a\"]\nmin_w = 300\nmax_w = 200\n").find("min_w"),
            std::string::npos);
  EXPECT_NE(policy_error("[daemon\n").find("p.toml:1:"), std::string::npos);
  EXPECT_NE(policy_error("[daemon]\ninterval_ms = -1\n").find("expected a number in [1, 60000]"),
            std::string::npos);
  // the example shipped beside the systemd unit parses
  EXPECT_NO_THROW(Policy::load(GT_SOURCE_DIR "/packaging/serve.toml"));
  EXPECT_TRUE(device_matches("nvml:*", "nvml:12"));
  EXPECT_FALSE(device_matches("nvml:1", "nvml:12"));
  EXPECT_TRUE(device_matches("*", "rapl:intel-rapl:0"));
}

// The policy's [daemon] carbon keys give what measure's options give: carbon_region is the
// country's figure (measure --carbon-region DEU: 365.477 g/kWh), not a label on the 475 default;
// a series' time zone or unit without a series is refused, naming the file, line and key, and
// a unit that is not one of the choices.
TEST(Policy, CarbonRegionIsTheCountrysFigureAndOffsetsNeedASeries) {
  Policy p = Policy::parse("[daemon]\ncarbon_region = \"DEU\"\n", "p.toml");
  energy::CarbonIntensity c = p.carbon();
  EXPECT_EQ(c.origin(), energy::CarbonOrigin::kCountry);
  ASSERT_TRUE(c.constant_g_per_kwh());
  EXPECT_DOUBLE_EQ(*c.constant_g_per_kwh(), 365.477);
  EXPECT_EQ(c.country_iso_code(), "DEU");
  EXPECT_NE(c.describe().find("daemon.carbon_region of p.toml"), std::string::npos) << c.describe();
  // beside a constant it names the country the constant is for
  p = Policy::parse("[daemon]\ncarbon_intensity = 300\ncarbon_region = \"FRA\"\n", "p.toml");
  c = p.carbon();
  EXPECT_EQ(c.origin(), energy::CarbonOrigin::kConstant);
  EXPECT_DOUBLE_EQ(*c.constant_g_per_kwh(), 300);
  EXPECT_EQ(c.country_iso_code(), "FRA");
  EXPECT_EQ(Policy{}.carbon().origin(), energy::CarbonOrigin::kDefault);
  EXPECT_NE(Policy::parse("", "p.toml")
                .carbon()
                .describe()
                .find("[daemon] table of the daemon's "
                      "policy (p.toml)"),
            std::string::npos)
      << Policy::parse("", "p.toml").carbon().describe();
  std::string m = policy_error("[daemon]\ncarbon_region = \"Germany\"\n");
  EXPECT_NE(m.find("p.toml:2: key 'daemon.carbon_region'"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown country code"), std::string::npos) << m;
  m = policy_error("[daemon]\ncarbon_intensity = 300\ncarbon_utc_offset_h = 2\n");
  EXPECT_NE(m.find("p.toml:3: key 'daemon.carbon_utc_offset_h' = 2"), std::string::npos) << m;
  EXPECT_NE(m.find("expected daemon.carbon_csv with it"), std::string::npos) << m;
  // 0 is UTC, the default
  EXPECT_EQ(policy_error("[daemon]\ncarbon_utc_offset_h = 0\n"), "parsed");
  // carbon_unit (what the daemon's warning of a series in kg/kWh asks for): one of the units,
  // and only with a series
  EXPECT_EQ(policy_error("[daemon]\ncarbon_csv = \"ci.csv\"\ncarbon_unit = \"kg/kWh\"\n"),
            "parsed");
  m = policy_error("[daemon]\ncarbon_csv = \"ci.csv\"\ncarbon_unit = \"kg\"\n");
  EXPECT_NE(m.find("p.toml:3: key 'daemon.carbon_unit': unit 'kg' is not known; expected g/kWh"),
            std::string::npos)
      << m;
  m = policy_error("[daemon]\ncarbon_intensity = 300\ncarbon_unit = \"kg/kWh\"\n");
  EXPECT_NE(m.find("p.toml:3: key 'daemon.carbon_unit' = 'kg/kWh': says how a series file is read; "
                   "expected daemon.carbon_csv with it"),
            std::string::npos)
      << m;
}

// A range in a rule that grants no power limit bounds nothing: refused (it was accepted and did
// nothing). A user or group this machine does not know is a warning the daemon logs at start.
TEST(Policy, ARangeWithoutPowerLimitIsRefusedAndUnknownNamesAreWarned) {
  const std::string m = policy_error("[[allow]]\ngroups = [\"ml\"]\nmin_w = 150\n");
  EXPECT_NE(m.find("p.toml:1: [[allow]] min_w = 150 has no effect"), std::string::npos) << m;
  EXPECT_NE(m.find("power_limit"), std::string::npos) << m;
  const Policy p = Policy::parse(R"([[allow]]
users = ["root", "gt-no-such-user", "4242"]
groups = ["gt-no-such-group", "root", "4343"]
power_limit = ["nvml:*"]
min_w = 100
)",
                                 "p.toml");
  const auto w = p.warnings();
  ASSERT_EQ(w.size(), 2u) << (w.empty() ? "" : w[0]);
  EXPECT_NE(w[0].find("p.toml:1: [[allow]] user 'gt-no-such-user' does not exist"),
            std::string::npos)
      << w[0];
  EXPECT_NE(w[1].find("p.toml:1: [[allow]] group 'gt-no-such-group' does not exist"),
            std::string::npos)
      << w[1];
}

// ------------------------------------------------------------------------------- attribution
TEST(Attribution, SplitsByUtilizationAndKeepsTheRestApart) {
  // 1000 J; A 30 %, B 50 %: A 300 J, B 500 J, 200 J unattributed.
  auto s = split_energy(1000, {{11, 30}, {22, 50}});
  ASSERT_EQ(s.per_pid_j.size(), 2u);
  EXPECT_DOUBLE_EQ(s.per_pid_j[0].second, 300);
  EXPECT_DOUBLE_EQ(s.per_pid_j[1].second, 500);
  EXPECT_DOUBLE_EQ(s.unattributed_j, 200);
  // Over 100 % (overlapping samples): 600 J in the ratio 80:40, nothing left over.
  s = split_energy(600, {{11, 80}, {22, 40}});
  EXPECT_DOUBLE_EQ(s.per_pid_j[0].second, 400);
  EXPECT_DOUBLE_EQ(s.per_pid_j[1].second, 200);
  EXPECT_DOUBLE_EQ(s.unattributed_j, 0);
  // No process: all unattributed; a pid listed twice is one process.
  EXPECT_DOUBLE_EQ(split_energy(50, {}).unattributed_j, 50);
  s = split_energy(100, {{7, 10}, {7, 15}});
  ASSERT_EQ(s.per_pid_j.size(), 1u);
  EXPECT_DOUBLE_EQ(s.per_pid_j[0].second, 25);
}

TEST(Attribution, CumulativePerProcessAndTreeMembership) {
  Attribution a;
  const unsigned me = static_cast<unsigned>(::getpid());
  a.add("nvml:0", 100, {{me, 50}}, "", 1e9);
  a.add("nvml:0", 200, {{me, 25}, {999999999u, 25}}, "", 1e9 + 1);
  a.add("nvml:0", 40, {}, "NVML: Not Supported", 1e9 + 2);
  double mine = 0, other = 0;
  for (const auto& p : a.processes()) {
    if (p.info.pid == me) {
      mine = p.energy_j;
      EXPECT_EQ(p.info.uid, ::getuid());
      EXPECT_TRUE(Attribution::in_tree(p.info, me));
      EXPECT_TRUE(Attribution::in_tree(p.info, static_cast<unsigned>(::getppid())));
    } else {
      other = p.energy_j;
      EXPECT_TRUE(p.info.exited);  // no such process: its owner is unknown
    }
  }
  EXPECT_DOUBLE_EQ(mine, 50 + 50);
  EXPECT_DOUBLE_EQ(other, 50);
  const auto g = a.gpus();
  ASSERT_EQ(g.size(), 1u);
  EXPECT_DOUBLE_EQ(g[0].energy_j, 340);
  EXPECT_DOUBLE_EQ(g[0].attributed_j, 150);
  EXPECT_DOUBLE_EQ(g[0].unattributed_j, 190);
  EXPECT_NE(g[0].note.find("Not Supported"), std::string::npos);
}

}  // namespace gt::serve
