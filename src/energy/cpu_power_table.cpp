// energy/cpu_power_table.cpp: see cpu_power_table.h.
#include "energy/cpu_power_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "core/parse.h"

namespace gt::energy {

const std::vector<CpuPart>& cpu_parts() {
  // Each row: the name in the model string, cores, threads, TDP (W), generation, datasheet.
  // AMD rows: the product page on amd.com (www.amd.com/en/products/processors/server/epyc/...),
  // "Default TDP", "# of CPU Cores", "# of Threads". Intel rows: the product page on
  // ark.intel.com, "TDP" (Xeon 6: "Processor Base Power"), "Total Cores", "Total Threads".
  static const std::vector<CpuPart> parts = {
      // AMD EPYC 7001 (Naples): amd.com product page ("Default TDP" / "Processor Base Power",
      // cores, threads)
      {"EPYC 7601", 32, 64, 180, "AMD EPYC 7001 (Naples)", "amd.com product page EPYC 7601"},
      {"EPYC 7551", 32, 64, 180, "AMD EPYC 7001 (Naples)", "amd.com product page EPYC 7551"},
      // AMD EPYC 7002 (Rome): amd.com product page ("Default TDP" / "Processor Base Power", cores,
      // threads)
      {"EPYC 7742", 64, 128, 225, "AMD EPYC 7002 (Rome)", "amd.com product page EPYC 7742"},
      {"EPYC 7702", 64, 128, 200, "AMD EPYC 7002 (Rome)", "amd.com product page EPYC 7702"},
      {"EPYC 7H12", 64, 128, 280, "AMD EPYC 7002 (Rome)", "amd.com product page EPYC 7H12"},
      {"EPYC 7642", 48, 96, 225, "AMD EPYC 7002 (Rome)", "amd.com product page EPYC 7642"},
      {"EPYC 7552", 48, 96, 200, "AMD EPYC 7002 (Rome)", "amd.com product page EPYC 7552"},
      {"EPYC 7542", 32, 64, 225, "AMD EPYC 7002 (Rome)", "amd.com product page EPYC 7542"},
      {"EPYC 7502", 32, 64, 180, "AMD EPYC 7002 (Rome)", "amd.com product page EPYC 7502"},
      {"EPYC 7452", 32, 64, 155, "AMD EPYC 7002 (Rome)", "amd.com product page EPYC 7452"},
      {"EPYC 7402", 24, 48, 180, "AMD EPYC 7002 (Rome)", "amd.com product page EPYC 7402"},
      {"EPYC 7302", 16, 32, 155, "AMD EPYC 7002 (Rome)", "amd.com product page EPYC 7302"},
      {"EPYC 7282", 16, 32, 120, "AMD EPYC 7002 (Rome)", "amd.com product page EPYC 7282"},
      {"EPYC 7262", 8, 16, 155, "AMD EPYC 7002 (Rome)", "amd.com product page EPYC 7262"},
      // AMD EPYC 7003 (Milan): amd.com product page ("Default TDP" / "Processor Base Power", cores,
      // threads)
      {"EPYC 7763", 64, 128, 280, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 7763"},
      {"EPYC 7713", 64, 128, 225, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 7713"},
      {"EPYC 7663", 56, 112, 240, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 7663"},
      {"EPYC 7643", 48, 96, 225, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 7643"},
      {"EPYC 7543", 32, 64, 225, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 7543"},
      {"EPYC 7513", 32, 64, 200, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 7513"},
      {"EPYC 7453", 28, 56, 225, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 7453"},
      {"EPYC 7443", 24, 48, 200, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 7443"},
      {"EPYC 7413", 24, 48, 180, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 7413"},
      {"EPYC 7343", 16, 32, 190, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 7343"},
      {"EPYC 7313", 16, 32, 155, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 7313"},
      {"EPYC 75F3", 32, 64, 280, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 75F3"},
      {"EPYC 73F3", 16, 32, 240, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 73F3"},
      {"EPYC 7773X", 64, 128, 280, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 7773X"},
      {"EPYC 7573X", 32, 64, 280, "AMD EPYC 7003 (Milan)", "amd.com product page EPYC 7573X"},
      // AMD EPYC 9004 (Genoa): amd.com product page ("Default TDP" / "Processor Base Power", cores,
      // threads)
      {"EPYC 9654", 96, 192, 360, "AMD EPYC 9004 (Genoa)", "amd.com product page EPYC 9654"},
      {"EPYC 9634", 84, 168, 290, "AMD EPYC 9004 (Genoa)", "amd.com product page EPYC 9634"},
      {"EPYC 9554", 64, 128, 360, "AMD EPYC 9004 (Genoa)", "amd.com product page EPYC 9554"},
      {"EPYC 9534", 64, 128, 280, "AMD EPYC 9004 (Genoa)", "amd.com product page EPYC 9534"},
      {"EPYC 9474F", 48, 96, 360, "AMD EPYC 9004 (Genoa)", "amd.com product page EPYC 9474F"},
      {"EPYC 9454", 48, 96, 290, "AMD EPYC 9004 (Genoa)", "amd.com product page EPYC 9454"},
      {"EPYC 9374F", 32, 64, 320, "AMD EPYC 9004 (Genoa)", "amd.com product page EPYC 9374F"},
      {"EPYC 9354", 32, 64, 280, "AMD EPYC 9004 (Genoa)", "amd.com product page EPYC 9354"},
      {"EPYC 9334", 32, 64, 210, "AMD EPYC 9004 (Genoa)", "amd.com product page EPYC 9334"},
      {"EPYC 9254", 24, 48, 200, "AMD EPYC 9004 (Genoa)", "amd.com product page EPYC 9254"},
      {"EPYC 9224", 24, 48, 200, "AMD EPYC 9004 (Genoa)", "amd.com product page EPYC 9224"},
      {"EPYC 9124", 16, 32, 200, "AMD EPYC 9004 (Genoa)", "amd.com product page EPYC 9124"},
      {"EPYC 9684X", 96, 192, 400, "AMD EPYC 9004 (Genoa)", "amd.com product page EPYC 9684X"},
      // AMD EPYC 9004 (Bergamo): amd.com product page ("Default TDP" / "Processor Base Power",
      // cores, threads)
      {"EPYC 9754", 128, 256, 360, "AMD EPYC 9004 (Bergamo)", "amd.com product page EPYC 9754"},
      {"EPYC 9734", 112, 224, 340, "AMD EPYC 9004 (Bergamo)", "amd.com product page EPYC 9734"},
      // AMD EPYC 9005 (Turin): amd.com product page ("Default TDP" / "Processor Base Power", cores,
      // threads)
      {"EPYC 9755", 128, 256, 500, "AMD EPYC 9005 (Turin)", "amd.com product page EPYC 9755"},
      {"EPYC 9655", 96, 192, 400, "AMD EPYC 9005 (Turin)", "amd.com product page EPYC 9655"},
      {"EPYC 9555", 64, 128, 360, "AMD EPYC 9005 (Turin)", "amd.com product page EPYC 9555"},
      {"EPYC 9455", 48, 96, 300, "AMD EPYC 9005 (Turin)", "amd.com product page EPYC 9455"},
      {"EPYC 9355", 32, 64, 280, "AMD EPYC 9005 (Turin)", "amd.com product page EPYC 9355"},
      {"EPYC 9115", 16, 32, 125, "AMD EPYC 9005 (Turin)", "amd.com product page EPYC 9115"},
      // AMD EPYC 9005 (Turin dense): amd.com product page ("Default TDP" / "Processor Base Power",
      // cores, threads)
      {"EPYC 9965", 192, 384, 500, "AMD EPYC 9005 (Turin dense)", "amd.com product page EPYC 9965"},
      // Intel Xeon Scalable 1st gen (Skylake-SP): ark.intel.com ("Default TDP" / "Processor Base
      // Power", cores, threads)
      {"Platinum 8180", 28, 56, 205, "Intel Xeon Scalable 1st gen (Skylake-SP)",
       "ark.intel.com Platinum 8180"},
      {"Platinum 8176", 28, 56, 165, "Intel Xeon Scalable 1st gen (Skylake-SP)",
       "ark.intel.com Platinum 8176"},
      {"Platinum 8168", 24, 48, 205, "Intel Xeon Scalable 1st gen (Skylake-SP)",
       "ark.intel.com Platinum 8168"},
      {"Platinum 8160", 24, 48, 150, "Intel Xeon Scalable 1st gen (Skylake-SP)",
       "ark.intel.com Platinum 8160"},
      {"Gold 6154", 18, 36, 200, "Intel Xeon Scalable 1st gen (Skylake-SP)",
       "ark.intel.com Gold 6154"},
      {"Gold 6148", 20, 40, 150, "Intel Xeon Scalable 1st gen (Skylake-SP)",
       "ark.intel.com Gold 6148"},
      {"Gold 6140", 18, 36, 140, "Intel Xeon Scalable 1st gen (Skylake-SP)",
       "ark.intel.com Gold 6140"},
      {"Gold 6130", 16, 32, 125, "Intel Xeon Scalable 1st gen (Skylake-SP)",
       "ark.intel.com Gold 6130"},
      {"Gold 5120", 14, 28, 105, "Intel Xeon Scalable 1st gen (Skylake-SP)",
       "ark.intel.com Gold 5120"},
      {"Silver 4114", 10, 20, 85, "Intel Xeon Scalable 1st gen (Skylake-SP)",
       "ark.intel.com Silver 4114"},
      {"Silver 4110", 8, 16, 85, "Intel Xeon Scalable 1st gen (Skylake-SP)",
       "ark.intel.com Silver 4110"},
      // Intel Xeon Scalable 2nd gen (Cascade Lake): ark.intel.com ("Default TDP" / "Processor Base
      // Power", cores, threads)
      {"Platinum 9282", 56, 112, 400, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Platinum 9282"},
      {"Platinum 8280", 28, 56, 205, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Platinum 8280"},
      {"Platinum 8276", 28, 56, 165, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Platinum 8276"},
      {"Platinum 8268", 24, 48, 205, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Platinum 8268"},
      {"Platinum 8260", 24, 48, 165, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Platinum 8260"},
      {"Gold 6248R", 24, 48, 205, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Gold 6248R"},
      {"Gold 6248", 20, 40, 150, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Gold 6248"},
      {"Gold 6240", 18, 36, 150, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Gold 6240"},
      {"Gold 6230", 20, 40, 125, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Gold 6230"},
      {"Gold 6226R", 16, 32, 150, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Gold 6226R"},
      {"Gold 5220", 18, 36, 125, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Gold 5220"},
      {"Gold 5218", 16, 32, 125, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Gold 5218"},
      {"Silver 4214", 12, 24, 85, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Silver 4214"},
      {"Silver 4210", 10, 20, 85, "Intel Xeon Scalable 2nd gen (Cascade Lake)",
       "ark.intel.com Silver 4210"},
      // Intel Xeon Scalable 3rd gen (Cooper Lake): ark.intel.com ("Default TDP" / "Processor Base
      // Power", cores, threads)
      {"Platinum 8380H", 28, 56, 250, "Intel Xeon Scalable 3rd gen (Cooper Lake)",
       "ark.intel.com Platinum 8380H"},
      {"Platinum 8376H", 28, 56, 205, "Intel Xeon Scalable 3rd gen (Cooper Lake)",
       "ark.intel.com Platinum 8376H"},
      // Intel Xeon Scalable 3rd gen (Ice Lake-SP): ark.intel.com ("Default TDP" / "Processor Base
      // Power", cores, threads)
      {"Platinum 8380", 40, 80, 270, "Intel Xeon Scalable 3rd gen (Ice Lake-SP)",
       "ark.intel.com Platinum 8380"},
      {"Platinum 8368", 38, 76, 270, "Intel Xeon Scalable 3rd gen (Ice Lake-SP)",
       "ark.intel.com Platinum 8368"},
      {"Platinum 8360Y", 36, 72, 250, "Intel Xeon Scalable 3rd gen (Ice Lake-SP)",
       "ark.intel.com Platinum 8360Y"},
      {"Platinum 8358", 32, 64, 250, "Intel Xeon Scalable 3rd gen (Ice Lake-SP)",
       "ark.intel.com Platinum 8358"},
      {"Platinum 8352Y", 32, 64, 205, "Intel Xeon Scalable 3rd gen (Ice Lake-SP)",
       "ark.intel.com Platinum 8352Y"},
      {"Gold 6348", 28, 56, 235, "Intel Xeon Scalable 3rd gen (Ice Lake-SP)",
       "ark.intel.com Gold 6348"},
      {"Gold 6338", 32, 64, 205, "Intel Xeon Scalable 3rd gen (Ice Lake-SP)",
       "ark.intel.com Gold 6338"},
      {"Gold 6330", 28, 56, 205, "Intel Xeon Scalable 3rd gen (Ice Lake-SP)",
       "ark.intel.com Gold 6330"},
      {"Gold 6326", 16, 32, 185, "Intel Xeon Scalable 3rd gen (Ice Lake-SP)",
       "ark.intel.com Gold 6326"},
      {"Gold 5318Y", 24, 48, 165, "Intel Xeon Scalable 3rd gen (Ice Lake-SP)",
       "ark.intel.com Gold 5318Y"},
      {"Silver 4314", 16, 32, 135, "Intel Xeon Scalable 3rd gen (Ice Lake-SP)",
       "ark.intel.com Silver 4314"},
      // Intel Xeon Scalable 4th gen (Sapphire Rapids): ark.intel.com ("Default TDP" / "Processor
      // Base Power", cores, threads)
      {"Platinum 8490H", 60, 120, 350, "Intel Xeon Scalable 4th gen (Sapphire Rapids)",
       "ark.intel.com Platinum 8490H"},
      {"Platinum 8480+", 56, 112, 350, "Intel Xeon Scalable 4th gen (Sapphire Rapids)",
       "ark.intel.com Platinum 8480+"},
      {"Platinum 8470", 52, 104, 350, "Intel Xeon Scalable 4th gen (Sapphire Rapids)",
       "ark.intel.com Platinum 8470"},
      {"Platinum 8468", 48, 96, 350, "Intel Xeon Scalable 4th gen (Sapphire Rapids)",
       "ark.intel.com Platinum 8468"},
      {"Platinum 8460Y+", 40, 80, 300, "Intel Xeon Scalable 4th gen (Sapphire Rapids)",
       "ark.intel.com Platinum 8460Y+"},
      {"Platinum 8462Y+", 32, 64, 300, "Intel Xeon Scalable 4th gen (Sapphire Rapids)",
       "ark.intel.com Platinum 8462Y+"},
      {"Gold 6448Y", 32, 64, 225, "Intel Xeon Scalable 4th gen (Sapphire Rapids)",
       "ark.intel.com Gold 6448Y"},
      {"Gold 6438Y+", 32, 64, 205, "Intel Xeon Scalable 4th gen (Sapphire Rapids)",
       "ark.intel.com Gold 6438Y+"},
      {"Gold 6430", 32, 64, 270, "Intel Xeon Scalable 4th gen (Sapphire Rapids)",
       "ark.intel.com Gold 6430"},
      {"Gold 5418Y", 24, 48, 185, "Intel Xeon Scalable 4th gen (Sapphire Rapids)",
       "ark.intel.com Gold 5418Y"},
      {"Silver 4416+", 20, 40, 165, "Intel Xeon Scalable 4th gen (Sapphire Rapids)",
       "ark.intel.com Silver 4416+"},
      // Intel Xeon Scalable 5th gen (Emerald Rapids): ark.intel.com ("Default TDP" / "Processor
      // Base Power", cores, threads)
      {"Platinum 8592+", 64, 128, 350, "Intel Xeon Scalable 5th gen (Emerald Rapids)",
       "ark.intel.com Platinum 8592+"},
      {"Platinum 8580", 60, 120, 350, "Intel Xeon Scalable 5th gen (Emerald Rapids)",
       "ark.intel.com Platinum 8580"},
      {"Platinum 8570", 56, 112, 350, "Intel Xeon Scalable 5th gen (Emerald Rapids)",
       "ark.intel.com Platinum 8570"},
      {"Platinum 8568Y+", 48, 96, 350, "Intel Xeon Scalable 5th gen (Emerald Rapids)",
       "ark.intel.com Platinum 8568Y+"},
      {"Platinum 8562Y+", 32, 64, 300, "Intel Xeon Scalable 5th gen (Emerald Rapids)",
       "ark.intel.com Platinum 8562Y+"},
      {"Gold 6548Y+", 32, 64, 250, "Intel Xeon Scalable 5th gen (Emerald Rapids)",
       "ark.intel.com Gold 6548Y+"},
      {"Gold 6530", 32, 64, 270, "Intel Xeon Scalable 5th gen (Emerald Rapids)",
       "ark.intel.com Gold 6530"},
      {"Gold 5520+", 28, 56, 205, "Intel Xeon Scalable 5th gen (Emerald Rapids)",
       "ark.intel.com Gold 5520+"},
      // Intel Xeon 6 (Granite Rapids, P-cores): ark.intel.com ("Default TDP" / "Processor Base
      // Power", cores, threads)
      {"6980P", 128, 256, 500, "Intel Xeon 6 (Granite Rapids, P-cores)", "ark.intel.com 6980P"},
      {"6972P", 96, 192, 500, "Intel Xeon 6 (Granite Rapids, P-cores)", "ark.intel.com 6972P"},
      {"6960P", 72, 144, 500, "Intel Xeon 6 (Granite Rapids, P-cores)", "ark.intel.com 6960P"},
      {"6787P", 86, 172, 350, "Intel Xeon 6 (Granite Rapids, P-cores)", "ark.intel.com 6787P"},
      {"6767P", 64, 128, 350, "Intel Xeon 6 (Granite Rapids, P-cores)", "ark.intel.com 6767P"},
      // Intel Xeon 6 (Sierra Forest, E-cores): ark.intel.com ("Default TDP" / "Processor Base
      // Power", cores, threads)
      {"6780E", 144, 144, 330, "Intel Xeon 6 (Sierra Forest, E-cores)", "ark.intel.com 6780E"},
      {"6766E", 144, 144, 250, "Intel Xeon 6 (Sierra Forest, E-cores)", "ark.intel.com 6766E"},
      // Desktop and other parts (kept from the earlier table; counted as non-server rows).
      {"Ryzen 9 7950X", 16, 32, 170, "AMD Ryzen 7000", "amd.com product page Ryzen 9 7950X"},
      {"Ryzen 9 5950X", 16, 32, 105, "AMD Ryzen 5000", "amd.com product page Ryzen 9 5950X"},
      {"Core(TM) i9-13900K", 24, 32, 125, "Intel Core 13th gen", "ark.intel.com i9-13900K"},
      {"Core(TM) i7-12700", 12, 20, 65, "Intel Core 12th gen", "ark.intel.com i7-12700"},
      {"Core(TM) i5-12400", 6, 12, 65, "Intel Core 12th gen", "ark.intel.com i5-12400"},
      {"Grace", 72, 72, 250, "NVIDIA Grace",
       "NVIDIA Grace CPU Superchip datasheet (500 W for 144 cores with memory, per chip)"},
  };
  return parts;
}

namespace {

bool is_server(const CpuPart& p) {
  const std::string g = p.generation;
  return g.rfind("AMD EPYC", 0) == 0 || g.rfind("Intel Xeon", 0) == 0;
}

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '+'; }

std::optional<CpuPart> part_named(const char* name) {
  for (const auto& p : cpu_parts())
    if (std::string(p.name) == name) return p;
  return std::nullopt;
}

}  // namespace

CpuInfo parse_cpuinfo(const std::string& text, const std::string& source) {
  CpuInfo c;
  std::set<std::string> sockets;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  bool flags_seen = false;
  auto number = [&](const std::string& key, const std::string& val, int* out) {
    std::string err;
    if (auto v = try_parse_number<int>(val, fmt::format("{}:{}: {}", source, lineno, key),
                                       "a whole number", &err))
      *out = *v;
    else
      c.notes.push_back(err);
  };
  while (std::getline(in, line)) {
    ++lineno;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    std::string val = line.substr(colon + 1);
    val.erase(0, val.find_first_not_of(" \t"));
    val.erase(val.find_last_not_of(" \t\r") + 1);
    if (key == "processor") ++c.logical_cpus;
    // The first processor's description stands for all (they are alike on x86 servers).
    if (c.logical_cpus > 1) {
      if (key == "physical id") sockets.insert(val);
      continue;
    }
    if (key == "vendor_id") c.vendor = val;
    if (key == "model name") c.model_name = val;
    if (key == "cpu family") number(key, val, &c.family);
    if (key == "model") number(key, val, &c.model);
    if (key == "stepping") number(key, val, &c.stepping);
    if (key == "physical id") sockets.insert(val);
    if (key == "flags" && !flags_seen) {
      flags_seen = true;
      std::istringstream f(val);
      for (std::string w; f >> w;)
        if (w == "hypervisor") c.hypervisor = true;
    }
  }
  c.sockets = sockets.empty() ? 1 : static_cast<int>(sockets.size());
  return c;
}

CpuInfo read_cpuinfo(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    CpuInfo c;
    c.notes.push_back(path + ": cannot read");
    return c;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_cpuinfo(ss.str(), path);
}

std::optional<CpuPart> find_cpu_part(const std::string& model_name) {
  for (const auto& p : cpu_parts()) {
    const std::string n = p.name;
    for (size_t at = model_name.find(n); at != std::string::npos; at = model_name.find(n, at + 1)) {
      if (at > 0 && word_char(model_name[at - 1])) continue;
      size_t end = at + n.size();
      // AMD's single-socket "P" parts (EPYC 7543P, 9654P) have the datasheet figures of the
      // part without P.
      if (n.rfind("EPYC", 0) == 0 && end < model_name.size() && model_name[end] == 'P') ++end;
      if (end < model_name.size() && word_char(model_name[end])) continue;
      return p;
    }
  }
  return std::nullopt;
}

std::optional<CpuPart> generation_part(const CpuInfo& c) {
  const int f = c.family, m = c.model;
  if (c.vendor == "AuthenticAMD") {
    if (f == 0x17 && m >= 0x00 && m <= 0x0F) return part_named("EPYC 7601");
    if (f == 0x17 && m >= 0x30 && m <= 0x3F) return part_named("EPYC 7742");
    if (f == 0x19 && m >= 0x00 && m <= 0x0F) return part_named("EPYC 7763");
    if (f == 0x19 && m >= 0x10 && m <= 0x1F) return part_named("EPYC 9654");
    if (f == 0x19 && m >= 0xA0 && m <= 0xAF) return part_named("EPYC 9754");
    if (f == 0x1A && m >= 0x00 && m <= 0x0F) return part_named("EPYC 9755");
    if (f == 0x1A && m >= 0x10 && m <= 0x1F) return part_named("EPYC 9965");
  } else if (c.vendor == "GenuineIntel" && f == 6) {
    if (m == 0x55 && c.stepping >= 0 && c.stepping <= 4) return part_named("Platinum 8180");
    if (m == 0x55 && c.stepping >= 5 && c.stepping <= 7) return part_named("Platinum 8280");
    if (m == 0x55 && c.stepping >= 10) return part_named("Platinum 8380H");
    if (m == 0x6A || m == 0x6C) return part_named("Platinum 8380");
    if (m == 0x8F) return part_named("Platinum 8480+");
    if (m == 0xCF) return part_named("Platinum 8592+");
    if (m == 0xAD) return part_named("6980P");
    if (m == 0xAF) return part_named("6780E");
  }
  return std::nullopt;
}

double default_w_per_thread() {
  static const double median = [] {
    std::vector<double> v;
    for (const auto& p : cpu_parts())
      if (is_server(p)) v.push_back(p.w_per_thread());
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }();
  return median;
}

CpuPowerFigure cpu_full_load_power(const CpuInfo& c, std::optional<double> tdp_override_w) {
  CpuPowerFigure r;
  const std::string vm = c.hypervisor ? "; virtual machine (hypervisor flag in /proc/cpuinfo)" : "";
  if (tdp_override_w) {
    r.full_load_w = *tdp_override_w * c.sockets;
    r.how = fmt::format("TDP {:.0f} W ({} socket(s) x {:.0f} W, given by configuration{})",
                        r.full_load_w, c.sockets, *tdp_override_w,
                        c.hypervisor ? ", taken as given on this virtual machine" : "");
    return r;
  }
  const auto named = find_cpu_part(c.model_name);
  auto describe = [](const CpuPart& p) {
    return fmt::format("{} {:.0f} W / {} threads, {}", p.name, p.tdp_w, p.threads, p.source);
  };
  if (!c.hypervisor) {
    if (named) {
      r.full_load_w = named->tdp_w * c.sockets;
      r.how = fmt::format("TDP {:.0f} W ({} socket(s) x {:.0f} W, {}: {})", r.full_load_w,
                          c.sockets, named->tdp_w, named->name, named->source);
    } else {
      r.full_load_w = kDefaultTdpW * c.sockets;
      r.how = fmt::format(
          "TDP {:.0f} W ({} socket(s) x {:.0f} W: model '{}' not in table, CodeCarbon's "
          "fallback)",
          r.full_load_w, c.sockets, kDefaultTdpW, c.model_name);
    }
    return r;
  }
  // A virtual machine has a slice of a processor: W per logical CPU x the logical CPUs it has.
  const int n = std::max(1, c.logical_cpus);
  double w = 0;
  std::string what;
  if (named) {
    w = named->w_per_thread();
    what = describe(*named);
  } else if (auto g = generation_part(c)) {
    w = g->w_per_thread();
    what = fmt::format("{} from CPU family {} model {}: its largest part {}", g->generation,
                       c.family, c.model, describe(*g));
  } else {
    w = default_w_per_thread();
    what = fmt::format(
        "model '{}' not in table: default, the median W per thread of the "
        "table's server rows",
        c.model_name);
  }
  r.full_load_w = w * n;
  r.how = fmt::format("{:.2f} W ({} logical CPU(s) x {:.3f} W per thread: {}){}", r.full_load_w, n,
                      w, what, vm);
  return r;
}

}  // namespace gt::energy
