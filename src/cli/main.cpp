// The greentrain program: parses the command line and runs one subcommand.
#include <algorithm>
#include <cstdio>
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

int main(int argc, char** argv) {
  CLI::App app{"greentrain: energy-efficient training of GPT-style models, measured in joules"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "greentrain 0.1.0");
  auto& reg = gt::cli::registry();
  std::sort(reg.begin(), reg.end(), [](auto& a, auto& b) { return a.order < b.order; });
  for (auto& c : reg) c.setup(app);
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
