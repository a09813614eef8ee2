// tests/serve/test_daemon.cpp: the node daemon in this process: meters reading through it get the
// counters' exact energy however many there are; bad input, silent and slow clients get errors
// or timeouts and never stop the daemon or delay the others; a sensor that fails mid-run is
// flagged while the others go on; power-limit leases are restored when their connection ends.
// Energy per process on a shared GPU: test_daemon_attribution.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "energy/daemon_client.h"
#include "energy/meter.h"
#include "serve/prometheus.h"
#include "serve_test_util.h"
#include "tune/simulated.h"

namespace gt::serve {
using namespace test;
using nlohmann::json;
namespace ed = energy::daemon;

namespace {

struct Counters {
  AtomicCounter* cpu;
  AtomicCounter* gpu;
  energy::SensorList list;
  Counters() {
    auto c = std::make_unique<AtomicCounter>("rapl:package-0", "cpu");
    auto g = std::make_unique<AtomicCounter>("rapl:psys", "psys");
    cpu = c.get();
    gpu = g.get();
    list.push_back(std::move(c));
    list.push_back(std::move(g));
  }
};

energy::MeterOptions through(const LocalDaemon& d) {
  energy::MeterOptions o;
  o.interval_s = 0;
  o.daemon_socket = d.socket;
  o.use_nvml = o.use_rocm_smi = false;
  return o;
}

}  // namespace

// Issue 28, done-when: several meters (here three, two in one process) get the counter's energy
// of their own windows, exactly, and the overlapping windows do not disturb each other.
TEST(Daemon, MetersReadingThroughItGetTheCountersExactEnergy) {
  TempDir d;
  Counters c;
  c.cpu->joules = 100;
  c.gpu->joules = 1000;
  LocalDaemon dm(d.path, std::move(c.list), 10.0);  // samples only when asked (fresh)
  auto m1 = energy::Meter::create(through(dm));
  auto m2 = energy::Meter::create(through(dm));
  EXPECT_NE(m1->reading_source().find("greentrain serve"), std::string::npos);
  EXPECT_TRUE(m1->not_reader().empty());
  m1->begin_window("a");
  c.cpu->joules = 150;
  m2->begin_window("b");
  c.cpu->joules = 300;
  c.gpu->joules = 1500;
  const auto a = m1->end_window("a");
  c.cpu->joules = 301;
  const auto b = m2->end_window("b");
  EXPECT_DOUBLE_EQ(a.energy_j_of("cpu"), 200);
  EXPECT_DOUBLE_EQ(b.energy_j_of("cpu"), 151);
  EXPECT_DOUBLE_EQ(a.energy_j_of("psys"), 500);
  EXPECT_DOUBLE_EQ(b.energy_j_of("psys"), 500);
  EXPECT_GT(a.duration_s, 0);
  EXPECT_EQ(a.domains[0].method, energy::Method::kCounter);
  // A meter with its own sampling thread and overlapping windows, summed over consecutive
  // windows: the counter's whole rise, nothing lost or counted twice.
  energy::MeterOptions o = through(dm);
  o.interval_s = 0.01;
  auto m3 = energy::Meter::create(o);
  double sum = 0;
  const double start = c.cpu->joules;
  for (int i = 0; i < 20; ++i) {
    m3->begin_window("w");
    c.cpu->joules = c.cpu->joules + 1.5;
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    sum += m3->end_window("w").energy_j_of("cpu");
  }
  EXPECT_NEAR(sum, c.cpu->joules - start, 1e-9);
}

// A meter's ticks between window boundaries read the latest sample from the daemon's shared
// page (energy/sample_page.h), not through a request: 200 readers at 10 Hz cost the daemon
// 2,000 requests a second otherwise. Window boundaries still ask for a fresh sample.
TEST(Daemon, TicksReadTheSharedSamplePageAndBoundariesTheSocket) {
  for (const bool with_page : {true, false}) {
    SCOPED_TRACE(with_page ? "with the page" : "without a page");
    TempDir d;
    Counters c;
    c.cpu->joules = 10;
    LocalDaemon dm(d.path, std::move(c.list), 0.005, {}, {}, {}, nullptr, with_page);
    std::string why;
    auto client = ed::DaemonClient::connect(dm.socket, &why);
    ASSERT_TRUE(client) << why;
    if (with_page) {
      EXPECT_EQ(client->hello().value("sample_page", ""), dm.socket + ".page");
      // the page is written before a sample becomes the socket's latest: never behind it
      const json sock = client->call({{"op", "read"}});
      const auto text = client->read_sample_page();
      ASSERT_TRUE(text);
      const json page = json::parse(*text);
      EXPECT_GE(page["seq"].get<std::uint64_t>(), sock["seq"].get<std::uint64_t>());
      EXPECT_EQ(page["instance"], client->hello()["daemon"]["instance"]);
      EXPECT_EQ(page["readings"][0]["sensor"], "rapl:package-0");
    } else {
      EXPECT_TRUE(client->hello()["sample_page"].is_null());
      EXPECT_FALSE(client->read_sample_page());
    }
    energy::MeterOptions o = through(dm);
    o.interval_s = 0.01;
    auto m = energy::Meter::create(o);
    const auto before = dm.server->stats().requests.load();
    m->begin_window("w");
    for (int i = 0; i < 30; ++i) {  // about 30 ticks of the meter's thread
      c.cpu->joules = c.cpu->joules + 1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const double rise = c.cpu->joules - 10;
    const auto w = m->end_window("w");
    const auto requests = dm.server->stats().requests.load() - before;
    EXPECT_NEAR(w.energy_j_of("cpu"), rise, 1e-9) << "the window's energy is the counter's";
    if (with_page)
      EXPECT_LE(requests, 6u) << "the ticks went through the socket";
    else
      EXPECT_GE(requests, 10u) << "ticks without a page are requests";
  }
}

// A page at the path hello named that another daemon wrote (a restart, or a socket mounted
// into a container under another path) is not this daemon's: its samples are not used.
TEST(Daemon, AnotherDaemonsPageIsNotTakenForThisOnes) {
  TempDir a, b;
  Counters ca, cb;
  LocalDaemon da(a.path, std::move(ca.list), 0.005);
  LocalDaemon db(b.path, std::move(cb.list), 0.005);
  std::string why;
  auto client = ed::DaemonClient::connect(da.socket, &why);
  ASSERT_TRUE(client) << why;
  std::filesystem::rename(db.socket + ".page", da.socket + ".page");  // b's page at a's path
  const auto text = client->read_sample_page();
  ASSERT_TRUE(text) << "b's page is fresh and readable";
  EXPECT_FALSE(client->same_daemon(json::parse(*text)));
  EXPECT_TRUE(client->same_daemon(client->call({{"op", "read"}})));
  // a meter through a: its ticks fall back to the socket instead of taking b's samples
  energy::MeterOptions o = through(da);
  o.interval_s = 0.01;
  auto m = energy::Meter::create(o);
  const auto before = da.server->stats().requests.load();
  m->begin_window("w");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto w = m->end_window("w");
  EXPECT_GE(da.server->stats().requests.load() - before, 6u) << "ticks took b's page";
  std::string flags;
  for (const auto& f : w.flags) flags += f + "\n";
  EXPECT_EQ(flags.find("restarted"), std::string::npos) << flags;
}

TEST(Daemon, ASensorThatStopsAnsweringIsFlaggedAndTheOthersGoOn) {
  TempDir d;
  Counters c;
  auto* cpu = c.cpu;
  auto* psys = c.gpu;
  LocalDaemon dm(d.path, std::move(c.list), 0.02);
  auto m = energy::Meter::create(through(dm));
  m->begin_window("w");
  cpu->joules = 10;
  psys->joules = 20;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  cpu->failing = true;
  psys->joules = 40;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto r = m->end_window("w");
  EXPECT_DOUBLE_EQ(r.energy_j_of("psys"), 40);
  std::string flags;
  for (const auto& f : r.flags) flags += f + "\n";
  EXPECT_NE(flags.find("rapl:package-0: untrusted"), std::string::npos) << flags;
  EXPECT_NE(flags.find("the sensor stopped answering"), std::string::npos) << flags;
  EXPECT_EQ(flags.find("rapl:psys: untrusted"), std::string::npos) << flags;
  // The daemon's reading says so too, and the daemon goes on.
  int fd = connect_raw(dm.socket);
  send_json(fd, fresh_read());
  const json j = read_json(fd);
  ASSERT_TRUE(j["ok"].get<bool>()) << j;
  EXPECT_FALSE(j["readings"][0]["ok"].get<bool>());
  EXPECT_TRUE(j["readings"][0]["failing_since_unix_s"].is_number());
  EXPECT_TRUE(j["readings"][1]["ok"].get<bool>());
  ::close(fd);
}

// The daemon restarted under a meter (systemd's Restart=always): its counters begin again at 0.
// The meter re-bases instead of counting a backwards step, and says so.
TEST(Daemon, ARestartUnderAMeterIsRebasedAndFlagged) {
  TempDir d;
  Counters c1, c2;
  auto* cpu1 = c1.cpu;
  auto* cpu2 = c2.cpu;
  auto dm = std::make_unique<LocalDaemon>(d.path, std::move(c1.list), 10.0);
  energy::MeterOptions o = through(*dm);
  auto m = energy::Meter::create(o);
  m->begin_window("w");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  cpu1->joules = 40;  // 400 W
  m->sample_now();
  dm.reset();  // the daemon ends; a new one starts on the same socket
  cpu2->joules = 5;
  dm = std::make_unique<LocalDaemon>(d.path, std::move(c2.list), 10.0);
  m->sample_now();  // re-based on the new run
  cpu2->joules = 25;
  const auto r = m->end_window("w");
  std::string flags;
  for (const auto& f : r.flags) flags += f + "\n";
  EXPECT_NE(flags.find("the daemon restarted"), std::string::npos) << flags;
  // both runs' rises, 40 J and 20 J; the gap between them unmeasured and said so, never the
  // new run's counters taken for a wrap or a backwards step
  EXPECT_NEAR(r.energy_j_of("cpu"), 40 + 20, 1e-9) << flags;
  EXPECT_NE(flags.find("not measured"), std::string::npos) << flags;
}

// Bad input on the socket: each gets a clear error (or is closed), the daemon goes on, and a
// good client beside them is answered all along.
TEST(Daemon, BadInputGetsClearErrorsAndNeverStopsTheDaemon) {
  TempDir d;
  Counters c;
  ServerOptions so;
  so.first_request_timeout_s = 0.5;
  so.message_timeout_s = 0.5;
  LocalDaemon dm(d.path, std::move(c.list), 0.05, so);
  int good = connect_raw(dm.socket);
  auto ask = [](int fd, const json& req) {
    send_json(fd, req);
    return read_json(fd);
  };
  auto good_reads = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    const json r = ask(good, request("read", {{"id", 9}}));
    EXPECT_TRUE(r["ok"].get<bool>()) << r;
    EXPECT_EQ(r["id"], 9);
    // a liveness bound, not a speed target: the loop never waits on another client
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
  };
  // invalid JSON, then the same connection still works
  int fd = connect_raw(dm.socket);
  std::string f;
  ed::append_frame(f, "{\"v\": 1, \"op\": \"read\"");
  send_all(fd, f);
  json r = read_json(fd);
  EXPECT_EQ(r["code"], "bad_json");
  EXPECT_NE(r["error"].get<std::string>().find("not valid JSON"), std::string::npos);
  EXPECT_TRUE(ask(fd, request("read"))["ok"].get<bool>());
  // unknown version, unknown op, a device that does not exist, a field of the wrong type
  r = ask(fd, {{"v", 7}, {"op", "read"}, {"id", "x"}});
  EXPECT_EQ(r["code"], "unknown_version");
  EXPECT_EQ(r["versions"], json::array({1}));
  EXPECT_EQ(r["id"], "x");
  r = ask(fd, request("reboot"));
  EXPECT_EQ(r["code"], "unknown_op");
  EXPECT_NE(r["error"].get<std::string>().find("expected hello, read"), std::string::npos);
  r = ask(fd, set_limit("nvml:99", 100));
  EXPECT_EQ(r["code"], "no_such_device");
  r = ask(fd, request("read", {{"fresh", "yes"}}));
  EXPECT_EQ(r["code"], "bad_request");
  good_reads();
  // oversized: refused from its length, and closed
  int big = connect_raw(dm.socket);
  const unsigned char len[4] = {0x7f, 0xff, 0xff, 0xff};
  send_all(big, std::string(reinterpret_cast<const char*>(len), 4));
  r = read_json(big);
  EXPECT_EQ(r["code"], "too_large");
  EXPECT_TRUE(closed_by_peer(big, 2));
  // truncated: half a message, then the client goes away
  int half = connect_raw(dm.socket);
  send_all(half, std::string("\0\0\0\x40{\"v\":1", 10));
  ::close(half);
  // never speaks; speaks half a message and stops: timeouts
  int silent = connect_raw(dm.socket);
  int stalled = connect_raw(dm.socket);
  send_all(stalled, std::string("\0\0\0\x40{\"v\":1", 10));
  good_reads();
  r = read_json(silent, 3);
  EXPECT_EQ(r["code"], "timeout") << r;
  EXPECT_TRUE(closed_by_peer(silent, 2));
  r = read_json(stalled, 3);
  EXPECT_EQ(r["code"], "timeout") << r;
  // reads nothing: it asks and asks; the daemon drops it, the good client is served meanwhile
  int deaf = connect_raw(dm.socket);
  std::string flood;
  for (int i = 0; i < 20000; ++i) ed::append_frame(flood, R"({"v":1,"op":"hello"})");
  std::thread t([&] { send_all(deaf, flood); });
  for (int i = 0; i < 5; ++i) good_reads();
  t.join();
  EXPECT_TRUE(closed_by_peer(deaf, 5));
  good_reads();
  EXPECT_NE(dm.log_text().find("dropped"), std::string::npos) << dm.log_text();
  for (int x : {fd, big, silent, stalled, deaf, good}) ::close(x);
}

TEST(Daemon, TooManyClientsAreToldSo) {
  TempDir d;
  Counters c;
  ServerOptions so;
  so.max_clients = 2;
  LocalDaemon dm(d.path, std::move(c.list), 0.05, so);
  int a = connect_raw(dm.socket), b = connect_raw(dm.socket);
  send_json(a, request("read"));
  send_json(b, request("read"));
  ASSERT_TRUE(read_json(a)["ok"].get<bool>());
  ASSERT_TRUE(read_json(b)["ok"].get<bool>());
  int x = connect_raw(dm.socket);
  const json r = read_json(x);
  EXPECT_EQ(r["code"], "too_many_clients");
  for (int fd : {a, b, x}) ::close(fd);
}

// Fresh reads wait for a sample taken after they arrived; plain reads get the latest.
TEST(Daemon, FreshReadsSeeWhatHappenedBeforeThem) {
  TempDir d;
  Counters c;
  auto* cpu = c.cpu;
  LocalDaemon dm(d.path, std::move(c.list), 30.0);
  int fd = connect_raw(dm.socket);
  for (int i = 1; i <= 5; ++i) {
    cpu->joules = i * 10.0;
    send_json(fd, fresh_read());
    const json r = read_json(fd);
    EXPECT_DOUBLE_EQ(r["readings"][0]["energy_j"].get<double>(), i * 10.0) << r;
  }
  cpu->joules = 1000;
  send_json(fd, request("read"));
  EXPECT_DOUBLE_EQ(read_json(fd)["readings"][0]["energy_j"].get<double>(), 50);  // the latest
  ::close(fd);
}

// ------------------------------------------------------------------------------ leases
namespace {

Policy allow_me() {
  return Policy::parse(fmt::format("[[allow]]\nusers = [\"{}\"]\npower_limit = [\"sim:*\"]\n"
                                   "min_w = 150\nmax_w = 350\n",
                                   ::getuid()),
                       "test-policy");
}

}  // namespace

TEST(Daemon, LeasesAreRestoredWhenTheirConnectionEnds) {
  TempDir d;
  Counters c;
  auto sim = std::make_shared<tune::SimulatedDevice>(tune::SimulatedModel{}, "sim:0");
  LocalDaemon dm(d.path, std::move(c.list), 0.05, {}, {sim}, allow_me());
  int a = connect_raw(dm.socket), b = connect_raw(dm.socket);
  auto ask = [](int fd, const json& req) {
    send_json(fd, req);
    return read_json(fd);
  };
  json r = ask(a, set_limit("sim:0", 200));
  ASSERT_TRUE(r["ok"].get<bool>()) << r;
  EXPECT_DOUBLE_EQ(r["previous_w"].get<double>(), 400);
  EXPECT_DOUBLE_EQ(sim->limit_w(), 200);
  // recorded before it took effect
  std::ifstream st(d / "state.json");
  const json state = json::parse(st);
  EXPECT_EQ(state["leases"][0]["device"], "sim:0");
  EXPECT_DOUBLE_EQ(state["leases"][0]["previous_w"].get<double>(), 400);
  // another connection: busy; out of the policy's range: out_of_range
  r = ask(b, set_limit("sim:0", 250));
  EXPECT_EQ(r["code"], "busy") << r;
  r = ask(a, set_limit("sim:0", 120));
  if (::getuid() != 0) {
    EXPECT_EQ(r["code"], "out_of_range") << r;
  }
  r = ask(a, set_limit("sim:0", 300));
  EXPECT_TRUE(r["ok"].get<bool>()) << r;
  EXPECT_DOUBLE_EQ(r["previous_w"].get<double>(), 400);  // the lease keeps the first limit
  r = ask(b, request("power_limits"));
  EXPECT_DOUBLE_EQ(r["devices"][0]["limit_w"].get<double>(), 300);
  EXPECT_EQ(r["devices"][0]["leased_by"]["uid"], ::getuid());
  ::close(a);  // the client ends: restored
  for (int i = 0; i < 100 && sim->limit_w() != 400; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_DOUBLE_EQ(sim->limit_w(), 400);
  for (int i = 0; i < 100 && dm.log_text().find("restored to 400 W") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // logged just after
  EXPECT_NE(dm.log_text().find("power limit restored to 400 W"), std::string::npos);
  // release by request
  r = ask(b, set_limit("sim:0", 250));
  ASSERT_TRUE(r["ok"].get<bool>()) << r;
  r = ask(b, request("release_power_limit", {{"device", "sim:0"}}));
  EXPECT_TRUE(r["ok"].get<bool>()) << r;
  EXPECT_DOUBLE_EQ(sim->limit_w(), 400);
  ::close(b);
}

// The SPANK plugin asks from slurmstepd, as root, for the job's user: the daemon applies that
// user's rules (root's would give any Slurm user the device's whole range); a peer other than
// root cannot claim another user.
TEST(Daemon, ARootPeerAsksOnBehalfOfAUserWhoseRulesApply) {
  auto sim = std::make_shared<tune::SimulatedDevice>(tune::SimulatedModel{}, "sim:0");
  Leases leases({sim}, "");
  const Policy pol = Policy::parse(
      "[[allow]]\nusers = [\"4242\"]\npower_limit = [\"sim:*\"]\nmin_w = 150\nmax_w = 250\n",
      "p.toml");
  std::vector<std::string> log;
  ServeContext ctx;
  ctx.policy = &pol;
  ctx.leases = &leases;
  ctx.log = [&log](const std::string& l) { log.push_back(l); };
  const Peer root = Peer::of_ids(0, 0, 77);
  auto ask = [&](const Peer& p, std::uint64_t conn, json body) {
    body["op"] = "set_power_limit";
    body["device"] = "sim:0";
    try {
      return handle_request(ctx, conn, p, ed::Request{"set_power_limit", nullptr, body}, "s");
    } catch (const ed::ProtocolError& e) {
      return json{{"code", e.code()}, {"message", e.what()}};
    }
  };
  const json job = {{"uid", 4242}, {"gid", 4242}}, other = {{"uid", 4343}, {"gid", 4343}};
  // for uid 4242: within its rule's range, clamped when asked to
  json r = ask(root, 1, {{"limit_w", 350}, {"on_behalf_of", job}});
  EXPECT_EQ(r["code"], "out_of_range") << r;
  EXPECT_NE(r["message"].get<std::string>().find("[150, 250] W"), std::string::npos) << r;
  r = ask(root, 1, {{"limit_w", 350}, {"clamp", true}, {"on_behalf_of", job}});
  ASSERT_FALSE(r.contains("code")) << r;
  EXPECT_DOUBLE_EQ(r["limit_w"].get<double>(), 250);
  EXPECT_DOUBLE_EQ(sim->limit_w(), 250);
  EXPECT_EQ(leases.list()[0]["leased_by"]["uid"], 4242);
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.back().find("asked on their behalf by root, pid 77"), std::string::npos)
      << log.back();
  leases.release_all(1);
  // a user no rule names gets nothing, though root asks
  r = ask(root, 2, {{"limit_w", 200}, {"clamp", true}, {"on_behalf_of", other}});
  EXPECT_EQ(r["code"], "not_permitted") << r;
  EXPECT_NE(r["message"].get<std::string>().find("uid 4343, on whose behalf root, pid 77 asked"),
            std::string::npos)
      << r;
  EXPECT_DOUBLE_EQ(sim->limit_w(), 400);
  // root for itself: the device's range, as before
  r = ask(root, 3, {{"limit_w", 120}});
  EXPECT_FALSE(r.contains("code")) << r;
  leases.release_all(3);
  // a peer other than root may not claim another user, only name itself
  Peer alice = Peer::of_ids(4343, 4343, 88);
  r = ask(alice, 4, {{"limit_w", 200}, {"on_behalf_of", job}});
  EXPECT_EQ(r["code"], "not_permitted") << r;
  EXPECT_NE(r["message"].get<std::string>().find("only root"), std::string::npos) << r;
  Peer u4242 = Peer::of_ids(4242, 4242, 99);
  r = ask(u4242, 5, {{"limit_w", 200}, {"on_behalf_of", json{{"uid", 4242}, {"gid", 0}}}});
  EXPECT_EQ(r["code"], "not_permitted") << r;  // another group is another claim
  r = ask(u4242, 5, {{"limit_w", 200}, {"on_behalf_of", job}});
  EXPECT_FALSE(r.contains("code")) << r;
  leases.release_all(5);
  r = ask(root, 6, {{"limit_w", 200}, {"on_behalf_of", json{{"uid", -1}, {"gid", 0}}}});
  EXPECT_EQ(r["code"], "bad_request") << r;
}

TEST(Daemon, AClientKilledWithItsLeaseHasItRestored) {
  TempDir d;
  Counters c;
  auto sim = std::make_shared<tune::SimulatedDevice>(tune::SimulatedModel{}, "sim:0");
  LocalDaemon dm(d.path, std::move(c.list), 0.05, {}, {sim}, allow_me());
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    std::string why;
    auto cl = ed::DaemonClient::connect(dm.socket, &why);
    char ok = 'n';
    try {
      if (cl) cl->call({{"op", "set_power_limit"}, {"device", "sim:0"}, {"limit_w", 175}});
      ok = cl ? 'y' : 'n';
    } catch (...) {
    }
    (void)!write(ready[1], &ok, 1);
    for (;;) pause();
  }
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  EXPECT_DOUBLE_EQ(sim->limit_w(), 175);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  for (int i = 0; i < 200 && sim->limit_w() != 400; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_DOUBLE_EQ(sim->limit_w(), 400);
  close(ready[0]);
  close(ready[1]);
}

TEST(Daemon, ARestartedDaemonRestoresTheLimitsItsStateFileRecords) {
  TempDir d;
  auto sim = std::make_shared<tune::SimulatedDevice>(tune::SimulatedModel{}, "sim:0");
  sim->set_limit_w(180);  // what a killed daemon left
  energy::test::write_file(d / "state.json",
                           R"({"version":1,"leases":[{"device":"sim:0","previous_w":390,)"
                           R"("limit_w":180,"uid":1000,"pid":77,"user":"alice"}]})");
  Leases l({sim}, d / "state.json");
  const auto log = l.recover();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("restored to 390 W"), std::string::npos) << log[0];
  EXPECT_DOUBLE_EQ(sim->limit_w(), 390);
  std::ifstream st(d / "state.json");
  EXPECT_TRUE(json::parse(st)["leases"].empty());
  energy::test::write_file(d / "state.json", "{not json");
  EXPECT_THROW(Leases({sim}, d / "state.json").recover(), Error);
}

}  // namespace gt::serve

namespace gt::serve {

// Two daemons with one prometheus_port: the second is refused (cpp-httplib's default
// SO_REUSEPORT let both bind, and scrapes alternated between them).
TEST(Prometheus, ASecondEndpointOnAPortInUseIsRefused) {
  PrometheusEndpoint first(0, [] { return std::string("first\n"); });
  ASSERT_GT(first.port(), 0);
  std::string msg = "bound";
  try {
    PrometheusEndpoint second(first.port(), [] { return std::string("second\n"); });
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find(fmt::format("cannot bind 127.0.0.1:{} (in use?", first.port())),
            std::string::npos)
      << msg;
}

}  // namespace gt::serve
