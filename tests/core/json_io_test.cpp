#include "trident/core/json_io.h"
#include "trident/core/spec_error.h"

#include <gtest/gtest.h>

using namespace trident::core;

// Runs `f`, expecting a SpecError, and returns it.
template <typename F>
SpecError spec_error(F&& f) {
    try {
        f();
    } catch (const SpecError& e) {
        return e;
    }
    ADD_FAILURE() << "no SpecError thrown";
    return SpecError("", "");
}

TEST(JsonIo, SyntaxErrorGivesLineAndColumn) {
    const auto e = spec_error([] { parse_json_text("{\n  \"a\": 1,\n  \"b\" 2\n}", "x.json"); });
    EXPECT_EQ(e.field(), "x.json");
    EXPECT_NE(e.reason().find("line 3, column 7"), std::string::npos) << e.reason();
}

TEST(JsonIo, SyntaxErrorSaysItsPositionAndReasonOnce) {
    const auto e = spec_error([] { parse_json_text("{\n \"a\": \n", "x.json"); });
    EXPECT_EQ(e.reason(), "JSON syntax error at line 3, column 1: unexpected end of input; "
                          "expected '[', '{', or a literal");
}

TEST(JsonIo, BinaryFileIsNamedAsSuch) {
    const auto e =
        spec_error([] { parse_json_text(std::string_view("\0\x01{\"a\": 1}", 10), "model.json"); });
    EXPECT_EQ(e.field(), "model.json");
    EXPECT_EQ(e.reason(), "is a binary file, not JSON (a NUL byte at offset 0)");
}

TEST(JsonIo, UnknownFieldSuggestsTheClosestKnownOne) {
    const Json j = Json::parse(R"({"hiden_size": 3})");
    ObjectReader r(j, "model");
    r.integer_or("hidden_size", 1);
    const auto e = spec_error([&] { r.finish(); });
    EXPECT_EQ(e.field(), "model.hiden_size");
    EXPECT_NE(e.reason().find("did you mean 'hidden_size'"), std::string::npos);
}

TEST(JsonIo, IntegerRules) {
    const Json j = Json::parse(R"({"neg": -3, "frac": 1.5, "str": "8", "whole": 4.0})");
    ObjectReader r(j, "p");
    EXPECT_EQ(spec_error([&] { r.integer("neg"); }).reason(), "must be a positive integer, got -3");
    EXPECT_EQ(spec_error([&] { r.integer("frac"); }).field(), "p.frac");
    EXPECT_EQ(spec_error([&] { r.integer("str"); }).reason(), "must be an integer, got a string");
    EXPECT_EQ(r.integer("whole"), 4);
    EXPECT_EQ(spec_error([&] { r.integer("missing"); }).reason(), "missing (required field)");
    EXPECT_EQ(spec_error([&] { r.integer("whole", 1, 3); }).reason(), "must be at most 3, got 4");
}

TEST(JsonIo, EnumNamesTheChoices) {
    const std::array<std::string_view, 2> names = {"gelu", "swiglu"};
    EXPECT_EQ(enum_index("swiglu", names, "f"), 1u);
    const auto e = spec_error([&] { enum_index("swigl", names, "model.activation"); });
    EXPECT_EQ(e.field(), "model.activation");
    EXPECT_NE(e.reason().find("gelu | swiglu"), std::string::npos);
    EXPECT_NE(e.reason().find("did you mean \"swiglu\""), std::string::npos);
}
