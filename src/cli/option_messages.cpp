// cli/option_messages.cpp: see option_messages.h.
#include "cli/option_messages.h"

#include <fmt/format.h>

namespace gt::cli {

std::string and_list(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return s;
}

std::string only_with_message(const std::vector<std::string>& options, std::string_view target,
                              std::string_view why, std::string_view expected) {
  const bool several = options.size() > 1;
  return fmt::format(
      "{} {} to {} only{}; expected {} with {}", and_list(options), several ? "apply" : "applies",
      target, why.empty() ? "" : fmt::format(" ({})", why), expected, several ? "them" : "it");
}

}  // namespace gt::cli
