// The greentrain program: parses the command line and runs one subcommand.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/atomic_file.h"
#include "core/bytes_json.h"
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

void write_json_output(const std::string& path, const nlohmann::json& j) {
  // any byte string in it is written (replaced where not UTF-8) rather than failing after the
  // work; paths go through core/bytes_json.h so that none needs to be
  const std::string text = gt::dump_json(j, 2) + "\n";
  if (path == "-") {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    return;
  }
  gt::write_file_atomic(path, text);  // the one writer: temporary name, then rename
}

CLI::Option* add_json_option(CLI::App* c, std::string& path, const std::string& what) {
  // `--json` with no value: standard output ("-")
  return c
      ->add_option("--json", path,
                   "write " + what +
                       " as JSON to PATH (- or no PATH: standard output, the other output "
                       "then goes to standard error; schema: docs/cli-json.md)")
      ->type_name("PATH")
      ->expected(0, 1)
      ->default_str("-");
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

// Edit distance of two short words (Levenshtein).
std::size_t edits(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// `--json` with no value followed by `--` or by another option (`measure --json -- CMD`,
// `measure --json --interval 50 -- CMD`): standard output, as `--json` alone at the end is.
// CLI11 would take the `--` as measure's PATH (a file named "--"), and for the commands whose
// PATH is optional it would end the options' values instead of the options; an option after it
// was refused with CLI11's "argument not expected" message. So "-" is put in between. Only such
// pairs change; a file whose name starts with '-' is given as "./-name".
std::vector<char*> bare_json_to_stdout(int argc, char** argv) {
  static char dash[] = "-";
  std::vector<char*> args(argv, argv + argc);
  for (std::size_t i = 1; i + 1 < args.size(); ++i) {
    const std::string arg = args[i], next = args[i + 1];
    if (arg == "--") break;                                    // the command's own arguments follow
    if (arg == "--json" && next.size() > 1 && next[0] == '-')  // "--", "--interval", "-h"
      args.insert(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, dash);
  }
  return args;
}

// `greentrain trian ...`: the nearest command names (within 2 edits, or a prefix), or empty.
std::string suggest_command(const std::string& word) {
  std::string best;
  std::size_t best_d = 3;
  for (const auto& c : gt::cli::registry()) {
    const std::size_t d = c.name.rfind(word, 0) == 0 ? 1 : edits(word, c.name);
    if (d < best_d) {
      best_d = d;
      best = c.name;
    }
  }
  return best;
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
  // an unknown command: name the nearest one
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    const bool known =
        std::any_of(reg.begin(), reg.end(), [&word](const auto& c) { return c.name == word; });
    if (!known) {
      const std::string near = suggest_command(word);
      std::fprintf(stderr, "greentrain: unknown command '%s'%s; `greentrain --help` lists them\n",
                   word.c_str(), near.empty() ? "" : ("; did you mean '" + near + "'?").c_str());
      return gt::cli::kUsageExit;
    }
  }
  try {
    std::vector<char*> args = bare_json_to_stdout(argc, argv);
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2 (CLI11's own codes are 100+)
    const int rc = app.exit(e);
    return rc == 0 ? 0 : gt::cli::kUsageExit;
  } catch (const gt::UsageError& e) {
    std::fprintf(stderr, "greentrain: error: %s\n", e.what());
    return gt::cli::kUsageExit;
  } catch (const gt::Error& e) {
    std::fprintf(stderr, "greentrain: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "greentrain: error: %s\n", e.what());
    return 1;
  }
  return gt::cli::exit_code();
}
