// fuzz/fuzz_jobs.cpp: the scheduler's inputs (sched/jobs.h) on any bytes. The first byte picks
// the reader: a TOML job list, a CSV job list (with options from the second byte), a
// `greentrain tune` power profile (JSON) or a run's summary.json; its bit 4 reads job times in
// Europe/Berlin (daylight saving: skipped and repeated hours) instead of at UTC+1.
#include "fuzz/fuzz_util.h"
#include "sched/jobs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gt;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const uint8_t first = fuzz::take_byte(in);
  const uint8_t kind = first % 4;
  static const sched::TimeZone berlin = [] {
    try {
      return sched::TimeZone::parse("Europe/Berlin");
    } catch (const Error&) {
      return sched::TimeZone(3600);
    }
  }();
  const sched::TimeZone zone = (first & 4) ? berlin : sched::TimeZone(3600);
  fuzz::expect_errors([&] {
    switch (kind) {
      case 0:
        (void)sched::load_jobs_toml(fuzz::write_file("jobs.toml", in), zone);
        break;
      case 1: {
        const uint8_t o = fuzz::take_byte(in);
        sched::JobCsvOptions opt;
        opt.window_s = (o & 1) ? 3600 * (o >> 4) : -1;
        opt.rule = static_cast<sched::DeadlineRule>((o >> 1) % 3);
        opt.deadline_grace_s = (o & 8) ? 1800 : 0;
        opt.power_w = (o & 16) ? 0 : 250;
        opt.interruptible = o & 32;
        (void)sched::load_jobs_csv(fuzz::write_file("jobs.csv", in), zone, opt);
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
