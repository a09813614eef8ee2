// cli/command.h: the greentrain program is one CLI11 app; each subcommand lives in its
// own cmd_<name>.cpp and registers itself here with a static Registrar. Files matching
// src/cli/cmd_*.cpp are compiled into the program automatically.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
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

/// Exit code of a usage error (unknown command or option, missing argument, bad value), as
/// getopt and argparse programs use it.
inline constexpr int kUsageExit = 2;

/// Writes `j` where a command's --json PATH says: "-" is standard output, any other path a
/// file written to a temporary name and renamed. Throws gt::Error naming the path on failure.
void write_json_output(const std::string& path, const nlohmann::json& j);

/// Where a command prints its human-readable lines: standard error when its JSON goes to
/// standard output (--json -), so that stdout holds the JSON alone; standard output otherwise.
inline FILE* human_out(const std::string& json_path) { return json_path == "-" ? stderr : stdout; }

/// Adds `--json [PATH]` to `c`: the JSON goes to PATH, or to standard output when PATH is "-"
/// or left out (`--json` alone). `what` describes the document (its schema is in
/// docs/cli-json.md).
CLI::Option* add_json_option(CLI::App* c, std::string& path, const std::string& what);

/// Puts every floating-point option of app and its subcommands through the one checked number
/// parser (core/parse.h): "nan", "inf", "1e999" and trailing text are refused with a message
/// naming the option, the value and what was expected. Called once after all setups.
void check_numbers(CLI::App& app);

}  // namespace gt::cli
