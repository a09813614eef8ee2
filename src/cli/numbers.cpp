// cli/numbers.cpp: see check_numbers in command.h.
#include <string>

#include "cli/command.h"
#include "core/parse.h"

namespace gt::cli {

void check_numbers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_name() != "FLOAT") continue;
    const std::string name = opt->get_name();
    // CLI11 converts "nan", "inf" and "1e999" to a double without a word; the one checked
    // parser refuses them, naming the option, the value and what was expected.
    opt->check(CLI::Validator(
        [name](std::string& text) {
          std::string err;
          if (try_parse_number<double>(text, name, "a finite number", &err)) return err;
          return err.substr(name.size() + 2);  // CLI11 puts "<name>: " in front itself
        },
        "", "finite number"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_numbers(*sub);
}

}  // namespace gt::cli
