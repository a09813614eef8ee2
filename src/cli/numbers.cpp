// cli/numbers.cpp: see check_numbers, int_range, number_range and one_of in command.h.
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "cli/command.h"
#include "core/parse.h"

namespace gt::cli {

namespace {
// "OPTION: " is put in front by CLI11 itself; try_parse_number's message starts with the source
std::string without_source(const std::string& err, const std::string& source) {
  return err.substr(source.size() + 2);
}
}  // namespace

CLI::Validator int_range(long long lo, long long hi, const std::string& expected) {
  const std::string want = expected.empty() ? fmt::format("{} to {}", lo, hi) : expected;
  return CLI::Validator(
      [lo, hi, want](std::string& text) {
        std::string err;
        const auto v = try_parse_number<long long>(text, "value", want, &err);
        if (!v) return without_source(err, "value");
        if (*v < lo || *v > hi) return fmt::format("'{}' is out of range; expected {}", *v, want);
        return std::string();
      },
      "", "range");
}

CLI::Validator number_range(double lo, double hi, const std::string& expected) {
  const std::string want = !expected.empty() ? expected
                           : std::isinf(hi)  ? fmt::format("{} or more", lo)
                                             : fmt::format("{} to {}", lo, hi);
  return CLI::Validator(
      [lo, hi, want](std::string& text) {
        std::string err;
        const auto v = try_parse_number<double>(text, "value", want, &err);
        if (!v) return without_source(err, "value");
        if (*v < lo || *v > hi) return fmt::format("'{}' is out of range; expected {}", *v, want);
        return std::string();
      },
      "", "range");
}

CLI::Validator one_of(const std::vector<std::string>& choices) {
  std::string want;  // "auto, nvml or rapl"
  for (std::size_t i = 0; i < choices.size(); ++i)
    want += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  return CLI::Validator(
      [choices, want](std::string& text) {
        for (const auto& c : choices)
          if (text == c) return std::string();
        return fmt::format("'{}' is not known; expected {}", text, want);
      },
      "", "choice");
}

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
          return without_source(err, name);
        },
        "", "finite number"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_numbers(*sub);
}

}  // namespace gt::cli
