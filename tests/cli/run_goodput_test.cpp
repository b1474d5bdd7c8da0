// `trident run`'s measured goodput: each save's blocking time, this launch's wall time by use,
// and the run so far across a crash (TRIDENT_FAULT_CRASH) and its resume, the steps the crashed
// launch ran past its last save counted as redone.
#include "../support/trident_process.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using trident::test::run_shell;
using trident::test::run_trident;
using trident::test::split_words;

namespace {

nlohmann::json read_json(const fs::path& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
}

TEST(RunGoodput, SavesBlockingTimesAndTheRunAcrossACrash) {
    const fs::path dir = fs::path(testing::TempDir()) / "trident-goodput";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string job = "run --model gpt-tiny --cluster localhost --devices-per-node 1 --mbs 2 "
                            "--gbs 2 --seq-length 32 --train-iters 8 --save-interval 2 --save " +
                            (dir / "ckpt").string();
    // Launch 1 dies after step 5: saved at 2 and 4, step 5 ran past the last save.
    const auto crashed =
        run_shell("TRIDENT_FAULT_CRASH=0:5 " + std::string(TRIDENT_BINARY) + " " + job);
    ASSERT_EQ(crashed.exit_code, 70) << crashed.err;
    const auto ledger = read_json(dir / "ckpt" / "goodput.json");
    EXPECT_EQ(ledger.at("format"), "trident.goodput/1");
    EXPECT_EQ(ledger.at("launches"), 1);
    const double unsaved = ledger.at("unsaved_steps_s").get<double>();
    EXPECT_GT(unsaved, 0.0);
    EXPECT_LT(unsaved, ledger.at("steps_s").get<double>()); // one step of five

    // Launch 2 resumes from step 4 and runs 5 to 8.
    const fs::path metrics = dir / "metrics.json";
    const auto resumed = run_trident(split_words(job + " --load " + (dir / "ckpt").string() +
                                                 " --metrics-json " + metrics.string()));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_NE(
        resumed.out.find("saved " + (dir / "ckpt").string() + "/iter_0000006 (training blocked "),
        std::string::npos)
        << resumed.out;
    EXPECT_NE(resumed.out.find("run so far, 2 launches: goodput "), std::string::npos)
        << resumed.out;
    const auto g = read_json(metrics).at("goodput");
    ASSERT_EQ(g.at("saves").size(), 2u);
    EXPECT_EQ(g.at("saves")[0].at("after_step"), 6);
    EXPECT_EQ(g.at("saves")[1].at("after_step"), 8);
    double blocked = 0.0;
    for (const auto& s : g.at("saves")) {
        EXPECT_GT(s.at("blocking_s").get<double>(), 0.0);
        blocked += s.at("blocking_s").get<double>();
    }
    EXPECT_DOUBLE_EQ(g.at("saves_s").get<double>(), blocked);
    const double wall = g.at("wall_s").get<double>();
    EXPECT_LE(g.at("startup_s").get<double>() + g.at("steps_s").get<double>() +
                  g.at("saves_s").get<double>() + g.at("validation_s").get<double>(),
              wall);
    EXPECT_DOUBLE_EQ(g.at("goodput").get<double>(), g.at("steps_s").get<double>() / wall);
    // The run so far: both launches' time, launch 1's unsaved step redone.
    const auto& all = g.at("run_so_far");
    EXPECT_EQ(all.at("launches"), 2);
    EXPECT_DOUBLE_EQ(all.at("lost_s").get<double>(), unsaved);
    EXPECT_DOUBLE_EQ(all.at("steps_s").get<double>(),
                     g.at("steps_s").get<double>() + ledger.at("steps_s").get<double>());
    EXPECT_DOUBLE_EQ(all.at("wall_s").get<double>(), wall + ledger.at("wall_s").get<double>());
    EXPECT_DOUBLE_EQ(all.at("goodput").get<double>(),
                     (all.at("steps_s").get<double>() - unsaved) / all.at("wall_s").get<double>());

    // A fresh run into the same folder starts a fresh count.
    const auto fresh = run_trident(split_words(job + " --metrics-json " + metrics.string()));
    ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
    EXPECT_EQ(read_json(metrics).at("goodput").at("run_so_far").at("launches"), 1);
    EXPECT_EQ(read_json(dir / "ckpt" / "goodput.json").at("launches"), 1);
}

TEST(RunGoodput, MalformedCrashInjectionIsRefused) {
    const auto r = run_shell("TRIDENT_FAULT_CRASH=zero " + std::string(TRIDENT_BINARY) +
                             " run --model gpt-tiny --cluster localhost --devices-per-node 1 "
                             "--mbs 2 --gbs 2 --seq-length 32");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("TRIDENT_FAULT_CRASH: 'zero' is not RANK:STEP"), std::string::npos)
        << r.err;
}

} // namespace
