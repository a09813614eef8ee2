// One op test for every backend (in the manner of ggml's test-backend-ops): the table of op
// cases (op_cases.cpp), one test per row, a row being a case on one backend under one
// precision it supports (Table/OpCases.MatchesTheReference/cpu_bf16_layernorm_forward_odd_...,
// so --gtest_filter=*layernorm_forward_odd* runs one case alone).
//   - Every registered backend but ref runs every case against the reference backend (ref is
//     the definition and is not compared with itself): normalized error within a tolerance per
//     precision, fused forms against ref's unfused chain, guard bytes around every buffer
//     intact; under a 16-bit or 8-bit precision the products' cases must also show the rounding
//     (a backend that ignores set_precision fails there).
//   - ref's rows: its fused forms against its unfused chains, the other cases for guard bytes
//     and outputs left unwritten. Its arithmetic has its own checks: finite differences
//     (backend_checks.cpp) and float64 (tests/engine/test_kernels.cpp).
// backend_checks.cpp holds the checks per backend (finite differences, NaN and infinity). A
// backend is tested by registering it (backend/registry.cpp). `backend_ops_test --perf` times
// every case on every backend instead and prints GFLOP/s or GB/s.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend/forwarding.h"
#include "backend/profiling.h"
#include "core/error.h"
#include "op_cases.h"

namespace gt::test {
namespace {

/// Normalized error allowed per precision: fp32 rounding, and the 16-bit products' operands.
double tolerance(Precision p) {
  switch (p) {
    case Precision::fp32:
      return 2e-5;
    case Precision::fp16:
      return 5e-3;
    case Precision::fp8:
      return 1.2e-1;  // e4m3 keeps 3 mantissa bits: 6 % per operand
    default:
      return 3e-2;
  }
}

/// The least normalized error against the fp32 reference that a product's case shows under a
/// 16-bit or 8-bit precision, whose operands are rounded (a unit normal value moves by about
/// 2^-9 relative in bf16, 2^-12 in fp16). Seen in these cases: at least 1.1e-3 under bf16 (and
/// fp8 on cuda-emu), 1.1e-4 under fp16; fp32 arithmetic at most 5e-7. 0 under fp32.
double rounding_floor(Precision p) {
  switch (p) {
    case Precision::fp32:
      return 0;
    case Precision::fp16:
      return 2e-5;
    default:
      return 1e-4;
  }
}

/// The ops whose operands a 16-bit or 8-bit precision rounds (Backend::set_precision).
bool rounds_operands(const OpCase& c) {
  for (Op op : c.ops)
    if (op == Op::matmul_forward || op == Op::matmul_backward || op == Op::matmul_gelu_forward ||
        op == Op::matmul_backward_gelu)
      return true;
  return false;
}

const std::vector<OpCase>& cases() { return op_cases(); }

/// The reference outputs of case i (ref backend, fp32: the case, or its unfused chain),
/// computed once per process when first asked for.
const Outputs& reference(size_t i) {
  static Backend* ref = make_backend("ref").release();  // never destroyed (see shared_backend())
  static std::map<size_t, Outputs> out;
  auto it = out.find(i);
  if (it == out.end()) {
    Ctx x(*ref, Precision::fp32, false);
    const OpCase& c = cases()[i];
    it = out.emplace(i, c.chain ? c.chain(x) : c.run(x)).first;
  }
  return it->second;
}

/// The failures of case c on `be` under precision p, against ref's outputs r; none when it
/// passes. A thrown error is a failure naming the case (the other rows still run). Without r
/// (ref's own cases, which have no chain to compare with): the guards, and every output
/// written (outputs start as NaN and every input is finite).
std::vector<std::string> check_case(Backend& be, Precision p, const OpCase& c, const Outputs* r) {
  const std::string where = fmt::format("{} on {} under {}", c.name, be.name(), to_string(p));
  std::vector<std::string> fails;
  Ctx x(be, p, false);
  Outputs got;
  try {
    got = c.run(x);
  } catch (const std::exception& e) {
    return {where + ": " + e.what()};
  }
  if (const std::string g = x.broken_guards(); !g.empty())
    fails.push_back(where + ": an op wrote outside its buffer (" + g + ")");
  if (!r) {
    for (size_t k = 0; k < got.values.size(); ++k)
      for (size_t i = 0; i < got.values[k].size(); ++i)
        if (!std::isfinite(got.values[k][i])) {
          fails.push_back(
              fmt::format("{}: output {}[{}] is {}", where, got.names[k], i, got.values[k][i]));
          break;
        }
    return fails;
  }
  if (got.names != r->names) return {where + ": its outputs are not the reference's"};
  double largest = 0;
  for (size_t k = 0; k < got.values.size(); ++k) {
    const double err = normalized_error(got.values[k], r->values[k]);
    largest = std::max(largest, err);
    if (!(err <= tolerance(p)))
      fails.push_back(fmt::format("{}: output {}: normalized error {:.3g} above {:.3g}", where,
                                  got.names[k], err, tolerance(p)));
  }
  if (rounds_operands(c) && largest < rounding_floor(p))
    fails.push_back(fmt::format(
        "{}: every output within {:.3g} of the fp32 reference, below the {:.3g} that {} operands "
        "give: the products were not computed in {} (set_precision ignored?)",
        where, largest, rounding_floor(p), to_string(p), to_string(p)));
  if (std::getenv("GT_OPS_PRINT_ERRORS"))  // for setting rounding_floor: the errors seen
    std::printf("largest error %.3g %s\n", largest, where.c_str());
  return fails;
}

// ---- the table: one test per (backend, precision, case) ------------------------------------
/// One row of the table: case `c` (an index into cases()) on `backend` under `p`. c = npos
/// for a backend that cannot be made here (it skips, saying why).
struct Row {
  std::string backend;
  Precision p = Precision::fp32;
  size_t c = std::string::npos;
};

/// How GoogleTest prints a row: "cpu bf16 layernorm_forward odd ...".
void PrintTo(const Row& r, std::ostream* os) {
  *os << r.backend << " " << to_string(r.p) << " "
      << (r.c == std::string::npos ? std::string("unavailable") : cases()[r.c].name);
}

constexpr Precision kPrecisions[] = {Precision::fp32, Precision::bf16, Precision::fp16,
                                     Precision::fp8};

/// Every row: each registered backend, each precision it supports (its products under that
/// precision), each case whose ops it supports under it.
std::vector<Row> rows() {
  std::vector<Row> v;
  for (auto& e : registered_backends()) {
    const std::string name = e.name;
    Backend* be = shared_backend(name);
    if (!be) {
      v.push_back({name, Precision::fp32, std::string::npos});
      continue;
    }
    for (Precision p : kPrecisions) {
      if (!be->supports(Op::matmul_forward, p)) continue;
      for (size_t i = 0; i < cases().size(); ++i) {
        if (supports_all(*be, cases()[i].ops, p)) v.push_back({name, p, i});
      }
    }
  }
  return v;
}

/// A name of letters, digits and '_' (GoogleTest's rule): "B=2" -> "B2", others -> '_'.
std::string test_name(const std::string& s) {
  std::string n;
  for (char ch : s) {
    if (ch == '=') continue;
    const bool word = std::isalnum(static_cast<unsigned char>(ch));
    if (word)
      n += ch;
    else if (!n.empty() && n.back() != '_')
      n += '_';
  }
  while (!n.empty() && n.back() == '_') n.pop_back();
  return n;
}

class OpCases : public ::testing::TestWithParam<Row> {};

TEST_P(OpCases, MatchesTheReference) {
  const Row& r = GetParam();
  std::string why;
  Backend* be = shared_backend(r.backend, &why);
  if (!be) GTEST_SKIP() << why;
  be->set_precision(r.p);
  const OpCase& c = cases()[r.c];
  // ref is the definition: its fused forms against its unfused chains, the rest checked for
  // guards and unwritten outputs (against itself they could not fail)
  const bool self = r.backend == "ref" && !c.chain;
  for (const std::string& f : check_case(*be, r.p, c, self ? nullptr : &reference(r.c)))
    ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Table, OpCases, ::testing::ValuesIn(rows()), [](const auto& info) {
  const Row& r = info.param;
  const std::string what =
      r.c == std::string::npos ? std::string("unavailable") : cases()[r.c].name;
  return test_name(r.backend + " " + to_string(r.p) + " " + what);
});

// ---- what the table covers -----------------------------------------------------------------
TEST(OpTable, EveryOpOfTheListHasACase) {
  std::set<Op> covered;
  for (const OpCase& c : cases()) covered.insert(c.ops.begin(), c.ops.end());
  for (Op op : all_ops())
    EXPECT_TRUE(covered.count(op)) << op_name(op) << " is in no case of op_cases.cpp";
}

TEST(OpTable, CaseNamesAreUniqueTestNames) {
  std::set<std::string> seen;
  for (const OpCase& c : cases())
    EXPECT_TRUE(seen.insert(test_name(c.name)).second) << "two cases named " << test_name(c.name);
}

/// A backend with one op: the others are Backend's default bodies, and supports() says so.
class OnlyScale final : public HostMemoryBackend {
 public:
  std::string name() const override { return "only-scale"; }
  bool supports(Op op, Precision p) const override {
    return op == Op::scale && p == Precision::fp32;
  }
  size_t workspace_bytes(const WorkspaceQuery&) const override { return 0; }
  void scale(DevPtr g, float s, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) g.f32()[i] *= s;
  }
  void set_precision(Precision) override {}
  Precision precision() const override { return Precision::fp32; }
  void set_stochastic_rounding(bool, uint64_t) override {}
  void weights_updated() override {}
};

// A new backend overrides the ops it has and says which through supports(): an op it lacks is
// an error naming the backend and the op, and a model refuses the backend before its first step.
TEST(OpTable, ABackendImplementsOnlyItsOpsAndSaysWhichThroughSupports) {
  OnlyScale be;
  float x[2] = {1.0f, 2.0f};
  be.scale(x, 3.0f, 2);
  EXPECT_EQ(x[1], 6.0f);
  try {
    be.residual_forward(x, x, x, 2);
    FAIL() << "an op the backend does not have ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only-scale: op residual_forward is not implemented"),
              std::string::npos)
        << e.what();
  }
  try {
    check_supports(be, {Op::scale, Op::layernorm_forward}, Precision::fp32);
    FAIL() << "check_supports took a backend without layernorm_forward";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no layernorm_forward under precision fp32"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(check_supports(be, {Op::scale}, Precision::fp32));
}

/// A backend that drops set_precision (a test double around another backend): it reports the
/// precision it was given and computes in fp32.
class IgnoresPrecision final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  std::string name() const override { return inner().name() + " without set_precision"; }
  void set_precision(Precision p) override { p_ = p; }
  Precision precision() const override { return p_; }

 private:
  Precision p_ = Precision::fp32;
};

// The bf16 row's products must show bf16: a backend that ignores set_precision(bf16) fails
// every product case there, while the backend it wraps passes them.
TEST(OpTable, ABackendThatIgnoresSetPrecisionFailsTheBf16Row) {
  std::string name;
  for (const char* n : {"cpu", "cuda-emu"})
    for (auto& e : registered_backends())
      if (name.empty() && e.name == std::string(n)) name = n;
  if (name.empty()) GTEST_SKIP() << "no backend with bf16 in this build";
  IgnoresPrecision fake(make_backend(name));
  Backend& real = *shared_backend(name);
  fake.set_precision(Precision::bf16);
  real.set_precision(Precision::bf16);
  int products = 0, fake_failed = 0;
  for (size_t i = 0; i < cases().size(); ++i) {
    const OpCase& c = cases()[i];
    if (!rounds_operands(c) || c.name.find(" odd") == std::string::npos) continue;
    ++products;
    fake_failed += !check_case(fake, Precision::bf16, c, &reference(i)).empty();
    for (const std::string& f : check_case(real, Precision::bf16, c, &reference(i)))
      ADD_FAILURE() << f;
  }
  EXPECT_GE(products, 6);
  EXPECT_EQ(fake_failed, products)
      << "product cases that " << name << " without set_precision passed under bf16";
}

// GT_PROFILE=shapes: each product and attention op one row per shape (calls, FLOPs), the
// other ops by name; without it, one row per op.
TEST(Profiling, ByShapeGivesEachProductAndAttentionShapeItsOwnRow) {
  bool cpu = false;
  for (auto& e : registered_backends()) cpu = cpu || e.name == std::string("cpu");
  if (!cpu) GTEST_SKIP() << "no cpu backend in this build";
  for (bool by_shape : {false, true}) {
    SCOPED_TRACE(by_shape ? "by shape" : "by op");
    auto be = make_profiling_backend(make_backend("cpu"), by_shape);
    std::vector<float> x(8 * 32, 0.5f), w(64 * 32, 0.25f), y(8 * 64), qkv(2 * 4 * 96, 0.1f),
        att(2 * 2 * 4 * 4), o(2 * 4 * 32);
    be->matmul_forward(y.data(), x.data(), w.data(), nullptr, 4, 32, 64, false);
    be->matmul_forward(y.data(), x.data(), w.data(), nullptr, 4, 32, 64, false);
    be->matmul_forward(y.data(), x.data(), w.data(), nullptr, 8, 32, 16, false);
    be->attention_forward(o.data(), att.data(), qkv.data(), 2, 4, 32, 2);
    be->residual_forward(o.data(), o.data(), o.data(), 8);
    const auto& st = *profiling_stats(*be);
    EXPECT_EQ(st.at("residual_forward").calls, 1);
    if (!by_shape) {
      EXPECT_EQ(st.size(), 3u);
      EXPECT_EQ(st.at("matmul_forward").calls, 3);
      EXPECT_DOUBLE_EQ(st.at("matmul_forward").flops, 2.0 * (2 * 4 * 32 * 64 + 8 * 32 * 16));
      EXPECT_EQ(st.at("attention_forward").calls, 1);
      continue;
    }
    EXPECT_EQ(st.size(), 4u);
    EXPECT_EQ(st.at("matmul_forward[4x32->64]").calls, 2);
    EXPECT_DOUBLE_EQ(st.at("matmul_forward[4x32->64]").flops, 2.0 * 2 * 4 * 32 * 64);
    EXPECT_EQ(st.at("matmul_forward[8x32->16]").calls, 1);
    EXPECT_EQ(st.at("attention_forward[B2,T4,C32,H2]").calls, 1);
  }
}

// The table's op column is as wide as its longest row (a shape's row can pass 32 characters):
// every row's calls end in the same column as the header's.
TEST(Profiling, TheOpColumnFitsTheLongestRow) {
  const std::map<std::string, OpStats> st = {
      {"attention_backward_fused[B128,T1024,C768,H12]", {3, 1.5, 0}},
      {"adamw_step", {12345, 0.25, 0}}};
  char buf[4096] = {};
  FILE* f = fmemopen(buf, sizeof buf - 1, "w");
  ASSERT_NE(f, nullptr);
  print_profile(st, f);
  std::fclose(f);
  std::vector<std::string> lines;
  for (const char* p = buf; *p;) {
    const char* e = std::strchr(p, '\n');
    lines.emplace_back(p, e ? e - p : std::strlen(p));
    p = e ? e + 1 : p + lines.back().size();
  }
  size_t header = lines.size();
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].rfind("op ", 0) == 0) header = i;
  ASSERT_LT(header + 2, lines.size()) << buf;
  const size_t end = lines[header].find("calls") + 5;
  EXPECT_EQ(lines[header + 1].rfind(" 3 ", end), end - 2) << buf;      // the longest row
  EXPECT_EQ(lines[header + 2].rfind(" 12345 ", end), end - 6) << buf;  // the other
}

/// --perf: every case on every backend and precision, one line each.
int run_timing() {
  std::printf("%-8s %-5s %10s %10s  %s\n", "backend", "prec", "us/call", "rate", "case");
  for (auto& e : registered_backends()) {
    std::string why;
    Backend* be = shared_backend(e.name, &why);
    if (!be) {
      std::printf("%-8s %s\n", e.name, why.c_str());
      continue;
    }
    for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) {
      if (!be->supports(Op::matmul_forward, p)) continue;
      be->set_precision(p);
      for (const OpCase& c : cases()) {
        if (!supports_all(*be, c.ops, p)) continue;
        Ctx x(*be, p, true);
        c.run(x);
        const double s = x.timed_seconds();
        const std::string rate = c.flops > 0 ? fmt::format("{:.1f} GFLOP/s", c.flops / s / 1e9)
                                             : fmt::format("{:.1f} GB/s", c.bytes / s / 1e9);
        std::printf("%-8s %-5s %10.1f %14s  %s\n", e.name, to_string(p).c_str(), s * 1e6,
                    rate.c_str(), c.name.c_str());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace gt::test

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--perf") return gt::test::run_timing();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
