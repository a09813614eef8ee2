// tests/serve/test_serve_cli.cpp: `greentrain serve` end to end, with the stand-in NVML and a
// stand-in RAPL tree: two `greentrain measure` side by side get the same counter energy; tune
// and train.power_limit set and restore limits through the daemon for a user NVML refuses;
// SIGKILL of a limit's holder and of the daemon itself leave no device capped; a real
// Prometheus server scrapes the daemon. The authorization test with two real Unix users is in
// test_serve_users.cpp.
#include "serve_cli_util.h"

namespace gt::serve {
using namespace test;
using nlohmann::json;

// Issue 28, done-when: two measures side by side both get energy, the counters' energy over
// their windows, as one alone would.
TEST(ServeCli, TwoMeasuresSideBySideGetTheSameCounterEnergy) {
  Node n;
  Proc daemon = n.start_daemon();
  auto run_measure = [&](const std::string& tag) {
    return n.spawn({"measure", "--json=" + n.file(tag + ".json"), "--", "sh", "-c",
                    "touch " + n.file(tag + ".started") + "; while [ ! -e " + n.file("go") +
                        " ]; do sleep 0.02; done"},
                   n.client_env(), tag);
  };
  Proc a = run_measure("a"), b = run_measure("b"), killed = run_measure("killed");
  ASSERT_TRUE(wait_for_file(n.file("a.started"), 20)) << a.output();
  ASSERT_TRUE(wait_for_file(n.file("b.started"), 20)) << b.output();
  ASSERT_TRUE(wait_for_file(n.file("killed.started"), 20)) << killed.output();
  killed.kill(SIGKILL);  // a client killed mid-window: the others go on
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  n.add_energy(/*gpu_j=*/1000, /*cpu_j=*/500);  // while both windows are open
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  energy::test::write_file(n.file("go"), "");
  ASSERT_EQ(a.wait(), 0) << a.output();
  ASSERT_EQ(b.wait(), 0) << b.output();
  for (const char* tag : {"a", "b"}) {
    std::ifstream f(n.file(std::string(tag) + ".json"));
    const json j = json::parse(f);
    double gpu = -1, cpu = -1;
    for (const auto& d : j["domains"]) {
      if (d["sensor"] == "nvml:0") gpu = d["energy_j"].get<double>();
      if (d["sensor"] == "rapl:package-0") cpu = d["energy_j"].get<double>();
    }
    EXPECT_NEAR(gpu, 1000, 1e-6) << tag << ": " << j.dump();
    EXPECT_NEAR(cpu, 500, 1e-6) << tag << ": " << j.dump();
  }
  EXPECT_NE(a.output().find("through greentrain serve"), std::string::npos) << a.output();
  daemon.stop();
}

// Without a daemon the second reader has no figures, and is told who reads and what to do.
TEST(ServeCli, WithoutADaemonTheSecondReaderIsToldWhatToDo) {
  Node n;
  auto env = n.client_env();
  Proc a = n.spawn({"measure", "--", "sh", "-c",
                    "touch " + n.file("a.started") + "; while [ ! -e " + n.file("go") +
                        " ]; do sleep 0.02; done"},
                   env, "a");
  ASSERT_TRUE(wait_for_file(n.file("a.started"), 20)) << a.output();
  Proc b = n.spawn({"measure", "--", "true"}, env, "b");
  ASSERT_EQ(b.wait(), 0) << b.output();
  const std::string out = b.output();
  EXPECT_NE(out.find("energy        unknown"), std::string::npos) << out;
  EXPECT_NE(out.find("not the reader: process " + std::to_string(a.pid)), std::string::npos) << out;
  EXPECT_NE(out.find("start `greentrain serve`"), std::string::npos) << out;
  energy::test::write_file(n.file("go"), "");
  EXPECT_EQ(a.wait(), 0) << a.output();
}

// A daemon runs, on a socket measure does not look at: measure is told to set GT_DAEMON_SOCKET
// to it (it said "start `greentrain serve`", which runs already).
TEST(ServeCli, ADaemonOnAnotherSocketIsNamedForGtDaemonSocket) {
  Node n;
  Proc daemon = n.start_daemon();
  auto env = n.client_env();
  for (auto& e : env)
    if (e.rfind("GT_DAEMON_SOCKET=", 0) == 0) e = "GT_DAEMON_SOCKET=" + n.file("elsewhere.sock");
  Proc m = n.spawn({"measure", "--", "true"}, env, "m");
  ASSERT_EQ(m.wait(), 0) << m.output();
  const std::string out = m.output();
  EXPECT_NE(out.find("set GT_DAEMON_SOCKET=" + n.socket), std::string::npos) << out;
  EXPECT_NE(out.find("looked for it at " + n.file("elsewhere.sock")), std::string::npos) << out;
  EXPECT_EQ(out.find("start `greentrain serve`"), std::string::npos) << out;
  daemon.stop();
}

TEST(ServeCli, SensorsAndStatusSayTheyReadThroughTheDaemon) {
  Node n;
  Proc daemon = n.start_daemon();
  Proc s = n.spawn({"sensors"}, n.client_env(), "sensors");
  ASSERT_EQ(s.wait(), 0) << s.output();
  EXPECT_NE(s.output().find("readings: through greentrain serve (pid " +
                            std::to_string(daemon.pid) + ")"),
            std::string::npos)
      << s.output();
  Proc st = n.spawn({"serve", "--status"}, n.client_env(), "status");
  ASSERT_EQ(st.wait(), 0) << st.output();
  EXPECT_NE(st.output().find("sensor nvml:0"), std::string::npos) << st.output();
  EXPECT_NE(st.output().find("power limit nvml:0"), std::string::npos) << st.output();
  // no intensity in the policy: --status says where the daemon's is set (it named train's
  // energy.carbon_* keys and measure's --carbon-* options, which do not set the daemon's)
  EXPECT_NE(st.output().find("set carbon_region, carbon_intensity or carbon_csv in the [daemon] "
                             "table of the daemon's policy"),
            std::string::npos)
      << st.output();
  EXPECT_EQ(st.output().find("energy.carbon_"), std::string::npos) << st.output();
  // a second daemon on the same socket refuses to start, naming the first
  Proc two = n.spawn({"serve", "--foreground", "--socket", n.socket}, n.daemon_env(), "two");
  EXPECT_NE(two.wait(), 0);
  EXPECT_NE(two.output().find("already serves there"), std::string::npos) << two.output();
  daemon.stop();
}

// The daemon tells its clients the node's AMD GPUs (ROCm SMI's count) in hello, and a job
// resolves its ROCR_VISIBLE_DEVICES against them as a direct reader does: given GPU 3 of a node
// whose daemon reads GPUs 0 and 1 only (its own ROCR_VISIBLE_DEVICES), the job sees GPU 3, not
// read. Before, its entry 3 lay above the daemon's highest GPU and the job saw no AMD GPU.
TEST(ServeCli, HelloTellsTheNodesAmdGpusAndAJobsVisibleGpusAreResolvedAgainstThem) {
  Node n;
  auto amd = [](std::vector<std::string> env, const std::string& visible) {
    for (auto& e : env)
      if (e.rfind("GT_ROCM_SMI_LIBRARY=", 0) == 0) e = "GT_ROCM_SMI_LIBRARY=" GT_FAKE_ROCM_SMI;
    env.push_back("FAKE_RSMI_DEVICES=4");
    env.push_back("ROCR_VISIBLE_DEVICES=" + visible);
    return env;
  };
  Proc daemon = n.spawn({"serve", "--foreground", "--socket", n.socket, "--state-file",
                         n.file("state.json"), "--interval", "50"},
                        amd(n.daemon_env(), "0,1"), "amd-daemon");
  std::unique_ptr<energy::daemon::DaemonClient> c;
  ASSERT_TRUE(wait_until(
      [&] {
        std::string why;
        c = energy::daemon::DaemonClient::connect(n.socket, &why, nullptr, 1);
        return c != nullptr;
      },
      20))
      << daemon.output();
  EXPECT_EQ(c->hello().value("node_gpus", json()), (json{{"amd", 4}})) << c->hello().dump(2);
  Proc s = n.spawn({"sensors"}, amd(n.client_env(), "3"), "amd-sensors");
  ASSERT_EQ(s.wait(), 0) << s.output();
  EXPECT_NE(s.output().find("does not read this GPU (rocm-3)"), std::string::npos) << s.output();
  EXPECT_EQ(s.output().find("no AMD GPU visible"), std::string::npos) << s.output();
  c.reset();
  daemon.stop();
}

// Issue 28, done-when: a user NVML refuses (FAKE_NVML_SET_RC=4 in the client only: no root)
// runs `tune --objective energy`: the daemon sets each candidate limit and the original comes
// back at the end.
TEST(ServeCli, TuneWithoutRootSetsAndRestoresLimitsThroughTheDaemon) {
  Node n;
  n.scripted_energy = false;
  Proc daemon = n.start_daemon();
  auto env = n.client_env();
  env.push_back("FAKE_NVML_SET_RC=4");  // direct NVML: "Insufficient Permissions"
  Proc t = n.spawn(n.tune_args(1), env, "tune");
  ASSERT_EQ(t.wait(), 0) << t.output();
  EXPECT_NE(t.output().find("through greentrain serve"), std::string::npos) << t.output();
  EXPECT_NE(t.output().find("chosen power limit"), std::string::npos) << t.output();
  const std::string sets = energy::test::read_text(n.file("set.log"));
  for (const char* w : {"0 400000 0", "0 300000 0", "0 200000 0", "0 100000 0"})
    EXPECT_NE(sets.find(w), std::string::npos) << w << " in\n" << sets;
  EXPECT_EQ(n.limit_mw(), 300000u);
  daemon.stop();
}

// Issue 28: `train.power_limit` works without root through the daemon. The client's NVML
// refuses to set limits (FAKE_NVML_SET_RC=4) and train.power_limit_required makes a limit not
// applied an error, so the run succeeds only if the daemon set it (its set log, kept by the
// daemon's NVML alone, shows 200 W); the lease ends with the run and 300 W is back.
TEST(ServeCli, TrainPowerLimitWithoutRootIsSetAndRestoredThroughTheDaemon) {
  Node n;
  n.scripted_energy = false;
  Proc daemon = n.start_daemon();
  auto env = n.client_env();
  env.push_back("FAKE_NVML_SET_RC=4");  // direct NVML: "Insufficient Permissions"
  const std::string out = n.file("run");
  Proc t = n.spawn({"train", n.tiny_config(), "--out", out, "--set", "train.max_steps=20", "--set",
                    "train.power_limit=200", "--set", "train.power_limit_required=true"},
                   env, "train");
  ASSERT_EQ(t.wait(), 0) << t.output();
  EXPECT_NE(t.output().find("limit 200 W applied"), std::string::npos) << t.output();
  const json summary = json::parse(energy::test::read_text(out + "/summary.json"));
  EXPECT_EQ(summary["power_limit"]["applied"], true) << summary["power_limit"];
  // the daemon's NVML set 200 W, then 300 W again when the lease ended, and nothing after
  const std::string sets = energy::test::read_text(n.file("set.log"));
  const auto set = sets.find("0 200000 0\n");
  ASSERT_NE(set, std::string::npos) << sets;
  EXPECT_NE(sets.find("0 300000 0\n", set), std::string::npos) << sets;
  EXPECT_EQ(sets.substr(sets.size() - std::string("0 300000 0\n").size()), "0 300000 0\n") << sets;
  EXPECT_EQ(n.limit_mw(), 300000u);
  daemon.stop();
}

// train.power_limit_device names the devices train.power_limit caps (review of `schedule`, item
// 4): schedule's CPU cap reached the trainer as train.power_limit alone, whose devices (auto)
// are the GPUs on a node with any. Here, without a daemon, on a node with a GPU (the stand-in
// NVML, limits 100-400 W) and a CPU package (the stand-in RAPL zone, 95 W): cpu caps the
// package at 60 W and leaves the GPU alone; gpu takes the GPU, where 60 W is out of range.
TEST(ServeCli, TrainPowerLimitDeviceCpuCapsTheCpuPackageOnANodeWithAGpu) {
  Node n;
  auto env = n.client_env();  // no daemon answers at its socket: the devices directly
  env.push_back("FAKE_NVML_SET_LOG=" + n.file("set.log"));
  auto train = [&](const std::string& device) {
    return n.spawn(
        {"train", n.tiny_config(), "--out", n.file(device), "--set", "train.max_steps=20", "--set",
         "train.power_limit=60", "--set", "train.power_limit_device=" + device, "--set",
         "train.power_limit_required=true"},
        env, device);
  };
  Proc cpu = train("cpu");
  ASSERT_EQ(cpu.wait(), 0) << cpu.output();
  EXPECT_NE(cpu.output().find("limit 60 W applied to rapl:intel-rapl:0 (package-0)"),
            std::string::npos)
      << cpu.output();
  EXPECT_EQ(energy::test::read_text(n.file("set.log")), "");  // the GPU was never set
  EXPECT_EQ(n.limit_mw(), 300000u);
  EXPECT_EQ(
      std::strtoul(
          energy::test::read_text(n.rapl + "/intel-rapl:0/constraint_0_power_limit_uw").c_str(),
          nullptr, 10),
      95000000ul);  // restored at the end
  Proc gpu = train("gpu");
  EXPECT_EQ(gpu.wait(), 1) << gpu.output();
  EXPECT_NE(gpu.output().find("train.power_limit = 60 W could not be applied"), std::string::npos)
      << gpu.output();
  EXPECT_NE(gpu.output().find("nvml:0"), std::string::npos) << gpu.output();
}

TEST(ServeCli, SigkillOfTuneLeavesNoGpuCapped) {
  Node n;
  n.scripted_energy = false;
  Proc daemon = n.start_daemon();
  auto env = n.client_env();
  env.push_back("FAKE_NVML_SET_RC=4");
  Proc t = n.spawn(n.tune_args(100000), env, "tune");
  ASSERT_TRUE(wait_until([&] { return n.limit_mw() != 300000u; }, 60)) << t.output();
  t.kill(SIGKILL);
  EXPECT_TRUE(wait_until([&] { return n.limit_mw() == 300000u; }, 5)) << n.limit_mw() << "\n"
                                                                      << daemon.output();
  daemon.stop();
}

// The daemon itself killed while a limit is leased: started again (as the systemd unit does),
// it restores the limit its state file records before it serves anyone.
TEST(ServeCli, SigkillOfTheDaemonIsRepairedWhenItStartsAgain) {
  Node n;
  Proc daemon = n.start_daemon();
  Proc holder = n.lease_holder("nvml:0", 200);
  ASSERT_TRUE(wait_until([&] { return n.limit_mw() == 200000u; }, 10)) << holder.output();
  daemon.kill(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(n.limit_mw(), 200000u);  // nobody restored it: the daemon is gone
  Proc again = n.start_daemon();
  EXPECT_EQ(n.limit_mw(), 300000u) << again.output();
  EXPECT_NE(again.output().find("power limit restored to 300 W"), std::string::npos)
      << again.output();
  holder.kill(SIGKILL);
  again.stop();
}

// The policy's carbon_region is what the daemon serves: serve --status, the Prometheus gauge and
// a measure through the daemon all have Germany's 365.477 g/kWh (they had the 475 default).
TEST(ServeCli, ThePolicysCarbonRegionIsServedEverywhere) {
  Node n;
  const int port = free_port();
  energy::test::write_file(n.file("policy.toml"), "[daemon]\ncarbon_region = \"DEU\"\n");
  Proc daemon = n.start_daemon(
      {"--policy", n.file("policy.toml"), "--prometheus-port", std::to_string(port)});
  Proc st = n.spawn({"serve", "--status"}, n.client_env(), "status");
  ASSERT_EQ(st.wait(), 0) << st.output();
  EXPECT_NE(st.output().find("carbon 365.477 gCO2e/kWh, DEU (Germany)"), std::string::npos)
      << st.output();
  httplib::Client http("127.0.0.1", port);
  auto r = http.Get("/metrics");
  ASSERT_TRUE(r) << daemon.output();
  EXPECT_NE(r->body.find("greentrain_carbon_intensity_grams_per_kwh{origin=\"country\"} 365.47"),
            std::string::npos)
      << r->body;
  Proc m = n.spawn({"measure", "--json=" + n.file("m.json"), "--", "true"}, n.client_env(), "m");
  ASSERT_EQ(m.wait(), 0) << m.output();
  std::ifstream f(n.file("m.json"));
  const json j = json::parse(f);
  EXPECT_EQ(j["carbon_origin"], "country") << j.dump();
  EXPECT_DOUBLE_EQ(j["carbon_g_per_kwh"].get<double>(), 365.477) << j.dump();
  EXPECT_NE(j["carbon_source"].get<std::string>().find("DEU"), std::string::npos) << j.dump();
  daemon.stop();
}

// An [[allow]] rule's group this machine does not know is logged as a warning at start.
TEST(ServeCli, AnUnknownGroupInThePolicyIsWarnedAtStart) {
  Node n;
  energy::test::write_file(
      n.file("policy.toml"),
      "[[allow]]\ngroups = [\"gt-no-such-group\"]\npower_limit = [\"nvml:*\"]\n");
  Proc daemon = n.start_daemon({"--policy", n.file("policy.toml")});
  EXPECT_EQ(daemon.stop(), 0);
  EXPECT_NE(daemon.output().find("warning: " + n.file("policy.toml") +
                                 ":1: [[allow]] group 'gt-no-such-group' does not exist"),
            std::string::npos)
      << daemon.output();
}

// The policy's carbon series in kg/kWh (0.3 for 300 g) is logged as a warning at start, as
// train, measure and schedule say it, naming the policy key that reads it right; with
// carbon_unit = "kg/kWh" nothing is said. A constant outside the range is said too.
TEST(ServeCli, ACarbonIntensityOutsideThePlausibleRangeIsWarnedAtStart) {
  Node n;
  energy::test::write_file(n.file("kg.csv"),
                           "Time,Carbon Intensity\n2020-01-01 00:00:00,0.3\n"
                           "2020-01-01 01:00:00,0.1\n");
  const std::string csv = "[daemon]\ncarbon_csv = \"" + n.file("kg.csv") + "\"\n";
  const std::pair<std::string, std::string> cases[] = {
      {csv, "warning: carbon series " + n.file("kg.csv") + ": 2 of 2 values lie outside"},
      {csv, "set daemon.carbon_unit = 'kg/kWh'"},
      {"[daemon]\ncarbon_intensity = 0.4\n",
       "warning: daemon.carbon_intensity of " + n.file("policy.toml") +
           ": carbon intensity 0.4 gCO2e/kWh lies outside 1..2000"}};
  for (const auto& [policy, needle] : cases) {
    energy::test::write_file(n.file("policy.toml"), policy);
    Proc daemon = n.start_daemon({"--policy", n.file("policy.toml")});
    EXPECT_EQ(daemon.stop(), 0);
    EXPECT_NE(daemon.output().find(needle), std::string::npos) << daemon.output();
  }
  energy::test::write_file(n.file("policy.toml"), csv + "carbon_unit = \"kg/kWh\"\n");
  Proc daemon = n.start_daemon({"--policy", n.file("policy.toml")});
  EXPECT_EQ(daemon.stop(), 0);
  EXPECT_EQ(daemon.output().find("lie outside"), std::string::npos) << daemon.output();
}

// tune reads the configuration's carbon intensity as train does (energy.carbon_*), and says
// once, as train does, when it lies outside 1..2000 gCO2e/kWh; the search goes on.
TEST(ServeCli, TuneWarnsOfACarbonIntensityOutsideThePlausibleRange) {
  Node n;
  n.scripted_energy = false;
  Proc daemon = n.start_daemon();
  auto args = n.tune_args(1);
  args.insert(args.end(), {"--set", "energy.carbon_intensity=0.4"});
  Proc t = n.spawn(args, n.client_env(), "tune");
  ASSERT_EQ(t.wait(), 0) << t.output();
  const std::string out = t.output();
  const std::string warning =
      "greentrain tune: warning: energy.carbon_intensity: carbon intensity 0.4 gCO2e/kWh lies "
      "outside 1..2000";
  const auto at = out.find(warning);
  EXPECT_NE(at, std::string::npos) << out;
  EXPECT_EQ(out.find(warning, at + 1), std::string::npos) << out;  // once
  EXPECT_NE(out.find("chosen power limit"), std::string::npos) << out;
  daemon.stop();
}

// A real Prometheus server (Debian's prometheus) scrapes the daemon on loopback; its HTTP API
// then has the energy, power, carbon and attribution series.
TEST(ServeCli, PrometheusScrapesTheDaemon) {
  const char* prom = "/usr/bin/prometheus";
  if (::access(prom, X_OK) != 0)
    GTEST_SKIP() << "no " << prom << " (Debian package prometheus, in scripts/apt-packages.txt)";
  Node n;
  n.scripted_energy = false;
  const int port = free_port(), prom_port = free_port();
  energy::test::write_file(n.file("policy.toml"), "[daemon]\nprometheus_per_process = true\n");
  Proc daemon = n.start_daemon(
      {"--policy", n.file("policy.toml"), "--prometheus-port", std::to_string(port)});
  energy::test::write_file(
      n.file("prometheus.yml"),
      fmt::format("global:\n  scrape_interval: 200ms\n  scrape_timeout: 150ms\nscrape_configs:\n"
                  "  - job_name: greentrain\n    static_configs:\n"
                  "      - targets: ['127.0.0.1:{}']\n",
                  port));
  Proc p = n.spawn_exec(
      {prom, "--config.file=" + n.file("prometheus.yml"), "--storage.tsdb.path=" + n.file("tsdb"),
       fmt::format("--web.listen-address=127.0.0.1:{}", prom_port)},
      {}, "prometheus");
  auto query = [&](const std::string& q) { return prometheus_query(prom_port, q); };
  json energy;
  ASSERT_TRUE(wait_until(
      [&] {
        energy = query("greentrain_energy_joules_total");
        return energy.is_array() && energy.size() >= 2;
      },
      30))
      << p.output() << daemon.output();
  std::set<std::string> sensors;
  for (const auto& s : energy) {
    sensors.insert(s["metric"]["sensor"].get<std::string>());
    EXPECT_EQ(s["metric"]["job"], "greentrain");
    EXPECT_GE(std::stod(s["value"][1].get<std::string>()), 0);
  }
  EXPECT_TRUE(sensors.count("nvml:0")) << energy;
  EXPECT_TRUE(sensors.count("rapl:package-0")) << energy;
  // counters rise with the stand-in's 100 W: a later scrape reads more
  const double first = std::stod(
      query("greentrain_energy_joules_total{sensor=\"nvml:0\"}")[0]["value"][1].get<std::string>());
  EXPECT_TRUE(wait_until(
      [&] {
        auto v = query("greentrain_energy_joules_total{sensor=\"nvml:0\"}");
        return v.size() == 1 && std::stod(v[0]["value"][1].get<std::string>()) > first;
      },
      10));
  for (const char* series :
       {"greentrain_power_watts", "greentrain_sensor_up",
        "greentrain_carbon_intensity_grams_per_kwh",
        "greentrain_gpu_unattributed_energy_joules_total", "greentrain_power_limit_watts"})
    EXPECT_FALSE(query(series).empty()) << series;
  const auto up = query("greentrain_sensor_up{sensor=\"nvml:0\"}");
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0]["value"][1], "1");
  p.kill(SIGTERM);
  p.wait();
  daemon.stop();
}

}  // namespace gt::serve
