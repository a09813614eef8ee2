// The ablation table (ablate/table.h): its factors against hand-computed values, and its CSV,
// JSON and text forms agreeing with each other on the same rows.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "ablate/table.h"
#include "test_helpers.h"

namespace gt::ablate {
namespace {

// A measured row with tokens/s and tokens/J (empty: unknown energy).
Measured row(double tokens_per_s, std::optional<double> tokens_per_joule) {
  Measured m;
  m.tokens_per_s = tokens_per_s;
  m.loss = 2.5;
  m.val_loss = 2.75;
  m.energy_basis = "training intervals";
  m.peak_rss_bytes = 1100;
  m.planned_bytes = 1000;
  if (tokens_per_joule) {
    m.tokens_per_joule = *tokens_per_joule;
    m.joules_per_token = 1 / *tokens_per_joule;
    m.energy = "measured";
    m.estimated = false;
  } else {
    m.energy_unknown_reason = "no sensor counted";
  }
  return m;
}

// A plan of baseline, +bf16, +fusion, and a table of three rows measured as given.
Table table_of(std::vector<Measured> measured) {
  Options opt;
  opt.config = "c.toml";
  opt.steps = 10;
  Plan plan;
  plan.order = {"bf16", "fusion"};
  plan.budget_bytes = 4096;
  plan.rows.resize(3);
  plan.rows[0].name = "baseline";
  plan.rows[1].name = "+bf16";
  plan.rows[1].precision = "bf16";
  plan.rows[2].name = "+fusion";
  plan.rows[2].precision = "bf16";
  plan.rows[2].fusion = "on";
  for (auto& r : plan.rows) r.batch = 4;
  return make_table(opt, plan, measured, false);
}

// ablation.csv's lines as column name -> cell, one map per row.
std::vector<std::map<std::string, std::string>> parse_csv(const std::string& csv) {
  std::stringstream in(csv);
  std::string line, cell;
  std::vector<std::string> header;
  std::getline(in, line);
  std::stringstream h(line);
  while (std::getline(h, cell, ',')) header.push_back(cell);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    std::stringstream l(line);
    std::map<std::string, std::string> r;
    for (size_t i = 0; i < header.size(); ++i) {
      cell.clear();
      std::getline(l, cell, ',');
      r[header[i]] = cell;
    }
    rows.push_back(r);
  }
  return rows;
}

TEST(AblateTable, MedianOfOddAndEvenCountsAndOfNothing) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({}), 0);
}

TEST(AblateTable, ClaimedFactorsAreTheNamedConstants) {
  EXPECT_EQ(claimed_factor("bf16"), kClaimedBf16);
  EXPECT_EQ(claimed_factor("fusion"), 1.2);
  EXPECT_EQ(claimed_factor("recompute"), 1.5);
  EXPECT_EQ(claimed_factor("power_limit"), 1.12);
  EXPECT_EQ(claimed_factor("fp8"), 1.3);
  EXPECT_EQ(claimed_factor(""), 1.0);
}

TEST(AblateTable, FactorsAgainstThePreviousRowAndTheBaselineAreTheHandComputedOnes) {
  const Table t = table_of({row(100, 1.0), row(150, 2.0), row(300, 3.0)});
  ASSERT_EQ(t.rows.size(), 4u);  // and the power-limit row
  const double spd_prev[] = {1, 1.5, 2}, spd_base[] = {1, 1.5, 3};
  const double f_prev[] = {1, 2, 1.5}, f_base[] = {1, 2, 3};
  const double claimed[] = {1, 2.0, 1.2}, cumulative[] = {1, 2.0, 2.4};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_DOUBLE_EQ(t.rows[i].speedup_vs_prev, spd_prev[i]);
    EXPECT_DOUBLE_EQ(t.rows[i].speedup_vs_baseline, spd_base[i]);
    EXPECT_DOUBLE_EQ(*t.rows[i].factor_vs_prev, f_prev[i]);
    EXPECT_DOUBLE_EQ(*t.rows[i].factor_vs_baseline, f_base[i]);
    EXPECT_DOUBLE_EQ(t.rows[i].claimed, claimed[i]);
    EXPECT_DOUBLE_EQ(t.rows[i].claimed_cumulative, cumulative[i]);
  }
  EXPECT_FALSE(t.rows[3].measured);
  EXPECT_DOUBLE_EQ(t.rows[3].claimed, 1.12);
  EXPECT_DOUBLE_EQ(t.claimed_combined, 2.4 * 1.12);
  EXPECT_DOUBLE_EQ(t.combined_speedup, 3);
  EXPECT_DOUBLE_EQ(*t.combined_factor, 3);
}

TEST(AblateTable, CsvJsonAndTextGiveTheSameFiguresForEveryRow) {
  const Table t = table_of({row(100, 1.0), row(150, std::nullopt), row(300, 4.0)});
  const auto csv = parse_csv(t.csv());
  const auto js = t.json();
  ASSERT_EQ(csv.size(), t.rows.size());
  ASSERT_EQ(js["rows"].size(), t.rows.size());
  for (size_t i = 0; i < t.rows.size(); ++i) {
    SCOPED_TRACE(i);
    const auto& c = csv[i];
    const auto& j = js["rows"][i];
    EXPECT_EQ(c.at("row"), j["row"]);
    EXPECT_EQ(std::stod(c.at("claimed_factor")), j["claimed_factor"].get<double>());
    EXPECT_NEAR(std::stod(c.at("claimed_cumulative")), j["claimed_cumulative"].get<double>(), 1e-3);
    if (!t.rows[i].measured) {
      EXPECT_EQ(c.at("energy"), "not measured");
      EXPECT_EQ(j["measured"], false);
      continue;
    }
    EXPECT_EQ(c.at("precision"), j["precision"]);
    EXPECT_EQ(c.at("fusion"), j["fusion"]);
    EXPECT_EQ(std::stoi(c.at("micro_batch")), j["micro_batch"].get<int>());
    EXPECT_EQ(c.at("energy"), j["energy"]);
    EXPECT_NEAR(std::stod(c.at("tokens_per_s")), j["tokens_per_s"].get<double>(), 0.05);
    EXPECT_NEAR(std::stod(c.at("speedup_vs_baseline")), j["speedup_vs_baseline"].get<double>(),
                1e-4);
    for (const char* k :
         {"tokens_per_joule", "joules_per_token", "factor_vs_prev", "factor_vs_baseline"}) {
      SCOPED_TRACE(k);
      // unknown: an empty cell and null, never 0
      if (j[k].is_null()) {
        EXPECT_EQ(c.at(k), "");
      } else {
        ASSERT_NE(c.at(k), "");
        EXPECT_NEAR(std::stod(c.at(k)), j[k].get<double>(), 1e-4 * std::abs(j[k].get<double>()));
      }
    }
  }
  // the row of unknown energy: unknown in all three forms, and so is the combined factor
  EXPECT_TRUE(js["rows"][1]["tokens_per_joule"].is_null());
  EXPECT_TRUE(js["rows"][2]["factor_vs_prev"].is_null());
  EXPECT_TRUE(js["combined_factor"].is_null());
  const std::string text = t.text();
  EXPECT_NE(text.find("energy unknown for row +bf16: no sensor counted"), std::string::npos)
      << text;
  std::stringstream lines(text);
  std::string line;
  int unknown_lines = 0;
  while (std::getline(lines, line))
    if (line.rfind("+bf16 ", 0) == 0) unknown_lines += line.find("unknown") != std::string::npos;
  EXPECT_EQ(unknown_lines, 1) << text;
}

// A row whose products ran emulated (summary.json's "products"): said once, after the table, with
// the reason, and in its JSON row; a row that ran natively says false, one whose summary does not
// say, null.
TEST(AblateTable, ARowWithEmulatedProductsSaysSoAndWhy) {
  Measured emulated = row(150, 2.0), native = row(300, 4.0);
  emulated.products_emulated = true;
  emulated.products_emulated_reason = "oneDNN has no bf16 product on this CPU (avx2)";
  native.products_emulated = false;
  const Table t = table_of({row(100, 1.0), emulated, native});
  const std::string text = t.text();
  EXPECT_NE(text.find("row +bf16: its matrix products ran EMULATED (oneDNN has no bf16 product "
                      "on this CPU (avx2))"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("EMULATED"), text.rfind("EMULATED")) << "once:\n" << text;
  const auto js = t.json();
  EXPECT_TRUE(js["rows"][0]["products_emulated"].is_null()) << "not said: unknown, not native";
  EXPECT_FALSE(js["rows"][0].contains("products_emulated_reason"));
  EXPECT_EQ(js["rows"][2]["products_emulated"], false);
  EXPECT_FALSE(js["rows"][2].contains("products_emulated_reason"));
  EXPECT_EQ(js["rows"][1]["products_emulated"], true);
  EXPECT_EQ(js["rows"][1]["products_emulated_reason"], emulated.products_emulated_reason);
}

TEST(AblateTable, WritesTheCsvAndJsonItGivesIntoTheFolder) {
  test::TempDir d;
  const Table t = table_of({row(100, 1.0), row(150, 2.0), row(300, 3.0)});
  write_table(t, d.path.string());
  std::ifstream cf(d.file("ablation.csv")), jf(d.file("ablation.json"));
  std::stringstream csv;
  csv << cf.rdbuf();
  EXPECT_EQ(csv.str(), t.csv());
  EXPECT_EQ(nlohmann::ordered_json::parse(jf), t.json());
  EXPECT_THROW(write_table(t, d.file("missing/folder")), std::exception);
}

TEST(AblateTable, ThePowerLimitProbeLooksUnderGtPowercapRoot) {
  test::TempDir d;
  const char* old = std::getenv("GT_POWERCAP_ROOT");
  const std::string saved = old ? old : "";
  ::setenv("GT_POWERCAP_ROOT", d.path.c_str(), 1);
  EXPECT_FALSE(power_limit_writable());
  std::filesystem::create_directories(d.path / "intel-rapl:0");
  test::write_file(d.file("intel-rapl:0/constraint_0_power_limit_uw"), "1000000\n");
  EXPECT_TRUE(power_limit_writable());
  EXPECT_FALSE(power_limit_writable(d.file("elsewhere")));  // an explicit root comes first
  if (old)
    ::setenv("GT_POWERCAP_ROOT", saved.c_str(), 1);
  else
    ::unsetenv("GT_POWERCAP_ROOT");
}

}  // namespace
}  // namespace gt::ablate
