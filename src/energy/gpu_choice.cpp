// energy/gpu_choice.cpp: choose_gpus (meter.h), the GPUs a meter keeps of each vendor's, for
// the sensors read directly and for those read through the node daemon.
#include <fmt/format.h>

#include "core/error.h"
#include "energy/meter.h"

namespace gt::energy {

namespace {

// A vendor's "none here" placeholder ("nvml", "rocm-smi"), as against one of its GPUs ("nvml:0").
bool is_vendor_placeholder(const SensorList& l) {
  return l.size() == 1 && !l[0]->info().available &&
         l[0]->info().name.find(':') == std::string::npos;
}

std::string gpu_list_text(const std::vector<int>& g) {
  std::string t;
  for (int x : g) t += (t.empty() ? "" : ", ") + std::to_string(x);
  return "[" + t + "]";
}

}  // namespace

SensorList choose_gpus(std::vector<VendorGpus> vendors, const MeterOptions& opt,
                       std::vector<std::string>* flags) {
  SensorList all;
  // Keeps the GPUs at positions opt.gpus of a vendor's list (its placeholder when it has none).
  auto select = [&opt](SensorList l, const char* vendor) {
    if (!opt.gpus || is_vendor_placeholder(l)) return l;
    SensorList out;
    for (int g : *opt.gpus) {
      if (g < 0 || g >= static_cast<int>(l.size()) || !l[static_cast<size_t>(g)])
        throw Error(
            fmt::format("gpus: {} is not a visible {} GPU (or is listed twice); "
                        "expected a position in 0..{}",
                        g, vendor, static_cast<int>(l.size()) - 1));
      out.push_back(std::move(l[static_cast<size_t>(g)]));
    }
    return out;
  };
  // GPUs asked for by position must be read, or (gpus_strict = false) be flagged as missing.
  std::vector<std::string> gpu_problems;
  bool vendor_found = false;
  std::string vendor_reasons;
  for (VendorGpus& v : vendors) {
    SensorList l = std::move(v.sensors);
    if (is_vendor_placeholder(l)) {
      vendor_reasons += fmt::format("{}{}: {}", vendor_reasons.empty() ? "" : "; ",
                                    l[0]->info().name, l[0]->info().reason);
    } else {
      vendor_found = true;
      l = select(std::move(l), v.vendor);
      for (auto& x : l)
        if (opt.gpus && !x->info().available)
          gpu_problems.push_back(fmt::format("GPU {} ({}) cannot be read: {}", x->info().index,
                                             x->info().name, x->info().reason));
    }
    for (auto& x : l) all.push_back(std::move(x));
  }
  if (opt.gpus && !opt.gpus->empty() && !vendor_found)
    gpu_problems.insert(
        gpu_problems.begin(),
        fmt::format("no GPU can be read ({})",
                    vendor_reasons.empty() ? "GPU sensors were turned off" : vendor_reasons));
  if (!gpu_problems.empty()) {
    std::string why;
    for (auto& p : gpu_problems) why += (why.empty() ? "" : "; ") + p;
    if (opt.gpus_strict)
      throw Error(fmt::format(
          "gpus {}: {}; expected GPUs whose energy or power can be read (or gpus_strict = "
          "false, Python strict=False, to measure the rest with a flag)",
          gpu_list_text(*opt.gpus), why));
    if (flags)
      flags->push_back(fmt::format("gpus {} {}: {}; their energy is not in these figures",
                                   gpu_list_text(*opt.gpus), kGpusNotMeasured, why));
  }
  return all;
}

}  // namespace gt::energy
