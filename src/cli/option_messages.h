// cli/option_messages.h: the words of the commands' messages about options given without the
// one they act beside (`schedule --dry-run` without --submit, `tune --sim-devices` without
// --simulate): such options would be ignored, so the commands refuse them as usage errors.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace gt::cli {

/// The names joined as a sentence does: "--a", "--a and --b", "--a, --b and --c"; "" for none.
std::string and_list(const std::vector<std::string>& names);

/// The message for `options` (as given: "--dry-run", "--seeds 3"; at least one), which act only
/// beside `target` and were given without it: "--dry-run and --cluster-tz apply to --submit only
/// (WHY); expected --submit slurm with them". `why`, unless empty, goes in parentheses; `expected`
/// is what to add ("--submit slurm", often `target` itself). The caller throws it (as
/// gt::UsageError: exit 2).
std::string only_with_message(const std::vector<std::string>& options, std::string_view target,
                              std::string_view why, std::string_view expected);

}  // namespace gt::cli
