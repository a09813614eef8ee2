// fuzz/fuzz_readings.cpp: sensor readings as text on any bytes. The first byte picks the reader:
// core/parse.h's number parser for each type it serves (sysfs powercap counters, NVML indices
// from CUDA_VISIBLE_DEVICES, /proc values, --set values), /proc/cpuinfo, a replayed power or
// energy trace (energy/replay.h), or a fake powercap tree whose name, energy_uj and
// max_energy_range_uj files hold the NUL-separated parts of the input (energy/rapl.h).
#include <cstdlib>
#include <filesystem>

#include "core/parse.h"
#include "energy/cpu_power_table.h"
#include "energy/rapl.h"
#include "energy/replay.h"
#include "fuzz/fuzz_util.h"

namespace {

template <class T>
void number(std::string_view text) {
  std::string err;
  auto v = gt::try_parse_number<T>(text, "fuzz", {}, &err);
  if (!v && err.empty()) std::abort();  // a refusal always says why
  gt::fuzz::expect_errors([&] { (void)gt::parse_number<T>(text, "fuzz"); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gt;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  switch (fuzz::take_byte(in) % 10) {
    case 0:
      number<int>(in);
      break;
    case 1:
      number<long>(in);
      break;
    case 2:
      number<long long>(in);
      break;
    case 3:
      number<unsigned>(in);
      break;
    case 4:
      number<unsigned long>(in);
      break;
    case 5:
      number<unsigned long long>(in);
      break;
    case 6:
      number<double>(in);
      break;
    case 7: {
      energy::CpuInfo c = energy::parse_cpuinfo(std::string(in), "cpuinfo");
      (void)energy::find_cpu_part(c.model_name);
      (void)energy::generation_part(c);
      break;
    }
    case 8:
      fuzz::expect_errors([&] {
        energy::ReplaySensor r(fuzz::write_file("trace.csv", in));
        (void)r.read(0);
        (void)r.read(1e3);
        (void)r.integral_j(r.start_s(), r.end_s());
      });
      break;
    default: {
      const auto zone = fuzz::scratch_dir() / "powercap" / "intel-rapl:0";
      std::filesystem::create_directories(zone);
      const char* files[] = {"name", "energy_uj", "max_energy_range_uj"};
      for (const char* f : files) {
        const size_t cut = std::min(in.find('\0'), in.size());
        fuzz::write_file(std::string("powercap/intel-rapl:0/") + f, in.substr(0, cut));
        in.remove_prefix(std::min(cut + 1, in.size()));
      }
      fuzz::expect_errors([&] {
        auto sensors = energy::detect_rapl((fuzz::scratch_dir() / "powercap").string());
        for (auto& s : sensors) (void)s->read(0);
      });
    }
  }
  return 0;
}
