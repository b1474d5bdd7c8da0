// `trident plan --explain` says which memory savers #1 took; the plan file and Megatron's
// arguments carry them, and simulating the plan file gives the planner's number.
#include "../support/trident_process.h"

#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

using trident::test::run_trident;
using trident::test::split_words;

namespace {

const std::string kLlama70bOnFourNodes =
    "plan --model llama3-70b --cluster dgx-h100 --nodes 4 --gbs 64 --seq-length 4096 --top 3 "
    "--explain";

double number_after(const std::string& text, const std::string& key) {
    const auto at = text.find("\"" + key + "\": ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size() + 4));
}

} // namespace

TEST(MemorySaversCli, ExplainNamesThemAndThePlanCarriesThem) {
    const std::string path = testing::TempDir() + "trident-savers.json";
    const auto r =
        run_trident(split_words(kLlama70bOnFourNodes + " --megatron-args --out " + path));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("memory savers for #1: FP8 parameter gather"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("--fp8-param-gather"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--use-distributed-optimizer"), std::string::npos) << r.out;
    const auto sim = run_trident({"simulate", "--plan", path, "--json", path + ".report"});
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    std::ifstream plan_in(path), report_in(path + ".report");
    std::stringstream plan_text, report_text;
    plan_text << plan_in.rdbuf();
    report_text << report_in.rdbuf();
    EXPECT_NE(plan_text.str().find("\"memory_savers\": \"FP8 parameter gather"), std::string::npos);
    const double predicted = number_after(plan_text.str(), "predicted_step_time_s");
    const double simulated = number_after(report_text.str(), "step_time_s");
    EXPECT_GT(predicted, 0);
    EXPECT_NEAR(predicted, simulated, 1e-9 * simulated);
    std::remove(path.c_str());
    std::remove((path + ".report").c_str());
}

TEST(MemorySaversCli, NoMemorySaversTakesNone) {
    const auto r = run_trident(split_words(kLlama70bOnFourNodes + " --no-memory-savers"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("memory savers for #1: none"), std::string::npos) << r.out;
}
