// tests/core/name_table_test.cpp: the one name table of an enum (core/name_table.h): parsing,
// printing and the error's list of names come from it.
#include "core/name_table.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace gt {
namespace {

enum class Colour { red, green, blue, unnamed };
constexpr NameTable<Colour, 3> kColours{
    {{Colour::red, "red"}, {Colour::green, "green"}, {Colour::blue, "blue"}}};

TEST(NameTable, ParsingAndPrintingComeFromTheOneTable) {
  for (const auto& [c, name] : kColours) {
    EXPECT_EQ(name_of(kColours, c), name);
    EXPECT_EQ(parse_name(kColours, name, "colour"), c);
  }
  EXPECT_EQ(name_of(kColours, Colour::unnamed), "?");
  static_assert(name_of(kColours, Colour::blue) == "blue");  // usable at compile time
}

TEST(NameTable, AnUnknownNameIsRefusedWithEveryNameListed) {
  EXPECT_EQ(names_list(kColours), "red, green or blue");
  try {
    parse_name(kColours, "Red", "--colour");
    FAIL() << "accepted 'Red'";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--colour 'Red' is not known; expected red, green or blue");
  }
}

}  // namespace
}  // namespace gt
