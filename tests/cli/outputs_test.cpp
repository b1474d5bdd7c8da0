// What simulate, validate and plan print for machines and people: CSV numbers that read back
// exactly, exit 3 for a layout that does not fit (one line, nothing written; --allow-oom prints
// anyway), and the per-stage table collapsed beyond 8 stages.
#include "../support/trident_process.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>

namespace fs = std::filesystem;
using trident::test::run_trident;
using trident::test::split_words;

namespace {

const std::string kPlan = "plan --model gpt2-350m --cluster dgx-a100-80gb --gbs 64 "
                          "--seq-length 1024 --top 3";
// Llama 3 70B on one node at tp 8 with no sharding or recomputation: 257 % of an H100.
const std::string kOom = " --model llama3-70b --cluster dgx-h100 --nodes 1 --tp 8 --pp 1 --dp 1 "
                         "--mbs 1 --gbs 8";

std::vector<std::string> csv_fields(const std::string& line) {
    std::vector<std::string> fields;
    std::stringstream in(line);
    for (std::string f; std::getline(in, f, ',');) fields.push_back(f);
    if (!line.empty() && line.back() == ',') fields.emplace_back(); // an empty last column
    return fields;
}

TEST(Outputs, PlanCsvNumbersReadBackAsTheJsonOnes) {
    const auto csv = run_trident(split_words(kPlan + " --csv"));
    const auto json = run_trident(split_words(kPlan + " --json"));
    ASSERT_EQ(csv.exit_code, 0) << csv.err;
    ASSERT_EQ(json.exit_code, 0) << json.err;
    std::stringstream lines(csv.out);
    std::string header, first;
    std::getline(lines, header);
    std::getline(lines, first);
    const auto names = csv_fields(header), values = csv_fields(first);
    ASSERT_EQ(names.size(), values.size()) << first;
    const auto column = [&](const std::string& name) {
        const auto at = std::find(names.begin(), names.end(), name);
        EXPECT_NE(at, names.end()) << name;
        return std::stod(values[std::size_t(at - names.begin())]);
    };
    const auto planner = nlohmann::json::parse(json.out)["best"][0]["planner"];
    // Exactly, not within six digits: the CSV holds every digit a double needs.
    EXPECT_EQ(column("step_time_s"), planner["predicted_step_time_s"].get<double>()) << first;
    EXPECT_EQ(column("tokens_per_s"), planner["predicted_tokens_per_s"].get<double>()) << first;
    EXPECT_EQ(column("mfu"), planner["predicted_mfu"].get<double>()) << first;
    EXPECT_EQ(column("peak_memory_bytes"), planner["peak_memory_bytes"].get<double>()) << first;
    EXPECT_EQ(first.find("e+"), std::string::npos) << first; // bytes print as integers
}

TEST(Outputs, ALayoutThatDoesNotFitExitsThreeWithOneLine) {
    const fs::path report = fs::path(testing::TempDir()) / "trident-oom-report.json";
    fs::remove(report);
    for (const std::string command : {"simulate", "validate"}) {
        const std::string extra = command == "simulate" ? " --json " + report.string() : "";
        const auto r = run_trident(split_words(command + kOom + extra));
        EXPECT_EQ(r.exit_code, 3) << command << "\n" << r.out << r.err;
        EXPECT_EQ(r.err.rfind("trident: error: memory: stage 0 needs ", 0), 0u) << r.err;
        EXPECT_NE(r.err.find("% of the device's"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("--allow-oom"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
        EXPECT_TRUE(r.out.empty()) << r.out; // no report, no "valid"
        EXPECT_FALSE(fs::exists(report)) << command;
        const auto anyway = run_trident(split_words(command + kOom + extra + " --allow-oom"));
        EXPECT_EQ(anyway.exit_code, 0) << anyway.err;
        EXPECT_NE(anyway.out.find("OUT OF MEMORY"), std::string::npos) << anyway.out;
        EXPECT_EQ(fs::exists(report), command == "simulate") << command;
        fs::remove(report);
    }
    // One that fits says how full its busiest stage is, then valid.
    const auto fits = run_trident(split_words(
        "validate --model llama3-70b --cluster dgx-h100 --nodes 4 --tp 8 --pp 4 --dp 1 --mbs 1 "
        "--gbs 8 --recompute-granularity full --recompute-method uniform --recompute-num-layers "
        "1"));
    EXPECT_EQ(fits.exit_code, 0) << fits.err;
    EXPECT_NE(fits.out.find("memory    busiest stage "), std::string::npos) << fits.out;
    EXPECT_NE(fits.out.find("\nvalid\n"), std::string::npos) << fits.out;
}

TEST(Outputs, ManyStagesCollapseIntoRangesUnlessAllAreAsked) {
    const std::string sixteen = "simulate --model gpt3-175b --cluster dgx-a100-80gb --nodes 64 "
                                "--tp 8 --pp 16 --dp 4 --mbs 1 --gbs 1536 --sequence-parallel "
                                "--use-distributed-optimizer";
    const auto summary = run_trident(split_words(sixteen));
    ASSERT_EQ(summary.exit_code, 0) << summary.err;
    EXPECT_NE(summary.out.find("\n 1-14 "), std::string::npos) << summary.out;
    EXPECT_NE(summary.out.find("(16 stages in 3 rows"), std::string::npos) << summary.out;
    const auto all = run_trident(split_words(sixteen + " --stages all"));
    ASSERT_EQ(all.exit_code, 0) << all.err;
    EXPECT_EQ(all.out.find(" 1-14 "), std::string::npos);
    EXPECT_NE(all.out.find("\n   14 "), std::string::npos) << all.out;
    // Up to 8 stages every one is listed by default.
    const auto eight = run_trident(split_words(
        "simulate --model gpt3-175b --cluster dgx-a100-80gb --nodes 64 --tp 8 --pp 8 --dp 8 "
        "--mbs 1 --gbs 1536 --sequence-parallel --use-distributed-optimizer"));
    ASSERT_EQ(eight.exit_code, 0) << eight.err;
    EXPECT_NE(eight.out.find("\n    6 "), std::string::npos) << eight.out;
    EXPECT_EQ(eight.out.find("stages in"), std::string::npos) << eight.out;
    const auto bad = run_trident(split_words(sixteen + " --stages some"));
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_EQ(bad.err.rfind("trident: error: --stages: ", 0), 0u) << bad.err;
}

} // namespace

namespace {

// `run` on one rank (no mpirun needed) with --log-interval 3 over 7 steps: lines after steps 3,
// 6 and 7, each the mean of its steps' losses (the metrics file keeps every step), an
// end-of-run summary, and counts in the singular where they are one.
TEST(Outputs, LogIntervalAveragesAndTheRunEndsWithASummary) {
    const fs::path metrics = fs::path(testing::TempDir()) / "trident-log-interval.json";
    const auto r = run_trident(
        split_words("run --model gpt-tiny --cluster localhost --devices-per-node 1 --mbs 2 --gbs 2 "
                    "--seq-length 16 --steps 7 --log-interval 3 --metrics-json " +
                    metrics.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("training gpt-tiny on 1 rank: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(", 1 micro-batch of 2"), std::string::npos) << r.out;
    std::vector<std::string> step_lines;
    std::stringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
        if (line.rfind("step ", 0) == 0) step_lines.push_back(line);
    ASSERT_EQ(step_lines.size(), 3u) << r.out;
    EXPECT_EQ(step_lines[0].rfind("step 3/7 | loss ", 0), 0u) << step_lines[0];
    EXPECT_EQ(step_lines[1].rfind("step 6/7 | loss ", 0), 0u) << step_lines[1];
    EXPECT_EQ(step_lines[2].rfind("step 7/7 | loss ", 0), 0u) << step_lines[2];
    EXPECT_NE(step_lines[0].find("(mean of 3)"), std::string::npos) << step_lines[0];
    EXPECT_EQ(step_lines[2].find("mean of"), std::string::npos) << step_lines[2];
    std::ifstream in(metrics);
    const auto steps = nlohmann::json::parse(in)["steps"];
    ASSERT_EQ(steps.size(), 7u);
    const double mean = (steps[3]["loss"].get<double>() + steps[4]["loss"].get<double>() +
                         steps[5]["loss"].get<double>()) /
                        3.0;
    const double printed = std::stod(step_lines[1].substr(step_lines[1].find("loss ") + 5));
    EXPECT_NEAR(printed, mean, 1e-6 * mean);
    EXPECT_NE(r.out.find("summary: 7 steps (1 to 7), 224 tokens, step time mean "),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("saves 0 s (0 saves), validation 0 s (0 passes), start-up and "
                         "checkpoint load "),
              std::string::npos)
        << r.out;
    fs::remove(metrics);
}

} // namespace

namespace {

// `plan --megatron-args > args.sh` captures the arguments alone (the table goes to stderr),
// with the model fields Megatron needs (rotary base, GQA, SwiGLU, untied embeddings) and, with
// --launcher, the launcher's line in front.
TEST(Outputs, MegatronArgumentsAloneOnStdout) {
    const std::string plan = "plan --model llama3-70b --cluster dgx-h100 --nodes 4 --gbs 64 "
                             "--seq-length 4096 --top 1 --megatron-args";
    const auto r = run_trident(split_words(plan));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind("# llama3-70b: 32 GPUs", 0), 0u) << r.out;
    EXPECT_EQ(r.out.find("searched"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("searched"), std::string::npos) << r.err;
    for (const char* flag :
         {"\npretrain_gpt.py", "--rotary-base 500000", "--num-query-groups 8", "--swiglu",
          "--untie-embeddings-and-output-weights", "--normalization RMSNorm"})
        EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
    const auto torchrun = run_trident(split_words(plan + " --launcher torchrun"));
    ASSERT_EQ(torchrun.exit_code, 0) << torchrun.err;
    EXPECT_NE(torchrun.out.find("\ntorchrun --nnodes 4 --nproc-per-node 8 "), std::string::npos)
        << torchrun.out;
    EXPECT_NE(torchrun.out.find(" \\\n  pretrain_gpt.py"), std::string::npos) << torchrun.out;
    const auto srun = run_trident(split_words(plan + " --launcher srun"));
    EXPECT_NE(srun.out.find("\nsrun --nodes 4 --ntasks-per-node 8 --gpus-per-node 8 python"),
              std::string::npos)
        << srun.out;
    const auto alone = run_trident(
        split_words("plan --model gpt2-350m --cluster dgx-a100-80gb --gbs 64 --launcher torchrun"));
    EXPECT_EQ(alone.exit_code, 2);
    EXPECT_EQ(alone.err.rfind("trident: error: --launcher: goes with --megatron-args", 0), 0u)
        << alone.err;
}

} // namespace

// --train-tokens on simulate and plan: the whole run at the simulated step time, in the text
// and in the JSON, where train_s is exactly steps × step_time_s.
TEST(Outputs, TimeToTrainATokenBudget) {
    const std::string json =
        (std::filesystem::path(testing::TempDir()) / "trident-time-to-train.json").string();
    const std::vector<std::string> job = {
        "--model", "gpt2-124m", "--cluster", "dgx-h100", "--nodes", "2",   "--tp",         "1",
        "--pp",    "1",         "--mbs",     "8",        "--gbs",   "512", "--seq-length", "1024"};
    std::vector<std::string> args = {"simulate"};
    args.insert(args.end(), job.begin(), job.end());
    args.insert(args.end(), {"--train-tokens", "1T", "--gpu-hour-price", "2", "--json", json});
    const auto r = run_trident(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("time to train 1 T tokens: 1.91 M steps, "), std::string::npos) << r.out;
    std::ifstream in(json);
    const auto report = nlohmann::json::parse(in);
    const auto& t = report.at("time_to_train");
    EXPECT_EQ(t.at("steps").get<long long>(), 1907349); // ceil(1e12 / 524,288)
    EXPECT_DOUBLE_EQ(t.at("train_s").get<double>(),
                     1907349.0 * report.at("step_time_s").get<double>());
    // dgx-h100 carries the Llama 3 failure rate: the wall time is the steps' over the goodput,
    // and the GPU-hours (and cost) are the wall time's.
    const auto& failures = t.at("failures");
    EXPECT_DOUBLE_EQ(failures.at("mtbf_s").get<double>(), 3600.0 / (1.973e-5 * 16));
    EXPECT_DOUBLE_EQ(t.at("wall_s").get<double>(),
                     t.at("train_s").get<double>() / failures.at("goodput").get<double>());
    EXPECT_DOUBLE_EQ(t.at("cost").get<double>(), 2.0 * 16.0 * t.at("wall_s").get<double>() / 3600);

    std::vector<std::string> plan = {"plan",     "--model",        "gpt2-124m", "--cluster",
                                     "dgx-h100", "--nodes",        "2",         "--gbs",
                                     "512",      "--seq-length",   "1024",      "--top",
                                     "3",        "--train-tokens", "300B"};
    const auto planned = run_trident(plan);
    ASSERT_EQ(planned.exit_code, 0) << planned.err;
    EXPECT_NE(planned.out.find("time to train, best layout: 300 B tokens: 572 K steps, "),
              std::string::npos)
        << planned.out;
}
