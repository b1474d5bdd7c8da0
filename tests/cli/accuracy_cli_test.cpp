// `trident accuracy` as a user runs it, and the lines every plan and simulate print because of
// it: the expected error band, and MFU naming its peak.
#include "../support/trident_process.h"

#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using trident::test::run_trident;
using trident::test::split_words;

TEST(AccuracyCommand, PrintsEachRunAndTheErrorPerCategory) {
    const auto r = run_trident({"accuracy", "--category", "ampere"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("sc21-1.7b"), std::string::npos);
    EXPECT_NE(r.out.find("korthikanti-175b"), std::string::npos);
    EXPECT_NE(r.out.find("by category"), std::string::npos);
    EXPECT_NE(r.out.find("dense · ampere · bf16"), std::string::npos);
    EXPECT_EQ(r.out.find("hopper"), std::string::npos) << "--category keeps only its rows";
    const std::string json = "/tmp/trident-accuracy-test.json";
    std::remove(json.c_str());
    const auto all = run_trident({"accuracy", "--json", json});
    ASSERT_EQ(all.exit_code, 0) << all.err;
    EXPECT_NE(all.out.find("dense · blackwell · nvfp4"), std::string::npos);
    // The run Trident cannot express yet (activation offload) says why.
    EXPECT_NE(all.out.find("not expressible in Trident yet"), std::string::npos);
    EXPECT_NE(all.out.find("cpu_offloading_num_layers"), std::string::npos);
    std::ifstream in(json);
    const nlohmann::json j = nlohmann::json::parse(in);
    EXPECT_EQ(j["format"], "trident.accuracy/1");
    ASSERT_GT(j["runs"].size(), 40u);
    for (const auto& row : j["runs"])
        EXPECT_TRUE(row.contains("predicted") != row.contains("not_expressible")) << row.dump();
    // Peak-memory figures are summarised apart from throughput.
    EXPECT_NE(all.out.find("all memory"), std::string::npos);
    EXPECT_NE(all.out.find("max alloc MiB"), std::string::npos);
    EXPECT_GE(j["memory_summary"]["runs"].get<int>(), 10);
    EXPECT_LT(j["memory_summary"]["runs"].get<int>(), j["summary"]["runs"].get<int>());
}

TEST(AccuracyCommand, ShowsOneRunsWholeReportAndNamesAnUnknownOne) {
    const auto r = run_trident({"accuracy", "--show", "korthikanti-530b"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("published MFU 56.0 %, predicted"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("step time"), std::string::npos);
    const auto bad = run_trident({"accuracy", "--show", "korthikanti-503b"});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("did you mean 'korthikanti-530b'"), std::string::npos) << bad.err;
    const std::string file = "/tmp/trident-accuracy-bad.json";
    std::ofstream(file) << R"({"format": "trident.published-runs/1", "runs": [{"name": "a"}]})";
    const auto malformed = run_trident({"accuracy", "--runs", file});
    EXPECT_EQ(malformed.exit_code, 2);
    EXPECT_NE(malformed.err.find("--runs.runs[0].source"), std::string::npos) << malformed.err;
}

TEST(AccuracyCommand, SimulateAndPlanNameTheirPeakAndTheirExpectedError) {
    const std::string job = " --model llama3-70b --cluster dgx-h100 --nodes 8 --gbs 64 "
                            "--seq-length 4096";
    const auto sim = run_trident(split_words("simulate" + job +
                                             " --tp 8 --pp 4 --dp auto --mbs 1 "
                                             "--sequence-parallel --distributed-optimizer "
                                             "--precision fp8-tensorwise"));
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    EXPECT_NE(sim.out.find("of BF16 peak, "), std::string::npos) << sim.out;
    EXPECT_NE(sim.out.find(" of FP8 peak"), std::string::npos);
    EXPECT_NE(sim.out.find("expected error (published runs, dense · hopper · fp8"),
              std::string::npos)
        << sim.out;
    const auto plan = run_trident(split_words("plan" + job + " --top 3"));
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    EXPECT_NE(plan.out.find("MFU%bf16"), std::string::npos);
    EXPECT_NE(plan.out.find("MFU%fp8"), std::string::npos);
    EXPECT_NE(plan.out.find("expected error (published runs, dense · hopper"), std::string::npos)
        << plan.out;
    // A job on a measured profile that names no generation has no published runs to be judged
    // by, and says so.
    const auto cpu = run_trident(split_words(
        "simulate --model gpt-tiny --cluster localhost --devices-per-node 2 --tp 1 --pp 1 --dp 2 "
        "--mbs 2 --gbs 8 --profile " +
        std::string(TRIDENT_FIXTURES) + "/profiles/cpu-host-2-ranks.json"));
    ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
    EXPECT_NE(cpu.out.find("expected error: no published runs on this device"), std::string::npos)
        << cpu.out;
}
