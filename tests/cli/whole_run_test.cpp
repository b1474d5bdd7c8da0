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

// Listed out of order and with a repeat: planned smallest first, once each.
const std::string kSizes = "plan --model gpt2-350m --cluster dgx-h100 --nodes 4,1,2,1 --gbs 512 "
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

// simulate and plan report a ramp-up segment by segment, each timed as its own batch would be.
TEST(WholeRun, RampUpSegmentsAreTimedAtTheirBatch) {
    const fs::path json = fs::path(testing::TempDir()) / "trident-ramp.json";
    const std::string job = "simulate --model gpt2-124m --cluster dgx-h100 --nodes 1 --tp 1 "
                            "--pp 1 --mbs 4 --seq-length 1024 --gbs ";
    const auto r = run_trident(split_words(job +
                                           "256 --train-tokens 1B --rampup-batch-size 64 "
                                           "64 30000 --json " +
                                           json.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("segment 1: batch 64 × 1024 tokens"), std::string::npos) << r.out;
    std::ifstream in(json);
    const auto report = nlohmann::json::parse(in);
    const auto& run = report.at("time_to_train");
    const auto& segments = run.at("segments");
    ASSERT_EQ(segments.size(), 4u); // 64, 128, 192, 256
    long long steps = 0;
    double train_s = 0.0;
    for (const auto& s : segments) {
        steps += s.at("steps").get<long long>();
        train_s += s.at("train_s").get<double>();
        const long long batch = s.at("global_batch_size");
        const fs::path alone = fs::path(testing::TempDir()) / "trident-ramp-alone.json";
        const auto one =
            run_trident(split_words(job + std::to_string(batch) + " --json " + alone.string()));
        ASSERT_EQ(one.exit_code, 0) << one.err;
        std::ifstream a(alone);
        EXPECT_DOUBLE_EQ(s.at("step_time_s").get<double>(),
                         nlohmann::json::parse(a).at("step_time_s").get<double>())
            << "batch " << batch;
    }
    EXPECT_EQ(run.at("steps").get<long long>(), steps);
    EXPECT_DOUBLE_EQ(run.at("train_s").get<double>(), train_s);
    // 10,000 samples per increment: ⌈10,000 / 64⌉ = 157 steps at the first batch.
    EXPECT_EQ(segments[0].at("steps").get<long long>(), 157);
}

TEST(WholeRun, SequenceScheduleReplansEachLength) {
    const std::string plan = "plan --model gpt2-124m --cluster dgx-h100 --nodes 1 --gbs 256 "
                             "--top 1 --json --seq-length ";
    const auto r = run_trident(split_words(plan + "512 --train-tokens 11B "
                                                  "--seq-length-schedule 512:10B,1024:1B"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto report = nlohmann::json::parse(r.out);
    const auto& segments = report.at("time_to_train").at("segments");
    ASSERT_EQ(segments.size(), 2u);
    EXPECT_FALSE(segments[0].contains("layout")); // the plan's own layout
    const auto alone = run_trident(split_words(plan + "1024"));
    ASSERT_EQ(alone.exit_code, 0) << alone.err;
    const auto replanned = nlohmann::json::parse(alone.out);
    const auto& best = replanned.at("best").at(0);
    EXPECT_DOUBLE_EQ(segments[1].at("step_time_s").get<double>(),
                     best.at("planner").at("predicted_step_time_s").get<double>());
    EXPECT_EQ(segments[1].at("layout").get<std::string>().rfind("re-planned: ", 0), 0u);
}

// The (tp, pp) map: one search per pair, whose fastest cell is the whole search's best.
TEST(WholeRun, TpPpMapsFastestCellIsThePlansBest) {
    const auto r = run_trident(split_words("plan --model gpt2-350m --cluster dgx-h100 --nodes 2 "
                                           "--gbs 256 --seq-length 1024 --top 1 --json "
                                           "--tp-pp-map"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const auto& map = j.at("tp_pp_map");
    ASSERT_EQ(map.size(), 4u * 5u); // tp 1, 2, 4, 8 × pp 1, 2, 4, 8, 16 (24 layers, 16 GPUs)
    double fastest = 0.0;
    for (const auto& cell : map)
        if (cell.contains("tokens_per_s"))
            fastest = std::max(fastest, cell.at("tokens_per_s").get<double>());
    const auto& best = j.at("best").at(0);
    EXPECT_DOUBLE_EQ(fastest, best.at("planner").at("predicted_tokens_per_s").get<double>());
    const auto text = run_trident(split_words("plan --model gpt2-350m --cluster dgx-h100 "
                                              "--nodes 2 --gbs 256 --seq-length 1024 --top 1 "
                                              "--tp-pp-map"));
    EXPECT_NE(text.out.find("tp\\pp"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("*"), std::string::npos) << text.out;
}

// The issue's own command: Llama 3 70B, 1T tokens, DGX H100 at 64, 128 and 256 nodes.
TEST(WholeRun, Llama3At64To256NodesPrintsTheTable) {
    const auto r = run_trident(split_words(
        "plan --model llama3-70b --cluster dgx-h100 --nodes 64,128,256 --gbs 512 --seq-length "
        "8192 --train-tokens 1T --gpu-hour-price 2"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* column :
         {"nodes", "best layout", "tok/s/GPU", "scaling", "goodput", "days", "GPU-hours", "cost"})
        EXPECT_NE(r.out.find(column), std::string::npos) << column << "\n" << r.out;
    for (const char* row : {"\n    64    512  tp ", "\n   128   1024  tp ", "\n   256   2048  tp "})
        EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
    EXPECT_NE(r.out.find("  100.0%"), std::string::npos) << "the smallest size scales at 100 %";
    EXPECT_NE(r.out.find("<- best"), std::string::npos) << r.out;
}

} // namespace
