// cli/command.h: the greentrain program is one CLI11 app; each subcommand lives in its
// own cmd_<name>.cpp and registers itself here with a static Registrar. Files matching
// src/cli/cmd_*.cpp are compiled into the program automatically.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace gt::cli {

/// Adds one subcommand (and its callback) to the root app.
using SetupFn = std::function<void(CLI::App& root)>;

struct CommandEntry {
  int order;  ///< position in --help (lower first)
  std::string name;
  SetupFn setup;
};

/// All registered subcommands.
std::vector<CommandEntry>& registry();

/// Registers a subcommand at static-initialisation time.
struct Registrar {
  Registrar(int order, std::string name, SetupFn setup) {
    registry().push_back({order, std::move(name), std::move(setup)});
  }
};

/// The process exit code a subcommand's callback sets (default 0).
int& exit_code();

/// Puts every floating-point option of app and its subcommands through the one checked number
/// parser (energy/parse.h): "nan", "inf", "1e999" and trailing text are refused with a message
/// naming the option, the value and what was expected. Called once after all setups.
void check_numbers(CLI::App& app);

}  // namespace gt::cli
