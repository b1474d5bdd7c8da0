// `trident plan --explain` says which memory savers #1 took; the plan file and Megatron's
// arguments carry them, and simulating the plan file gives the planner's number.
#include "../support/trident_process.h"

#include <cstdio>
#include <gtest/gtest.h>

using trident::test::file_text;
using trident::test::number_after;
using trident::test::run_trident;
using trident::test::split_words;

namespace {

const std::string kLlama70bOnFourNodes =
    "plan --model llama3-70b --cluster dgx-h100 --nodes 4 --gbs 64 --seq-length 4096 --top 3 "
    "--explain";

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
    const std::string plan_text = file_text(path);
    EXPECT_NE(plan_text.find("\"memory_savers\": \"FP8 parameter gather"), std::string::npos);
    const double predicted = number_after(plan_text, "predicted_step_time_s");
    const double simulated = number_after(file_text(path + ".report"), "step_time_s");
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

TEST(MemorySaversCli, APinnedParameterGatherSearchesTheDistributedOptimizer) {
    // --fp8-param-gather pinned on plan: every layout it tries shards the optimizer state
    // (Megatron's rule), whether --distributed-optimizer is given or not; pinned off, the
    // search says why nothing is valid.
    const std::string base = "plan --model llama3-8b --cluster dgx-h100 --nodes 1 --gbs 64 "
                             "--seq-length 4096 --precision fp8-blockwise --fp8-param-gather";
    for (const std::string extra : {"", " --distributed-optimizer"}) {
        const auto r = run_trident(split_words(base + extra));
        ASSERT_EQ(r.exit_code, 0) << extra << ": " << r.err;
        EXPECT_NE(r.out.find("fp8-blockwise"), std::string::npos) << r.out;
    }
    const auto off = run_trident(split_words(base + " --no-distributed-optimizer"));
    EXPECT_NE(off.exit_code, 0);
    EXPECT_NE(off.err.find("param_gather"), std::string::npos) << off.err;
}
