// Runs `trident` on every malformed or impossible input listed in tests/fixtures/bad/cases.tsv and
// checks exit code 2, one line on stderr, the exact field named, and the reason's key words.
#include "../support/trident_process.h"

#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>

using trident::test::run_trident;
using trident::test::split_words;

namespace {

struct BadCase {
    std::string args, field, reason;
};

const std::string kDir = std::string(TRIDENT_FIXTURES) + "/bad/";

std::string expand(std::string s) {
    for (std::size_t at; (at = s.find('@')) != std::string::npos;) s.replace(at, 1, kDir);
    return s;
}

std::vector<BadCase> load_cases() {
    std::vector<BadCase> cases;
    std::ifstream in(kDir + "cases.tsv");
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        BadCase c;
        const auto tab1 = line.find('\t'), tab2 = line.find('\t', tab1 + 1);
        c.args = expand(line.substr(0, tab1));
        c.field = expand(line.substr(tab1 + 1, tab2 - tab1 - 1));
        c.reason = tab2 == std::string::npos ? "" : line.substr(tab2 + 1);
        cases.push_back(c);
    }
    return cases;
}

// Shown in test names and failures instead of gtest's byte dump.
void PrintTo(const BadCase& c, std::ostream* os) {
    *os << "trident " << c.args;
}

class BadInput : public testing::TestWithParam<BadCase> {};

TEST_P(BadInput, ExitsTwoNamingTheField) {
    const BadCase& c = GetParam();
    // No profile of this user's (`trident profile` keeps a copy there) may answer for a case.
    ::setenv("TRIDENT_PROFILE_DIR", "/nonexistent/trident-test-profiles", 1);
    const auto r = run_trident(split_words(c.args));
    EXPECT_EQ(r.exit_code, 2) << c.args << "\nstderr: " << r.err;
    ASSERT_FALSE(r.err.empty()) << c.args;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
    const std::string prefix = "trident: error: ";
    ASSERT_EQ(r.err.rfind(prefix, 0), 0u) << r.err;
    const std::string message = r.err.substr(prefix.size());
    // `FIELD: REASON`, the flag or spec field first, parse errors included.
    EXPECT_EQ(message.rfind(c.field + ": ", 0), 0u) << "field " << c.field << ": " << r.err;
    // Library internals stay out of the line, and a file is named once.
    EXPECT_EQ(message.find("json.exception"), std::string::npos) << r.err;
    EXPECT_EQ(message.find(" [in " + c.field + "]"), std::string::npos) << r.err;
    EXPECT_NE(message.find(c.reason), std::string::npos)
        << "reason '" << c.reason << "': " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Manifest, BadInput, testing::ValuesIn(load_cases()),
                         [](const testing::TestParamInfo<BadCase>& info) {
                             return "case_" + std::to_string(info.index);
                         });

TEST(BadInputManifest, HasAtLeastThirtyCases) {
    EXPECT_GE(load_cases().size(), 30u);
}

} // namespace
