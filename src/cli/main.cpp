// The greentrain program: parses the command line and runs one subcommand.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "cli/command.h"
#include "core/error.h"

namespace gt::cli {
std::vector<CommandEntry>& registry() {
  static std::vector<CommandEntry> r;
  return r;
}
int& exit_code() {
  static int code = 0;
  return code;
}
}  // namespace gt::cli

namespace {
// GNU OpenMP's threads spin for ~300k iterations at every barrier before sleeping. On a
// machine shared with other work (a compiler, another job) a spinning thread holds a core
// that the thread it waits for needs, and a training step gets up to 10x slower (measured
// here: 1,000 against 5,300 tokens/s under load). libgomp reads its settings when it is
// loaded, before main(), so the program sets a short spin and re-executes itself once,
// unless the user chose a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT).
//
// The setting is greentrain's own: after the re-execution libgomp has read it, so it is
// removed from the environment again, and every program greentrain starts (`measure -- CMD`,
// sbatch, nvidia-smi) gets the user's environment unchanged. A marker variable says that the
// spin count was set here and not by the user; it is removed too.
constexpr const char* kSpinMarker = "GREENTRAIN_SET_GOMP_SPINCOUNT";

void set_openmp_spin(char** argv) {
  if (std::getenv(kSpinMarker)) {  // the re-executed program: undo what the first one set
    unsetenv("GOMP_SPINCOUNT");
    unsetenv(kSpinMarker);
    return;
  }
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  setenv("GOMP_SPINCOUNT", "10000", 1);
  setenv(kSpinMarker, "1", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the defaults
  unsetenv("GOMP_SPINCOUNT");
  unsetenv(kSpinMarker);
}
}  // namespace

int main(int argc, char** argv) {
  set_openmp_spin(argv);
  CLI::App app{"greentrain: energy-efficient training of GPT-style models, measured in joules"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "greentrain 0.1.0");
  auto& reg = gt::cli::registry();
  std::sort(reg.begin(), reg.end(), [](auto& a, auto& b) { return a.order < b.order; });
  for (auto& c : reg) c.setup(app);
  gt::cli::check_numbers(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const gt::Error& e) {
    std::fprintf(stderr, "greentrain: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "greentrain: error: %s\n", e.what());
    return 1;
  }
  return gt::cli::exit_code();
}
