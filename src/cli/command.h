// cli/command.h: the greentrain program is one CLI11 app; each subcommand lives in its
// own cmd_<name>.cpp and registers itself here with a static Registrar. Files matching
// src/cli/cmd_*.cpp are compiled into the program automatically.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

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

/// Exit code of a usage error, as getopt and argparse programs use it: anything the command line
/// itself gets wrong (an unknown command or option, a missing argument, a value that is not a
/// number, out of its range or not one of the choices, an option given without the one it
/// needs). What is found wrong in a file, the data or the machine exits 1 (docs/commands.md).
inline constexpr int kUsageExit = 2;

/// Runs `check` (a check or a parse of option values that reads no file) and returns what it
/// returns; a gt::Error it throws is rethrown as a gt::UsageError with the same message, so
/// that the refusal exits 2.
template <class F>
auto as_usage(F&& check) -> decltype(check()) {
  try {
    return check();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

/// Throws gt::UsageError(msg) when cond is false: gt::check for the command line's own errors.
inline void check_usage(bool cond, const std::string& msg) {
  if (!cond) throw UsageError(msg);
}

/// A check for an integer option: its text must be an integer in [lo, hi], else it is refused
/// while the command line is read (exit 2) with "OPTION: 'TEXT' is out of range; expected
/// EXPECTED" (EXPECTED empty: "LO to HI"), also for a value its variable could not hold.
CLI::Validator int_range(long long lo, long long hi, const std::string& expected = {});

/// As int_range for a floating-point option (nan, inf and 1e999 are refused too); hi infinite:
/// no upper bound, and EXPECTED defaults to "LO or more" (never the largest double written out).
CLI::Validator number_range(double lo, double hi = std::numeric_limits<double>::infinity(),
                            const std::string& expected = {});

/// A check for an option whose value is one of `choices` (compared exactly): another is refused
/// while the command line is read (exit 2) with "OPTION: 'TEXT' is not known; expected A, B or
/// C".
CLI::Validator one_of(const std::vector<std::string>& choices);

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
