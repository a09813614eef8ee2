// tests/energy/gpu_test.cpp: NVML and ROCm SMI through the stand-in libraries (fake_nvml.cpp,
// fake_rocm_smi.cpp), loaded by the production code through GT_NVML_LIBRARY and
// GT_ROCM_SMI_LIBRARY.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "energy/gpu_sensors.h"
#include "energy/meter.h"
#include "energy/nvml.h"
#include "test_util.h"

namespace gt::energy {
using namespace test;

namespace {
struct NvmlEnv {
  EnvGuard lib{"GT_NVML_LIBRARY", GT_FAKE_NVML};
  std::vector<std::unique_ptr<EnvGuard>> more;
  NvmlEnv() {
    for (auto k : {"CUDA_VISIBLE_DEVICES", "FAKE_NVML_INIT_RC", "FAKE_NVML_DEVICES",
                   "FAKE_NVML_UUIDS", "FAKE_NVML_MIG", "FAKE_NVML_NO_ENERGY", "FAKE_NVML_NO_POWER",
                   "FAKE_NVML_POWER_MW", "FAKE_NVML_ENERGY_FILE", "FAKE_NVML_SET_LOG",
                   "FAKE_NVML_SET_RC", "FAKE_NVML_DRAW_MW", "FAKE_NVML_LIMIT_FILE"}) {
      more.push_back(std::make_unique<EnvGuard>(k, ""));
      unsetenv(k);
    }
  }
  void set(const std::string& k, const std::string& v) {
    more.push_back(std::make_unique<EnvGuard>(k, v));
  }
};
}  // namespace

TEST(Nvml, MissingDriverIsUnavailableWithReason) {
  NvmlEnv e;
  e.set("GT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
  auto l = detect_nvml();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_FALSE(l[0]->info().available);
  EXPECT_NE(l[0]->info().reason.find("cannot load"), std::string::npos);
}

TEST(Nvml, InitFailureIsUnavailableWithReason) {
  NvmlEnv e;
  e.set("FAKE_NVML_INIT_RC", "9");
  auto l = detect_nvml();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_FALSE(l[0]->info().available);
  EXPECT_NE(l[0]->info().reason.find("Driver Not Loaded"), std::string::npos)
      << l[0]->info().reason;
}

TEST(Nvml, EnergyCounterMillijoules) {
  NvmlEnv e;
  TempDir d;
  e.set("FAKE_NVML_ENERGY_FILE", d / "e");
  write_file(d / "e", "5000\n");
  auto l = detect_nvml();
  ASSERT_EQ(l.size(), 1u);
  ASSERT_TRUE(l[0]->info().available) << l[0]->info().reason;
  EXPECT_EQ(l[0]->info().kind, SensorKind::kEnergyCounter);
  EXPECT_EQ(l[0]->info().device_key, "nvml-GPU-00000000-0000-0000-0000-000000000000");
  ManualClock clk;
  Meter m(std::move(l), manual_options(d / "locks"), clk.clock());
  m.begin_window("w");
  clk.advance(1.0);
  write_file(d / "e", "6000\n");  // +1000 mJ over 1 s = 1 W
  auto r = m.end_window("w");
  EXPECT_DOUBLE_EQ(r.energy_j, 1.0);
  EXPECT_DOUBLE_EQ(*r.avg_power_w, 1.0);
  EXPECT_EQ(r.domains[0].domain, "gpu");
}

TEST(Nvml, CounterGoingBackwardsIsFlagged) {
  NvmlEnv e;
  TempDir d;
  e.set("FAKE_NVML_ENERGY_FILE", d / "e");
  write_file(d / "e", "100000\n");
  ManualClock clk;
  Meter m(detect_nvml(), manual_options(d / "locks"), clk.clock());
  m.begin_window("w");
  clk.advance(1);
  write_file(d / "e", "150000\n");  // 50 W
  m.sample_now();
  clk.advance(1);
  write_file(d / "e", "1000\n");  // driver reload
  auto r = m.end_window("w");
  EXPECT_NEAR(r.energy_j, 100.0, 1e-9);
  EXPECT_GT(r.domains[0].untrusted_s, 0.0);
}

// Issue 12, part 5: NVML's counter read every 0.1 s dips by 10 mJ and comes back: 60.000 J, not
// 70.010 J.
TEST(Nvml, CounterThatDipsAndRecoversCountsTheTruth) {
  NvmlEnv e;
  TempDir d;
  e.set("FAKE_NVML_ENERGY_FILE", d / "e");
  write_file(d / "e", "1000000\n");
  ManualClock clk;
  Meter m(detect_nvml(), manual_options(d / "locks"), clk.clock());
  m.begin_window("w");
  for (auto mj : {"1010000", "1020000", "1019990", "1040000", "1050000", "1060000"}) {
    clk.advance(0.1);
    write_file(d / "e", std::string(mj) + "\n");
    m.sample_now();
  }
  auto r = m.end_window("w");
  EXPECT_NEAR(r.energy_j, 60.0, 1e-9);
  EXPECT_NEAR(r.domains[0].untrusted_s, 0.1, 1e-9);
}

TEST(RocmSmi, CounterThatDipsAndRecoversCountsTheTruth) {
  TempDir d;
  EnvGuard lib("GT_ROCM_SMI_LIBRARY", GT_FAKE_ROCM_SMI);
  EnvGuard f("FAKE_RSMI_TICKS_FILE", d / "t");
  EnvGuard r("FAKE_RSMI_RESOLUTION", "1");      // 1 uJ per tick
  EnvGuard p("FAKE_RSMI_POWER_UW", "1000000");  // 1 W: the start-up check accepts the counter
  write_file(d / "t", "0\n");
  ManualClock clk;
  auto l = detect_rocm_smi(0.0);
  ASSERT_TRUE(l[0]->info().available) << l[0]->info().reason;
  Meter m(std::move(l), manual_options(d / "locks"), clk.clock());
  m.begin_window("w");
  std::vector<std::string> ticks = {"1000000", "2000000", "1999000", "4000000"};
  for (auto& t : ticks) {
    clk.advance(0.1);
    write_file(d / "t", t + "\n");
    m.sample_now();
  }
  auto res = m.end_window("w");
  EXPECT_NEAR(res.energy_j, 4.0, 1e-9);  // 4,000,000 uJ counted once, not 5.001 J
}

TEST(Nvml, GpuWithoutEnergyCounterIntegratesPowerMilliwatts) {
  NvmlEnv e;
  TempDir d;
  e.set("FAKE_NVML_NO_ENERGY", "all");
  e.set("FAKE_NVML_POWER_MW", "250000");
  auto l = detect_nvml();
  ASSERT_TRUE(l[0]->info().available);
  EXPECT_EQ(l[0]->info().kind, SensorKind::kPowerGauge);
  EXPECT_NE(l[0]->info().reason.find("no energy counter"), std::string::npos);
  ManualClock clk;
  Meter m(std::move(l), manual_options(d / "locks"), clk.clock());
  m.begin_window("w");
  for (int i = 0; i < 4; ++i) {
    clk.advance(0.5);
    m.sample_now();
  }
  auto r = m.end_window("w");
  EXPECT_DOUBLE_EQ(r.energy_j, 500.0);  // 250 W x 2 s
  EXPECT_EQ(r.domains[0].method, Method::kIntegrated);
  EXPECT_DOUBLE_EQ(r.peak_power_w.value_or(-1), 250.0);
}

TEST(Nvml, NeitherEnergyNorPowerIsUnavailable) {
  NvmlEnv e;
  e.set("FAKE_NVML_NO_ENERGY", "all");
  e.set("FAKE_NVML_NO_POWER", "all");
  auto l = detect_nvml();
  EXPECT_FALSE(l[0]->info().available);
  EXPECT_NE(l[0]->info().reason.find("Not Supported"), std::string::npos);
}

TEST(Nvml, CudaVisibleDevicesResolvedThroughUuids) {
  NvmlEnv e;
  e.set("FAKE_NVML_DEVICES", "3");
  e.set("FAKE_NVML_UUIDS", "GPU-aaaa1111,GPU-bbbb2222,GPU-cccc3333");
  e.set("FAKE_NVML_MIG", "MIG-mmmm0001@2,MIG-mmmm0002@2");
  std::string err;
  auto lib = nvml::Library::load(&err);
  ASSERT_TRUE(lib) << err;
  auto idx = [&](const char* cvd) {
    std::vector<unsigned> v;
    for (auto& g : nvml::resolve_visible(*lib, cvd, nullptr)) v.push_back(g.nvml_index);
    return v;
  };
  EXPECT_EQ(idx(nullptr), (std::vector<unsigned>{0, 1, 2}));
  EXPECT_EQ(idx("2,0"), (std::vector<unsigned>{2, 0}));
  EXPECT_EQ(idx("GPU-bbbb2222"), (std::vector<unsigned>{1}));
  EXPECT_EQ(idx("GPU-cc"), (std::vector<unsigned>{2}));                     // unique prefix
  EXPECT_EQ(idx("MIG-mmmm0002"), (std::vector<unsigned>{2}));               // MIG -> its GPU
  EXPECT_EQ(idx("MIG-mmmm0001,MIG-mmmm0002"), (std::vector<unsigned>{2}));  // GPU once
  EXPECT_EQ(idx("MIG-GPU-bbbb2222/1/0"), (std::vector<unsigned>{1}));       // pre-R470 MIG form
  EXPECT_EQ(idx(" 1 , 0 "), (std::vector<unsigned>{1, 0}));
  EXPECT_EQ(idx("1,7,0"), (std::vector<unsigned>{1}));  // stops at the invalid entry, as CUDA
  EXPECT_TRUE(idx("").empty());
  EXPECT_TRUE(idx("-1").empty());
  std::vector<std::string> notes;
  nvml::resolve_visible(*lib, "GPU-", &notes);  // ambiguous prefix
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("ambiguous"), std::string::npos);
}

// Issue 12, part 8: an index too large for a number is an unmatched entry with a message, not an
// exception that says "stoul".
TEST(Nvml, CudaVisibleDevicesIndexTooLargeIsUnmatched) {
  NvmlEnv e;
  e.set("FAKE_NVML_DEVICES", "2");
  std::string err;
  auto lib = nvml::Library::load(&err);
  ASSERT_TRUE(lib) << err;
  std::vector<std::string> notes;
  auto v = nvml::resolve_visible(*lib, "1,99999999999999999999,0", &notes);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].nvml_index, 1u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("CUDA_VISIBLE_DEVICES entry '99999999999999999999' matches no NVML "
                          "device (CUDA_VISIBLE_DEVICES entry: '99999999999999999999' is out of "
                          "range (at most 4294967295); expected a GPU index)"),
            std::string::npos)
      << notes[0];
  e.set("CUDA_VISIBLE_DEVICES", "99999999999999999999");
  auto l = detect_nvml();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_FALSE(l[0]->info().available);
  EXPECT_NE(l[0]->info().reason.find("matches no NVML device"), std::string::npos);
}

TEST(Nvml, OnlyVisibleGpusAreSensors) {
  NvmlEnv e;
  e.set("FAKE_NVML_DEVICES", "4");
  e.set("CUDA_VISIBLE_DEVICES", "3,1");
  auto l = detect_nvml();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0]->info().name, "nvml:3");
  EXPECT_EQ(l[1]->info().name, "nvml:1");
}

TEST(Nvml, PowerLimitFunctionsAndSetLog) {
  NvmlEnv e;
  TempDir d;
  e.set("FAKE_NVML_SET_LOG", d / "set.log");
  std::string err;
  auto lib = nvml::Library::load(&err);
  ASSERT_TRUE(lib) << err;
  auto dev = lib->device_by_index(0);
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ(lib->power_limit_mw(dev.value).value, 300000u);
  auto c = lib->power_limit_constraints_mw(dev.value);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value.first, 100000u);
  EXPECT_EQ(c.value.second, 400000u);
  EXPECT_EQ(lib->set_power_limit_mw(dev.value, 200000), nvml::kSuccess);
  EXPECT_EQ(lib->power_limit_mw(dev.value).value, 200000u);
  EXPECT_EQ(lib->set_power_limit_mw(dev.value, 50000), 2);  // below the minimum
  std::ifstream log(d / "set.log");
  std::string all((std::istreambuf_iterator<char>(log)), {});
  EXPECT_EQ(all, "0 200000 0\n0 50000 2\n");
}

TEST(Nvml, SimulatedPowerCapMode) {
  NvmlEnv e;
  e.set("FAKE_NVML_DRAW_MW", "250000");
  std::string err;
  auto lib = nvml::Library::load(&err);
  ASSERT_TRUE(lib) << err;
  auto dev = lib->device_by_index(0).value;
  EXPECT_EQ(lib->power_mw(dev).value, 250000u);  // limit 300 W > draw
  lib->set_power_limit_mw(dev, 125000);
  EXPECT_EQ(lib->power_mw(dev).value, 125000u);  // capped
  void* h = dlopen(GT_FAKE_NVML, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_TRUE(h);
  auto speed = reinterpret_cast<double (*)(unsigned)>(dlsym(h, "fake_nvml_speed_factor"));
  ASSERT_TRUE(speed);
  EXPECT_NEAR(speed(0), std::sqrt(0.5), 1e-12);
  dlclose(h);
}

TEST(RocmSmi, MissingLibraryIsUnavailable) {
  EnvGuard g("GT_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so");
  auto l = detect_rocm_smi(0.0);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_FALSE(l[0]->info().available);
  EXPECT_NE(l[0]->info().reason.find("cannot load"), std::string::npos);
}

TEST(RocmSmi, TicksTimesResolution) {
  TempDir d;
  EnvGuard g("GT_ROCM_SMI_LIBRARY", GT_FAKE_ROCM_SMI);
  EnvGuard r("FAKE_RSMI_RESOLUTION", "15.625");
  EnvGuard p("FAKE_RSMI_POWER_UW", "1000000");  // 1 W
  auto l = detect_rocm_smi(0.05);               // counter advances at 1 W: plausible
  ASSERT_EQ(l.size(), 1u);
  ASSERT_TRUE(l[0]->info().available) << l[0]->info().reason;
  EXPECT_EQ(l[0]->info().kind, SensorKind::kEnergyCounter);
  EnvGuard f("FAKE_RSMI_TICKS_FILE", d / "t");
  write_file(d / "t", "0\n");
  ManualClock clk;
  Meter m(std::move(l), manual_options(d / "locks"), clk.clock());
  m.begin_window("w");
  clk.advance(1);
  write_file(d / "t", "64000\n");  // 64000 ticks x 15.625 uJ = 1e6 uJ over 1 s = 1 W
  auto res = m.end_window("w");
  EXPECT_DOUBLE_EQ(res.energy_j, 1.0);
  EXPECT_DOUBLE_EQ(*res.avg_power_w, 1.0);
}

// ROCm SMI lists every GPU of the node; a job sees those of ROCR_VISIBLE_DEVICES (indices or
// GPU-<unique id>), then of HIP_VISIBLE_DEVICES among them, in their order: only those are
// measured, numbered as the job numbers them. An entry that matches nothing ends the list.
TEST(RocmSmi, OnlyTheVisibleGpusInTheirOrder) {
  EnvGuard g("GT_ROCM_SMI_LIBRARY", GT_FAKE_ROCM_SMI);
  EnvGuard n("FAKE_RSMI_DEVICES", "4");
  EnvGuard rocr("ROCR_VISIBLE_DEVICES", "3,1,GPU-a1b2c3d4002");  // ROCm SMI GPUs 3, 1, 2
  EnvGuard hip("HIP_VISIBLE_DEVICES", "2,0");                    // of those: 2, then 3
  auto l = detect_rocm_smi(0.0);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0]->info().name, "rocm:2");
  EXPECT_EQ(l[0]->info().index, 0);
  EXPECT_NE(l[0]->info().device.find("ROCR_VISIBLE_DEVICES GPU-a1b2c3d4002, HIP_VISIBLE_DEVICES 2"),
            std::string::npos)
      << l[0]->info().device;
  EXPECT_EQ(l[1]->info().name, "rocm:3");
  EXPECT_EQ(l[1]->info().index, 1);
  unsetenv("HIP_VISIBLE_DEVICES");
  setenv("ROCR_VISIBLE_DEVICES", "1,7,0", 1);  // 7: no such GPU
  std::vector<std::string> notes;
  const auto v = rocm_visible(4, nullptr, &notes);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rsmi_index, 1u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("ROCR_VISIBLE_DEVICES entry '7' matches no visible AMD GPU"),
            std::string::npos)
      << notes[0];
  unsetenv("ROCR_VISIBLE_DEVICES");
  EXPECT_EQ(rocm_visible(4, nullptr, nullptr).size(), 4u);  // nothing set: every GPU
}

// The node's AMD GPU count (what the node daemon tells its clients in hello) is ROCm SMI's,
// whatever this process's ROCR_VISIBLE_DEVICES; without ROCm SMI it is unknown, and why.
TEST(RocmSmi, GpuCountIsEveryGpuOfTheNode) {
  {
    EnvGuard g("GT_ROCM_SMI_LIBRARY", GT_FAKE_ROCM_SMI);
    EnvGuard n("FAKE_RSMI_DEVICES", "4");
    EnvGuard rocr("ROCR_VISIBLE_DEVICES", "1");
    std::string why;
    EXPECT_EQ(rocm_smi_gpu_count(&why), std::optional<uint32_t>(4)) << why;
  }
  EnvGuard g("GT_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so");
  std::string why;
  EXPECT_FALSE(rocm_smi_gpu_count(&why));
  EXPECT_NE(why.find("/nonexistent/librocm_smi64.so"), std::string::npos) << why;
}

TEST(RocmSmi, ImplausibleCounterFallsBackToPower) {
  TempDir d;
  EnvGuard g("GT_ROCM_SMI_LIBRARY", GT_FAKE_ROCM_SMI);
  EnvGuard f("FAKE_RSMI_TICKS_FILE", d / "t");  // a counter that never moves
  write_file(d / "t", "42\n");
  EnvGuard p("FAKE_RSMI_POWER_UW", "80000000");  // 80 W
  auto l = detect_rocm_smi(0.05);
  ASSERT_TRUE(l[0]->info().available);
  EXPECT_EQ(l[0]->info().kind, SensorKind::kPowerGauge);
  EXPECT_NE(l[0]->info().reason.find("implausible"), std::string::npos);
}

}  // namespace gt::energy
