// fuzz/fuzz_jobs.cpp: the scheduler's inputs (sched/jobs.h) on any bytes. The first byte picks
// the reader: a TOML job list, a CSV job list (with options from the second byte), a
// `greentrain tune` power profile (JSON) or a run's summary.json.
#include "fuzz/fuzz_util.h"
#include "sched/jobs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gt;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const uint8_t kind = fuzz::take_byte(in) % 4;
  const std::int64_t offset_s = 3600;
  fuzz::expect_errors([&] {
    switch (kind) {
      case 0:
        (void)sched::load_jobs_toml(fuzz::write_file("jobs.toml", in), offset_s);
        break;
      case 1: {
        const uint8_t o = fuzz::take_byte(in);
        sched::JobCsvOptions opt;
        opt.window_s = (o & 1) ? 3600 * (o >> 4) : -1;
        opt.rule = static_cast<sched::DeadlineRule>((o >> 1) % 3);
        opt.deadline_grace_s = (o & 8) ? 1800 : 0;
        opt.power_w = (o & 16) ? 0 : 250;
        opt.interruptible = o & 32;
        (void)sched::load_jobs_csv(fuzz::write_file("jobs.csv", in), offset_s, opt);
        break;
      }
      case 2:
        (void)sched::caps_from_profile(fuzz::write_file("profile.json", in), 5000);
        break;
      default:
        (void)sched::run_figures_from_summary(fuzz::write_file("summary.json", in));
    }
  });
  return 0;
}
