// A row read back from a hand-written run folder (ablate/runner.h): tokens/s is the median of
// the steps that start no segment, energy the logged intervals that hold none of them.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "ablate/runner.h"
#include "core/error.h"
#include "test_helpers.h"

namespace gt::ablate {
namespace {

TEST(AblateReadRow, LeavesOutTheSegmentStartsAndTheirEnergyIntervals) {
  test::TempDir d;
  test::write_file(d.file("summary.json"),
                   R"({"last_loss": 2.5, "val_loss": 2.75, "energy_estimated": false,
                       "memory_peak_rss_bytes": 1100, "memory_planned_bytes": 900,
                       "memory_runtime_bytes": 100, "energy_j": 99, "tokens": 999})");
  // steps 1..6, segments starting at 1 and 4; energy logged every second step
  test::write_file(d.file("metrics.jsonl"),
                   "{\"step\": 1, \"tokens_per_s\": 1}\n"
                   "{\"step\": 2, \"tokens_per_s\": 100, \"energy_j\": 50, "
                   "\"energy_interval_tokens\": 10}\n"
                   "{\"step\": 3, \"tokens_per_s\": 300}\n"
                   "not json: a line cut by a crash\n"
                   "{\"step\": 4, \"tokens_per_s\": 2, \"energy_j\": 20, "
                   "\"energy_interval_tokens\": 10}\n"
                   "{\"step\": 5, \"tokens_per_s\": 200}\n"
                   "{\"step\": 6, \"tokens_per_s\": 400, \"energy_j\": 5, "
                   "\"energy_interval_tokens\": 10}\n");
  const Measured m = read_row(d.path, {1, 4});
  EXPECT_DOUBLE_EQ(m.tokens_per_s, 250);  // median of 100, 300, 200, 400
  // only the interval (4, 6] holds no start: 5 J over 10 tokens
  ASSERT_TRUE(m.joules_per_token);
  EXPECT_DOUBLE_EQ(*m.joules_per_token, 0.5);
  EXPECT_DOUBLE_EQ(*m.tokens_per_joule, 2);
  EXPECT_EQ(m.energy, "measured");
  EXPECT_EQ(m.energy_basis, "training intervals");
  EXPECT_EQ(m.peak_rss_bytes, 1100u);
  EXPECT_EQ(m.planned_bytes, 1000u);
  EXPECT_DOUBLE_EQ(m.loss, 2.5);
  EXPECT_DOUBLE_EQ(m.val_loss, 2.75);
}

TEST(AblateReadRow, UnknownIntervalsFallBackToTheWholeRunAndSaySo) {
  test::TempDir d;
  test::write_file(d.file("summary.json"), R"({"energy_j": 40, "tokens": 20})");
  test::write_file(d.file("metrics.jsonl"),
                   "{\"step\": 2, \"tokens_per_s\": 10, \"energy_j\": null, "
                   "\"energy_interval_tokens\": 10}\n");
  const Measured m = read_row(d.path, {1});
  ASSERT_TRUE(m.joules_per_token);
  EXPECT_DOUBLE_EQ(*m.joules_per_token, 2);
  EXPECT_EQ(m.energy, "estimated");  // energy_estimated missing: taken as estimated
  EXPECT_NE(m.energy_basis.find("whole run"), std::string::npos) << m.energy_basis;
}

// A row resumed over rounds logs intervals from every session; its energy was marked measured
// when only the last session's was (energy_estimated false) though an earlier one's was an
// estimate. run_totals.energy_estimated covers them all, as schedule and report read it; a
// run_totals written before that key falls back to the session's flag.
TEST(AblateReadRow, AnEarlierSessionsEstimateMakesTheRowEstimated) {
  const std::string metrics =
      "{\"step\": 2, \"tokens_per_s\": 10, \"energy_j\": 30, \"energy_interval_tokens\": 10}\n"
      "{\"step\": 4, \"tokens_per_s\": 10, \"energy_j\": 20, \"energy_interval_tokens\": 10}\n";
  struct Case {
    const char* summary;
    const char* energy;
  } cases[] = {
      {R"({"energy_estimated": false, "run_totals": {"sessions": 2, "energy_estimated": true}})",
       "estimated"},
      {R"({"energy_estimated": false, "run_totals": {"sessions": 2, "energy_estimated": false}})",
       "measured"},
      // written before run_totals.energy_estimated: the last session's flag
      {R"({"energy_estimated": false, "run_totals": {"sessions": 2}})", "measured"},
      {R"({"energy_estimated": true, "run_totals": {"sessions": 2}})", "estimated"},
      {R"({"energy_estimated": false})", "measured"},
  };
  for (const auto& c : cases) {
    test::TempDir d;
    test::write_file(d.file("summary.json"), c.summary);
    test::write_file(d.file("metrics.jsonl"), metrics);
    const Measured m = read_row(d.path, {1, 3});
    EXPECT_EQ(m.energy, c.energy) << c.summary;
    EXPECT_EQ(m.energy_basis, "training intervals") << c.summary;
  }
  // the intervals' energy unknown: the figure is the last session's (summary.json's energy_j),
  // and so is the flag
  test::TempDir d;
  test::write_file(d.file("summary.json"),
                   R"({"energy_j": 40, "tokens": 20, "energy_estimated": false,
                       "run_totals": {"sessions": 2, "energy_estimated": true}})");
  test::write_file(d.file("metrics.jsonl"),
                   "{\"step\": 2, \"tokens_per_s\": 10, \"energy_j\": null, "
                   "\"energy_interval_tokens\": 10}\n");
  const Measured m = read_row(d.path, {1});
  EXPECT_EQ(m.energy, "measured");
  EXPECT_NE(m.energy_basis.find("whole run"), std::string::npos) << m.energy_basis;
}

TEST(AblateReadRow, NoEnergyAnywhereIsUnknownWithTheSummarysReason) {
  test::TempDir d;
  test::write_file(d.file("summary.json"),
                   R"({"energy_j": null, "energy_unknown_reason": "no sensor here"})");
  test::write_file(d.file("metrics.jsonl"), "{\"step\": 2, \"tokens_per_s\": 10}\n");
  const Measured m = read_row(d.path, {1});
  EXPECT_FALSE(m.joules_per_token);
  EXPECT_FALSE(m.tokens_per_joule);
  EXPECT_EQ(m.energy, "unknown");
  EXPECT_EQ(m.energy_unknown_reason, "no sensor here");
}

// summary.json's "products": the reason the row's products ran emulated, empty where they ran
// natively or the summary (an older one) does not say.
TEST(AblateReadRow, EmulatedProductsCarryTheSummarysReason) {
  struct Case {
    std::string products;
    std::optional<bool> emulated;
    std::string reason;
  };
  for (const Case& c : std::vector<Case>{
           {R"(, "products": {"emulated": true, "emulated_reason": "no bf16 here"})", true,
            "no bf16 here"},
           {R"(, "products": {"emulated": true})", true, "summary.json gives no reason"},
           {R"(, "products": {"emulated": false, "kernel": "own AMX"})", false, ""},
           {"", std::nullopt, ""}}) {
    SCOPED_TRACE(c.products);
    test::TempDir d;
    test::write_file(d.file("summary.json"), R"({"energy_j": 40, "tokens": 20)" + c.products + "}");
    test::write_file(d.file("metrics.jsonl"), "{\"step\": 2, \"tokens_per_s\": 10}\n");
    const Measured m = read_row(d.path, {1});
    EXPECT_EQ(m.products_emulated, c.emulated);
    EXPECT_EQ(m.products_emulated_reason, c.reason);
  }
}

TEST(AblateReadRow, TheLastLoggedStepIsMinusOneWithoutALine) {
  test::TempDir d;
  EXPECT_EQ(last_logged_step(d.file("metrics.jsonl")), -1);
  test::write_file(d.file("metrics.jsonl"), "{\"step\": 3}\n{\"step\": 7}\n");
  EXPECT_EQ(last_logged_step(d.file("metrics.jsonl")), 7);
  test::write_file(d.file("metrics.jsonl"), "{\"step\": 3}\n{\"st");
  EXPECT_EQ(last_logged_step(d.file("metrics.jsonl")), -1);
}

// A row's summary.json with a key of another type than train writes (read through run/summary.h):
// gt::Error naming the file and the key; json.value threw nlohmann's type_error here before.
TEST(AblateReadRow, ASummaryKeyOfAnotherTypeIsRefusedNamingIt) {
  test::TempDir d;
  test::write_file(d.file("metrics.jsonl"), "{\"step\": 2, \"tokens_per_s\": 10}\n");
  test::write_file(d.file("summary.json"), R"({"last_loss": "low", "val_loss": null})");
  try {
    (void)read_row(d.path, {1});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("summary.json"), std::string::npos) << what;
    EXPECT_NE(what.find("last_loss is string; expected a number or null"), std::string::npos)
        << what;
  }
  // a metrics line whose step is not a number is not the last logged step
  test::write_file(d.file("metrics.jsonl"), "{\"step\": 3}\n{\"step\": \"x\"}\n");
  EXPECT_EQ(last_logged_step(d.file("metrics.jsonl")), -1);
}

}  // namespace
}  // namespace gt::ablate
