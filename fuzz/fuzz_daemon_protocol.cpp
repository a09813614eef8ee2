// fuzz/fuzz_daemon_protocol.cpp: the node daemon's protocol (energy/daemon_protocol.h) on any
// bytes. The first byte picks the side: the daemon's (the bytes as a stream split into frames at
// places the next bytes choose, each frame parsed as a request and answered by the daemon's
// request handler over a reader with no sensors and a simulated power-limit device), the
// client's (a payload read as the daemon's sample and sensor list), or the policy file
// (serve/policy.h). Refusals are ProtocolError or gt::Error; anything else is a finding.
#include <cstdlib>

#include "energy/daemon_protocol.h"
#include "fuzz/fuzz_util.h"
#include "serve/policy.h"
#include "serve/server.h"
#include "tune/simulated.h"

namespace {

namespace ed = gt::energy::daemon;
namespace gs = gt::serve;

struct World {
  gs::NodeReader reader{gt::energy::SensorList{}, 3600, gt::energy::CarbonIntensity{}};
  gs::Policy policy;
  gs::Leases leases{{std::make_shared<gt::tune::SimulatedDevice>(gt::tune::SimulatedModel{})}, ""};
  gs::ServeContext ctx;
  World() {
    ctx.reader = &reader;
    ctx.policy = &policy;
    ctx.leases = &leases;
    ctx.log = [](const std::string&) {};
  }
};

void daemon_side(std::string_view in) {
  static World w;
  ed::FrameReader r(ed::kMaxRequestBytes);
  std::string payload;
  gs::Peer peer;  // root, as the daemon's own user
  while (!in.empty()) {
    // the byte first: in std::min's arguments the order of evaluation is unspecified, and with
    // in.size() read before take_byte shortened `in`, a chunk ran one byte past the input
    const std::size_t want = 1 + gt::fuzz::take_byte(in) % 64;
    const std::size_t chunk = std::min<std::size_t>(in.size(), want);
    r.feed(in.data(), chunk);
    in.remove_prefix(chunk);
    for (;;) {
      const auto st = r.next(&payload);
      if (st == ed::FrameReader::Status::kTooLarge) return;
      if (st != ed::FrameReader::Status::kFrame) break;
      try {
        const ed::Request req = ed::parse_request(payload);
        if (req.op == "read")
          (void)gs::read_response(*w.reader.latest(), req.id);
        else
          (void)gs::handle_request(w.ctx, 1, peer, req, "/fuzz.sock").dump();
      } catch (const ed::ProtocolError& e) {
        if (e.code().empty()) std::abort();  // every refusal has a code
        (void)ed::error_response(nullptr, e.code(), e.what());
      } catch (const gt::Error&) {
      }
    }
  }
  (void)w.leases.release_all(1);
}

void client_side(std::string_view in) {
  auto j = nlohmann::json::parse(in.begin(), in.end(), nullptr, false);
  if (j.is_discarded()) return;
  gt::fuzz::expect_errors([&] { (void)ed::sample_from_json(j); });
  gt::fuzz::expect_errors([&] {
    if (j.is_object() && j.contains("sensors") && j["sensors"].is_array())
      for (const auto& s : j["sensors"]) (void)ed::sensor_info_from_json(s);
    else
      (void)ed::sensor_info_from_json(j);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  switch (gt::fuzz::take_byte(in) % 3) {
    case 0:
      daemon_side(in);
      break;
    case 1:
      client_side(in);
      break;
    default:
      gt::fuzz::expect_errors([&] { (void)gs::Policy::parse(std::string(in), "fuzz.toml"); });
  }
  return 0;
}
