// `trident plan` over a whole run: --nodes lists side by side (scaling efficiency against the
// smallest size, goodput falling as nodes grow, the best size by the objective written with
// --out) and --objective ranking by the run rather than the step.
#include "../support/trident_process.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using trident::test::run_trident;
using trident::test::split_words;

namespace {

const std::string kSizes = "plan --model gpt2-350m --cluster dgx-h100 --nodes 1,2,4 --gbs 512 "
                           "--seq-length 1024 --top 3 --train-tokens 20B --relaunch-s 600";

TEST(WholeRun, PlanAcrossClusterSizes) {
    const auto r = run_trident(split_words(kSizes + " --objective time-to-train --json"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("format"), "trident.plan-sizes/1");
    const auto& sizes = j.at("sizes");
    ASSERT_EQ(sizes.size(), 3u);
    const double base = sizes[0].at("tokens_per_s_per_device").get<double>();
    double previous_goodput = 1.0, fastest_wall = 0.0;
    long long fastest = 0;
    for (const auto& s : sizes) {
        const long long nodes = s.at("nodes");
        EXPECT_EQ(s.at("devices").get<long long>(), 8 * nodes);
        EXPECT_EQ(s.at("best").at("cluster").at("nodes").get<long long>(), nodes);
        const double per_device = s.at("tokens_per_s").get<double>() / (8.0 * double(nodes));
        EXPECT_DOUBLE_EQ(s.at("tokens_per_s_per_device").get<double>(), per_device);
        EXPECT_DOUBLE_EQ(s.at("scaling_efficiency").get<double>(), per_device / base);
        const auto& run = s.at("time_to_train");
        const double goodput = run.at("failures").at("goodput").get<double>();
        EXPECT_LT(goodput, previous_goodput) << nodes << " nodes"; // more nodes fail more often
        previous_goodput = goodput;
        EXPECT_DOUBLE_EQ(run.at("failures").at("restart_s").get<double>(),
                         600.0 + run.at("failures").at("checkpoint_read_s").get<double>());
        const double wall = run.at("wall_s").get<double>();
        if (fastest == 0 || wall < fastest_wall) fastest = nodes, fastest_wall = wall;
    }
    EXPECT_EQ(j.at("objective"), "time-to-train");
    EXPECT_EQ(j.at("best_nodes").get<long long>(), fastest);
}

TEST(WholeRun, CostObjectivePicksTheCheapestSizeAndWritesIt) {
    const fs::path out = fs::path(testing::TempDir()) / "trident-cheapest-size.json";
    const auto json = run_trident(split_words(kSizes + " --objective cost --json"));
    ASSERT_EQ(json.exit_code, 0) << json.err;
    const auto j = nlohmann::json::parse(json.out);
    long long cheapest = 0;
    double least = 0.0;
    for (const auto& s : j.at("sizes")) {
        const double gpu_hours = s.at("time_to_train").at("gpu_hours").get<double>();
        if (cheapest == 0 || gpu_hours < least) cheapest = s.at("nodes"), least = gpu_hours;
    }
    EXPECT_EQ(j.at("best_nodes").get<long long>(), cheapest);

    const auto text = run_trident(split_words(kSizes + " --objective cost --out " + out.string()));
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("best by cost: " + std::to_string(cheapest) + " nodes"),
              std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("<- best"), std::string::npos) << text.out;
    std::ifstream in(out);
    const auto plan = nlohmann::json::parse(in);
    EXPECT_EQ(plan.at("cluster").at("nodes").get<long long>(), cheapest);
}

TEST(WholeRun, ObjectiveRanksOneSizeByTheRun) {
    // Inside one size every layout shares the checkpoint and the failure rate, so the
    // time-to-train ranking keeps the step-time order and the wall time grows with it.
    const std::string one = "plan --model gpt2-350m --cluster dgx-h100 --nodes 2 --gbs 512 "
                            "--seq-length 1024 --top 4 --train-tokens 20B --json";
    const auto step = run_trident(split_words(one));
    const auto run = run_trident(split_words(one + " --objective time-to-train"));
    ASSERT_EQ(step.exit_code, 0) << step.err;
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const auto a = nlohmann::json::parse(step.out).at("best");
    const auto b = nlohmann::json::parse(run.out).at("best");
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(a[i].at("parallel"), b[i].at("parallel")) << "#" << i + 1;
}

} // namespace
