// bench/serve_load.cpp: `greentrain serve` under load (issue 28). Starts the daemon (the program,
// as systemd would) on a stand-in RAPL tree whose counter this bench advances by whole steps
// (and the stand-in NVML when built), then:
//   phase 1 (half the time): R readers (default 200), each reading the latest sample at 10 Hz
//   as a Meter's ticks do: from the daemon's shared sample page (energy/sample_page.h), or with
//   GT_SERVE_LOAD_READS=socket by a request each;
//   phase 2 (the other half): the readers and C window clients (default 20) opening and closing
//   windows as fast as they can (fresh reads at both ends).
// Checks: every request answered (none lost), per connection the samples never go back (fresh
// reads strictly forward), every client saw the same cumulative energy for the same sample (one
// truth for all), every window's energy is a whole number of the counter's steps (within
// rounding of the counter's); prints the daemon's CPU time per phase as % of one core (target
// < 2 % for the readers alone), requests per second and the windows' latency.
//   build/bench/gt_serve_load [SECONDS=60] [READERS=200] [WINDOW_CLIENTS=20]
// ($GT_SERVE_PROGRAM: the greentrain program to start, default this build's)
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "energy/daemon_client.h"
#include "energy/daemon_protocol.h"

namespace ed = gt::energy::daemon;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kStepJ = 0.5;  // the stand-in RAPL counter moves in steps of 0.5 J

std::atomic<bool> g_stop{false};
std::atomic<long> g_failures{0};
std::mutex g_mu;
std::map<std::uint64_t, std::vector<double>> g_truth;  // seq -> energy of each sensor

void fail(const std::string& what) {
  if (g_failures++ < 10) std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

// Records a sample's energies; a second client that saw the same sample must agree.
void check_truth(const json& r) {
  const auto seq = r["seq"].get<std::uint64_t>();
  std::vector<double> e;
  for (const auto& x : r["readings"]) e.push_back(x["energy_j"].get<double>());
  std::lock_guard<std::mutex> g(g_mu);
  auto [it, fresh] = g_truth.emplace(seq, e);
  if (!fresh && it->second != e)
    fail(fmt::format("sample {} read differently by two clients", seq));
}

double cpu_s_of(pid_t pid) {
  std::ifstream f(fmt::format("/proc/{}/stat", pid));
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream in(s.substr(s.rfind(')') + 2));
  std::string x;
  double ut = 0, st = 0;
  for (int i = 3; i <= 15; ++i) {
    in >> x;
    if (i == 14) ut = std::stod(x);
    if (i == 15) st = std::stod(x);
  }
  return (ut + st) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

int connect_to(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

// R connections in one poll loop, each sending a plain read every 1/hz s.
struct Readers {
  struct Conn {
    int fd = -1;
    ed::FrameReader in{ed::kMaxResponseBytes};
    Clock::time_point due;
    long sent = 0, got = 0;
    std::uint64_t last_seq = 0;
  };
  std::vector<Conn> conns;
  std::atomic<long> sent{0}, got{0};
  void run(const std::string& socket, int n, double hz) {
    conns.resize(static_cast<std::size_t>(n));
    const auto start = Clock::now();
    for (int i = 0; i < n; ++i) {
      conns[static_cast<std::size_t>(i)].fd = connect_to(socket);
      if (conns[static_cast<std::size_t>(i)].fd < 0) fail("a reader could not connect");
      conns[static_cast<std::size_t>(i)].due =  // spread over the period
          start + std::chrono::microseconds(static_cast<long>(1e6 / hz * i / n));
    }
    std::string req;
    ed::append_frame(req, R"({"v":1,"op":"read"})");
    std::vector<pollfd> pf(conns.size());
    char buf[65536];
    std::string p;
    while (!g_stop) {
      const auto now = Clock::now();
      for (auto& c : conns)
        if (c.fd >= 0 && now >= c.due) {
          if (::send(c.fd, req.data(), req.size(), MSG_NOSIGNAL) ==
              static_cast<ssize_t>(req.size()))
            ++c.sent, ++sent;
          c.due += std::chrono::microseconds(static_cast<long>(1e6 / hz));
        }
      for (std::size_t i = 0; i < conns.size(); ++i) pf[i] = {conns[i].fd, POLLIN, 0};
      ::poll(pf.data(), pf.size(), 5);
      for (std::size_t i = 0; i < conns.size(); ++i) {
        if (!(pf[i].revents & POLLIN)) continue;
        Conn& c = conns[i];
        ssize_t k = ::recv(c.fd, buf, sizeof buf, 0);
        if (k <= 0) continue;
        c.in.feed(buf, static_cast<std::size_t>(k));
        while (c.in.next(&p) == ed::FrameReader::Status::kFrame) {
          const json r = json::parse(p);
          ++c.got, ++got;
          const auto seq = r["seq"].get<std::uint64_t>();
          if (seq < c.last_seq)
            fail(fmt::format("reader {}: sample {} after {}", i, seq, c.last_seq));
          c.last_seq = seq;
          check_truth(r);
        }
      }
    }
  }
  // Waits for the answers still on their way; the count of those lost.
  long settle() {
    const auto end = Clock::now() + std::chrono::seconds(3);
    char buf[65536];
    std::string p;
    while (Clock::now() < end && got < sent) {
      for (auto& c : conns) {
        ssize_t k = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (k > 0) {
          c.in.feed(buf, static_cast<std::size_t>(k));
          while (c.in.next(&p) == ed::FrameReader::Status::kFrame) ++c.got, ++got;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (auto& c : conns) ::close(c.fd);
    return sent - got;
  }
};

// R clients (DaemonClient, as a Meter holds one) reading the latest sample every 1/hz s the way
// a Meter's ticks do: from the daemon's shared sample page, through the socket when the page
// gives nothing (counted apart).
struct PageReaders {
  std::atomic<long> sent{0}, got{0}, by_socket{0};
  void run(const std::string& socket, int n, double hz) {
    std::vector<std::unique_ptr<ed::DaemonClient>> cs;
    std::vector<Clock::time_point> due;
    std::vector<std::uint64_t> last(static_cast<std::size_t>(n), 0);
    const auto start = Clock::now();
    for (int i = 0; i < n; ++i) {
      std::string why;
      cs.push_back(ed::DaemonClient::connect(socket, &why));
      if (!cs.back()) return fail("a reader could not connect: " + why);
      due.push_back(start + std::chrono::microseconds(static_cast<long>(1e6 / hz * i / n)));
    }
    while (!g_stop) {
      const auto now = Clock::now();
      for (std::size_t i = 0; i < cs.size(); ++i) {
        if (now < due[i]) continue;
        due[i] += std::chrono::microseconds(static_cast<long>(1e6 / hz));
        ++sent;
        json r;
        if (auto t = cs[i]->read_sample_page()) {
          r = json::parse(*t);
        } else {
          r = cs[i]->call({{"op", "read"}});
          ++by_socket;
        }
        ++got;
        const auto seq = r["seq"].get<std::uint64_t>();
        if (seq < last[i]) fail(fmt::format("reader {}: sample {} after {}", i, seq, last[i]));
        last[i] = seq;
        check_truth(r);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
};

struct WindowStats {
  std::atomic<long> windows{0};
  std::mutex mu;
  std::vector<double> latency_ms;
};

void window_client(const std::string& socket, WindowStats& st) {
  std::string why;
  auto c = ed::DaemonClient::connect(socket, &why);
  if (!c) return fail("a window client could not connect: " + why);
  std::uint64_t last = 0;
  std::vector<double> lat;
  while (!g_stop) {
    const auto t0 = Clock::now();
    const json b = c->call({{"op", "read"}, {"fresh", true}});
    const json e = c->call({{"op", "read"}, {"fresh", true}});
    lat.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    const auto sb = b["seq"].get<std::uint64_t>(), se = e["seq"].get<std::uint64_t>();
    if (!(sb > last && se > sb))
      fail(fmt::format("fresh samples {} then {} after {}", sb, se, last));
    last = se;
    check_truth(b);
    check_truth(e);
    for (std::size_t i = 0; i < b["readings"].size(); ++i) {
      if (b["readings"][i]["sensor"].get<std::string>().rfind("rapl:", 0) != 0) continue;
      const double w =
          e["readings"][i]["energy_j"].get<double>() - b["readings"][i]["energy_j"].get<double>();
      const double steps = w / kStepJ;
      if (w < 0 || std::fabs(steps - std::round(steps)) > 1e-6)
        fail(fmt::format("window of {} J is not a whole number of the counter's {} J steps", w,
                         kStepJ));
    }
    ++st.windows;
  }
  std::lock_guard<std::mutex> g(st.mu);
  st.latency_ms.insert(st.latency_ms.end(), lat.begin(), lat.end());
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 60;
  const int readers = argc > 2 ? std::atoi(argv[2]) : 200;
  const int windowers = argc > 3 ? std::atoi(argv[3]) : 20;
  ::signal(SIGPIPE, SIG_IGN);
  char tmpl[] = "/tmp/gt_serve_load_XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string rapl = dir + "/powercap/intel-rapl:0", socket = dir + "/serve.sock";
  std::filesystem::create_directories(rapl);
  std::ofstream(rapl + "/name") << "package-0\n";
  std::ofstream(rapl + "/energy_uj") << "0\n";
  std::ofstream(rapl + "/max_energy_range_uj") << "262143328850\n";
  // The counter advances by whole steps every millisecond, written whole (rename).
  std::atomic<bool> stop_counter{false};
  std::thread counter([&] {
    unsigned long long uj = 0;
    while (!stop_counter) {
      uj += static_cast<unsigned long long>(kStepJ * 1e6);
      std::ofstream(rapl + "/energy_uj.tmp") << uj << "\n";
      std::filesystem::rename(rapl + "/energy_uj.tmp", rapl + "/energy_uj");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  const pid_t daemon = ::fork();
  if (daemon == 0) {
    ::setenv("GT_POWERCAP_ROOT", (dir + "/powercap").c_str(), 1);
    ::setenv("GT_ENERGY_LOCK_DIR", (dir + "/locks").c_str(), 1);
#ifdef GT_FAKE_NVML
    ::setenv("GT_NVML_LIBRARY", GT_FAKE_NVML, 1);
    ::setenv("FAKE_NVML_DEVICES", "2", 1);
#endif
    std::freopen((dir + "/daemon.log").c_str(), "w", stderr);
    // $GT_SERVE_PROGRAM: another build of the program, to compare two daemons side by side
    const char* prog =
        std::getenv("GT_SERVE_PROGRAM") ? std::getenv("GT_SERVE_PROGRAM") : GT_PROGRAM;
    ::execl(prog, prog, "serve", "--foreground", "--socket", socket.c_str(), "--state-file",
            (dir + "/state.json").c_str(), "--interval", "100", nullptr);
    ::_exit(126);
  }
  std::string why;
  for (int i = 0; i < 400 && !ed::DaemonClient::connect(socket, &why, nullptr, 1); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::printf(
      "greentrain serve load: %d readers at 10 Hz, then + %d window clients; %g s; "
      "daemon pid %d, sampling every 100 ms\n",
      readers, windowers, seconds, daemon);
  // $GT_SERVE_LOAD_READS: page (default: as a Meter's ticks read) or socket (a request each)
  const bool by_page = std::getenv("GT_SERVE_LOAD_READS") == nullptr ||
                       std::string(std::getenv("GT_SERVE_LOAD_READS")) != "socket";
  std::printf("readers read %s\n", by_page ? "the shared sample page (GT_SERVE_LOAD_READS=page)"
                                           : "through the socket (GT_SERVE_LOAD_READS=socket)");
  Readers rd;
  PageReaders pr;
  std::thread rt([&] {
    if (by_page)
      pr.run(socket, readers, 10);
    else
      rd.run(socket, readers, 10);
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));  // connected and steady
  const double c0 = cpu_s_of(daemon);
  const auto w0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds / 2));
  const double c1 = cpu_s_of(daemon);
  const auto w1 = Clock::now();
  const long reads1 = by_page ? pr.got.load() : rd.got.load();
  WindowStats ws;
  std::vector<std::thread> wt;
  for (int i = 0; i < windowers; ++i) wt.emplace_back([&] { window_client(socket, ws); });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds / 2));
  const double c2 = cpu_s_of(daemon);
  const auto w2 = Clock::now();
  g_stop = true;
  for (auto& t : wt) t.join();
  rt.join();
  const long lost = by_page ? pr.sent - pr.got : rd.settle();
  ::kill(daemon, SIGTERM);
  ::waitpid(daemon, nullptr, 0);
  stop_counter = true;
  counter.join();
  const double p1 = std::chrono::duration<double>(w1 - w0).count();
  const double p2 = std::chrono::duration<double>(w2 - w1).count();
  std::printf(
      "phase 1, readers only:  daemon CPU %.2f %% of one core (target < 2 %%), %.0f "
      "reads/s\n",
      100 * (c1 - c0) / p1, static_cast<double>(reads1) / p1);
  std::printf(
      "phase 2, + windows:     daemon CPU %.2f %% of one core, %.0f windows/s, window "
      "latency (2 fresh reads) median %.2f ms, p99 %.2f ms\n",
      100 * (c2 - c1) / p2, static_cast<double>(ws.windows) / p2, percentile(ws.latency_ms, 0.5),
      percentile(ws.latency_ms, 0.99));
  std::printf(
      "readings: %ld sent, %ld lost; %zu distinct samples checked across clients; "
      "%ld windows; failures: %ld\n",
      by_page ? pr.sent.load() : rd.sent.load(), lost, g_truth.size(), ws.windows.load(),
      g_failures.load());
  if (by_page)
    std::printf("page reads that went through the socket instead: %ld\n", pr.by_socket.load());
  std::filesystem::remove_all(dir);
  return g_failures == 0 && lost == 0 ? 0 : 1;
}
