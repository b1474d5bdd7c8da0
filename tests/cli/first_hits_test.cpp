// What a new user hits first, run as they would run it: the localhost flow finding the profile
// `trident profile` wrote, refusal texts with real numbers, overrides and Megatron's defaults,
// sizes in units that fit, and a run banner that says what runs.
#include "../support/trident_process.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

namespace fs = std::filesystem;
using trident::test::run_shell;
using trident::test::run_trident;
using trident::test::split_words;

namespace {

std::string slurp(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string quoted(const fs::path& p) {
    return "'" + p.string() + "'";
}

// A folder holding cpu-host.json as `trident profile` writes it (a --quick measurement of two
// ranks of this machine, kept as test data).
fs::path folder_with_cpu_host_profile(const std::string& name) {
    const fs::path dir = fs::path(testing::TempDir()) / name;
    fs::remove_all(dir);
    fs::create_directories(dir / "user");
    fs::copy_file(fs::path(TRIDENT_FIXTURES) / "profiles" / "cpu-host-2-ranks.json",
                  dir / "cpu-host.json");
    return dir;
}

// `trident ARGS` run in `dir`, with the user's profile folder at dir/user.
trident::test::CommandResult in_folder(const fs::path& dir, const std::string& args) {
    return run_shell("cd " + quoted(dir) + " && TRIDENT_PROFILE_DIR=" + quoted(dir / "user") + " " +
                     TRIDENT_BINARY + " " + args);
}

} // namespace

TEST(FirstHits, LocalhostFlowFindsTheMeasuredProfileAndRecordsIt) {
    const fs::path dir = folder_with_cpu_host_profile("trident-localhost-flow");
    // ./cpu-host.json, where `trident profile` writes it, is found without --profile.
    const auto plan =
        in_folder(dir, "plan --model gpt-tiny --cluster localhost --devices-per-node 2 --gbs 8 "
                       "--out plan.json");
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    EXPECT_NE(plan.out.find("× cpu-host"), std::string::npos) << plan.out;
    // The plan file records the profile it was made with, by its absolute path ...
    const std::string written = slurp(dir / "plan.json");
    EXPECT_NE(written.find("\"profile\": \"" + (dir / "cpu-host.json").string() + "\""),
              std::string::npos)
        << written;
    // ... which simulate finds from any folder.
    const auto elsewhere =
        run_shell(std::string("cd / && TRIDENT_PROFILE_DIR=/nonexistent ") + TRIDENT_BINARY +
                  " simulate --plan " + quoted(dir / "plan.json"));
    ASSERT_EQ(elsewhere.exit_code, 0) << elsewhere.err;
    EXPECT_NE(elsewhere.out.find("profile cpu-host"), std::string::npos) << elsewhere.out;
    // Gone from there, the plan's profile is passed over with a warning for the user's copy.
    fs::rename(dir / "cpu-host.json", dir / "user" / "cpu-host.json");
    const auto moved = in_folder("/", "simulate --plan " + quoted(dir / "plan.json"));
    EXPECT_EQ(moved.exit_code, 2) << moved.err; // in_folder("/") has no user folder of its own
    const auto user = in_folder(dir, "simulate --plan plan.json");
    ASSERT_EQ(user.exit_code, 0) << user.err;
    EXPECT_NE(user.err.find("warning: profile: the plan's profile"), std::string::npos) << user.err;
    EXPECT_NE(user.err.find((dir / "user" / "cpu-host.json").string()), std::string::npos);
    // Nowhere: one line saying where it looked and the command that measures a profile.
    fs::remove(dir / "user" / "cpu-host.json");
    const auto none = in_folder(dir, "plan --model gpt-tiny --cluster localhost --gbs 8");
    EXPECT_EQ(none.exit_code, 2);
    EXPECT_NE(none.err.find("cluster.device: no profile for device 'cpu-host'"), std::string::npos)
        << none.err;
    EXPECT_NE(none.err.find("./cpu-host.json"), std::string::npos) << none.err;
    EXPECT_NE(none.err.find("trident profile --backend cpu"), std::string::npos) << none.err;
    EXPECT_EQ(std::count(none.err.begin(), none.err.end(), '\n'), 1) << none.err;
}

TEST(FirstHits, RefusalsCarryRealNumbersAndKeepNames) {
    const fs::path dir = folder_with_cpu_host_profile("trident-refusals");
    const auto explain =
        in_folder(dir, "plan --model gpt-tiny --cluster localhost --devices-per-node 2 --gbs 8 "
                       "--explain");
    ASSERT_EQ(explain.exit_code, 0) << explain.err;
    EXPECT_NE(explain.out.find("interleaved-1f1b needs"), std::string::npos) << explain.out;
    EXPECT_EQ(explain.out.find("NfNb"), std::string::npos) << explain.out;
    EXPECT_EQ(explain.out.find("N·N"), std::string::npos) << explain.out;
    EXPECT_NE(explain.out.find("parallel.vpp ×"), std::string::npos) << explain.out;
    EXPECT_NE(explain.out.find("e.g. pp·vpp = 2·3 = 6 virtual stages exceed the 4 layers"),
              std::string::npos)
        << explain.out;
    // More stages than layers says so, whatever the cluster.
    const auto validate13 = run_trident(split_words(
        "validate --model gpt-tiny --cluster localhost --devices-per-node 13 --pp 13 --mbs 1 "
        "--gbs 8"));
    EXPECT_EQ(validate13.exit_code, 2);
    EXPECT_NE(validate13.err.find("pp·vpp = 13·1 = 13 virtual stages exceed the 4 layers"),
              std::string::npos)
        << validate13.err;
    // A split the layers do not allow names the numbers and the ways out.
    const auto validate3 = run_trident(split_words(
        "validate --model gpt-tiny --cluster localhost --devices-per-node 3 --pp 3 --mbs 1 "
        "--gbs 8"));
    EXPECT_EQ(validate3.exit_code, 2);
    EXPECT_NE(validate3.err.find("parallel.pp: 4 layers cannot fill pp 3 · vpp 1 evenly; give "
                                 "--decoder-first-pipeline-num-layers"),
              std::string::npos)
        << validate3.err;
}

TEST(FirstHits, OverridesAndMegatronDefaults) {
    const fs::path dir = folder_with_cpu_host_profile("trident-overrides");
    // A plan with full recomputation of 2 layers, overridden to none and to selective.
    std::ofstream(dir / "full2.json")
        << R"({"format": "trident.plan/1", "model": "gpt-tiny", "cluster": "localhost",
              "training": {"global_batch_size": 8, "seq_length": 32},
              "parallel": {"tp": 1, "pp": 1, "dp": 1, "micro_batch_size": 2,
                           "recompute": {"granularity": "full", "method": "block",
                                         "num_layers": 2}}})";
    for (const char* g : {"none", "selective"}) {
        const auto r = in_folder(dir, "validate --plan full2.json --devices-per-node 1 "
                                      "--recompute " +
                                          std::string(g));
        EXPECT_EQ(r.exit_code, 0) << g << ": " << r.err;
        EXPECT_NE(r.out.find("recompute " + std::string(g) + " ·"), std::string::npos) << r.out;
    }
    // Megatron's defaults: tp and pp 1, dp from the devices; full alone is every layer.
    const std::string job = "--model gpt-tiny --cluster localhost --devices-per-node 1 --mbs 2 "
                            "--gbs 8";
    const auto full = run_trident(split_words("validate " + job + " --recompute full"));
    ASSERT_EQ(full.exit_code, 0) << full.err;
    EXPECT_NE(full.out.find("recompute full (block: 4 of 4 layers per chunk)"), std::string::npos)
        << full.out;
    EXPECT_NE(full.out.find("tp 1 · cp 1 · dp 1 · pp 1"), std::string::npos) << full.out;
    const auto uniform = run_trident(
        split_words("validate " + job + " --recompute full --recompute-method uniform"));
    ASSERT_EQ(uniform.exit_code, 0) << uniform.err;
    EXPECT_NE(uniform.out.find("full (uniform: every layer, in groups of 1)"), std::string::npos)
        << uniform.out;
    const auto run = run_trident(split_words("run " + job + " --steps 1"));
    EXPECT_EQ(run.exit_code, 0) << run.err;
}

TEST(FirstHits, SizesAndRatesInUnitsThatFit) {
    const fs::path dir = folder_with_cpu_host_profile("trident-units");
    const std::string job = "--model gpt-tiny --cluster localhost --devices-per-node 1 --mbs 2 "
                            "--gbs 8";
    const auto sim = in_folder(dir, "simulate " + job);
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    EXPECT_NE(sim.out.find("memory MiB (weights"), std::string::npos) << sim.out;
    EXPECT_EQ(sim.out.find("0.0 (0.0"), std::string::npos) << sim.out;
    EXPECT_EQ(sim.out.find("(peak 0 "), std::string::npos) << sim.out;
    const auto plan =
        in_folder(dir, "plan --model gpt-tiny --cluster localhost --devices-per-node 2 --gbs 8");
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    EXPECT_NE(plan.out.find(" MiB / "), std::string::npos) << plan.out;
    EXPECT_EQ(plan.out.find("0.0/"), std::string::npos) << plan.out;
    const auto tight =
        in_folder(dir, "plan --model gpt-tiny --cluster localhost --gbs 8 --memory-budget 1KiB");
    EXPECT_EQ(tight.exit_code, 2);
    EXPECT_NE(tight.err.find("no layout fits in 1.0 KiB; the smallest needs "), std::string::npos)
        << tight.err;
    const auto run = in_folder(dir, "run " + job + " --steps 1");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run.out.find(" GFLOP/s"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("peak activation memory (largest rank): "), std::string::npos);
    EXPECT_NE(run.out.find(" MiB ("), std::string::npos) << run.out; // 1.1 MiB (… bytes)
}

TEST(FirstHits, RunBannerSaysWhatRuns) {
    const auto r = run_trident(split_words(
        "run --model gpt-tiny --cluster localhost --devices-per-node 1 --mbs 2 --gbs 8 --steps 1 "
        "--recompute full --recompute-num-layers 3 --no-flash-attention --overlap-grad-reduce"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("recompute full (block: 3 of 4 layers per chunk) · sequence parallel off "
                         "· distributed optimizer off · flash attention off · overlap "
                         "grad-reduce on, param-gather off"),
              std::string::npos)
        << r.out;
}
