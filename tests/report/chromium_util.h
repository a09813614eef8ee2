// Opening a report in headless Chromium for the report tests: the page's self-check
// (#gt-selfcheck, written by src/report/report.js) and a kept screenshot.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "test_helpers.h"

namespace gt::test {

inline std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string chromium() {
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (fs::exists(c)) return c;
  return "";
}

struct PageCheck {
  nlohmann::json self;  // what report.js recorded: charts, skipped, errors
  std::string dom;
};

// Opens `html` in headless Chromium, keeps a screenshot as GT_TEST_OUTPUT/<shot>.png and
// returns the page's self-check.
inline PageCheck open_in_chromium(const std::string& html, const std::string& shot) {
  fs::create_directories(GT_TEST_OUTPUT);
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run "
      "--hide-scrollbars --virtual-time-budget=5000 --user-data-dir=" +
      (fs::path(html).parent_path() / "chromium-profile").string() + " ";
  const std::string url = "file://" + fs::absolute(html).string();
  auto dom = run_cmd(chromium() + flags + "--dump-dom " + url + " 2>/dev/null");
  PageCheck pc;
  pc.dom = dom.output;
  std::smatch m;
  const std::regex re(R"(<pre id="gt-selfcheck" hidden="">([^<]*)</pre>)");
  if (std::regex_search(pc.dom, m, re)) {
    std::string text = m[1].str();
    for (auto [from, to] : {std::pair<std::string, std::string>{"&quot;", "\""},
                            {"&lt;", "<"},
                            {"&gt;", ">"},
                            {"&amp;", "&"}})
      for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size())
        text.replace(at, from.size(), to);
    pc.self = nlohmann::json::parse(text, nullptr, false);
  }
  const std::string png = std::string(GT_TEST_OUTPUT) + "/" + shot + ".png";
  fs::remove(png);
  run_cmd(chromium() + flags + "--window-size=1300,2600 --screenshot=" + png + " " + url +
          " >/dev/null 2>&1");
  EXPECT_TRUE(fs::exists(png) && fs::file_size(png) > 10000) << "no screenshot " << png;
  return pc;
}

}  // namespace gt::test
