// tests/core/parse_test.cpp: the checked number parser (core/parse.h).
#include "core/parse.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace gt {

TEST(Parse, WholeTextWithSpacesAround) {
  EXPECT_EQ(parse_number<unsigned long long>("123456\n", "f"), 123456ULL);
  EXPECT_EQ(parse_number<int>(" -7 ", "f"), -7);
  EXPECT_EQ(parse_number<int>("+7", "f"), 7);
  EXPECT_DOUBLE_EQ(parse_number<double>("1e-7", "f"), 1e-7);
  EXPECT_DOUBLE_EQ(parse_number<double>("+2.5", "f"), 2.5);
}

TEST(Parse, ErrorNamesSourceValueAndExpectation) {
  std::string err;
  EXPECT_FALSE(try_parse_number<unsigned>("99999999999999999999", "CUDA_VISIBLE_DEVICES entry",
                                          "a GPU index", &err));
  EXPECT_EQ(err,
            "CUDA_VISIBLE_DEVICES entry: '99999999999999999999' is out of range (at most "
            "4294967295); expected a GPU index");
  EXPECT_FALSE(try_parse_number<double>("12abc", "trace.csv:3: power_w", {}, &err));
  EXPECT_EQ(err,
            "trace.csv:3: power_w: '12abc' is not a number (it goes on with 'abc'); "
            "expected a finite number");
  EXPECT_FALSE(try_parse_number<int>("", "k", {}, &err));
  EXPECT_NE(err.find("'' is empty; expected an integer in [-2147483648, 2147483647]"),
            std::string::npos)
      << err;
}

TEST(Parse, RefusesWhatOtherParsersTakeSilently) {
  for (const char* bad : {"nan", "inf", "0x10", "1e999", "--1", "+-1", "1 2", "3.5."})
    EXPECT_FALSE(try_parse_number<double>(bad, "x")) << bad;
  for (const char* bad : {"-1", "1.5", "1e3", "0x10", "18446744073709551616", "+"})
    EXPECT_FALSE(try_parse_number<unsigned long long>(bad, "x")) << bad;
  EXPECT_FALSE(try_parse_number<int>("2147483648", "x"));
  EXPECT_THROW(parse_number<long>("abc", "x"), Error);
}

}  // namespace gt
