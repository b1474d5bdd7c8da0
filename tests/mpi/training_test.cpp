// Training on real text: the license texts every Debian system ships (package base-files,
// /usr/share/common-licenses) → `trident tokenizer train` → `trident preprocess` → two ranks of
// `trident run` with a validation split. The validation loss must fall clearly. Also the
// single-host `trident launch`, run for real.
#include "../support/trident_process.h"
#include "trident/core/json_io.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

namespace fs = std::filesystem;
using trident::test::run_shell;
using trident::test::run_trident;

namespace {

const char* kLicenses[] = {"Apache-2.0", "Artistic", "BSD",     "CC0-1.0", "GFDL-1.2",
                           "GFDL-1.3",   "GPL-1",    "GPL-2",   "GPL-3",   "LGPL-2",
                           "LGPL-2.1",   "LGPL-3",   "MPL-1.1", "MPL-2.0"};

std::vector<double> validation_losses(const std::string& output) {
    std::vector<double> losses;
    std::istringstream in(output);
    for (std::string line; std::getline(in, line);)
        if (line.rfind("validation after step", 0) == 0)
            losses.push_back(std::stod(line.substr(line.find("| loss ") + 7)));
    return losses;
}

} // namespace

TEST(Training, ValidationLossFallsOnTheShippedCorpus) {
    std::vector<std::string> inputs;
    for (const char* name : kLicenses)
        if (fs::exists(fs::path("/usr/share/common-licenses") / name))
            inputs.push_back((fs::path("/usr/share/common-licenses") / name).string());
    if (inputs.size() < 10) GTEST_SKIP() << "no /usr/share/common-licenses (not Debian?)";
    const fs::path dir = fs::path(testing::TempDir()) / "trident-training";
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::vector<std::string> args{"tokenizer", "train",        "--vocab-size",
                                  "1024",      "--output-dir", (dir / "tok").string(),
                                  "--input"};
    args.insert(args.end(), inputs.begin(), inputs.end());
    const auto tok = run_trident(args);
    ASSERT_EQ(tok.exit_code, 0) << tok.err;
    args = {"preprocess",
            "--tokenizer",
            (dir / "tok").string(),
            "--output-prefix",
            (dir / "licenses").string(),
            "--input"};
    args.insert(args.end(), inputs.begin(), inputs.end());
    const auto pre = run_trident(args);
    ASSERT_EQ(pre.exit_code, 0) << pre.err;

    const auto r = run_shell(
        std::string("mpirun --allow-run-as-root --oversubscribe -np 2 ") + TRIDENT_BINARY +
        " run --model gpt-demo --cluster localhost --devices-per-node 2 --tp 1 --pp 1 --dp 2 "
        "--mbs 4 --gbs 16 --seq-length 64 --train-iters 120 --lr 1e-3 --min-lr 1e-4 "
        "--lr-warmup-iters 10 --data-path " +
        (dir / "licenses").string() + " --split 98,2,0 --eval-interval 40 --eval-iters 1" +
        " --metrics-json " + (dir / "metrics.json").string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("validation 16 documents"), std::string::npos) << r.out;
    // The figures from --metrics-json, which must say what the log lines say.
    const trident::core::Json metrics =
        trident::core::read_json_file((dir / "metrics.json").string(), "metrics");
    EXPECT_EQ(metrics.at("format"), "trident.metrics/1");
    EXPECT_EQ(metrics.at("steps").size(), 120u);
    EXPECT_EQ(metrics.at("last_step"), 120);
    std::vector<double> losses;
    for (const auto& v : metrics.at("validation")) losses.push_back(v.at("loss").get<double>());
    const auto printed = validation_losses(r.out);
    ASSERT_EQ(losses.size(), 3u) << r.out;
    ASSERT_EQ(printed.size(), 3u) << r.out;
    for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(losses[i], printed[i], 1e-6 * printed[i]);
    EXPECT_EQ(metrics.at("validation")[2].at("after_step"), 120);
    // From a uniform guess over 1,024 tokens (ln 1024 = 6.93) to well below it, and falling.
    EXPECT_LT(losses.back(), 0.8 * std::log(1024.0)) << r.out;
    EXPECT_LT(losses.back(), losses.front() - 0.3) << r.out;
}

TEST(Training, LaunchRunsAPlanOnThisHost) {
    const fs::path hostfile = fs::path(testing::TempDir()) / "trident-localhost";
    std::ofstream(hostfile) << "localhost slots=2\n";
    const auto r =
        run_trident({"launch", "--plan",
                     std::string(TRIDENT_FIXTURES) + "/plans/gpt-tiny-dp2.json", "--hostfile",
                     hostfile.string(), "--mpirun-args", "--oversubscribe", "--", "--steps", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("training gpt-tiny on 2 ranks: tp 1 · pp 1 · dp 2"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("step 2/2 | loss "), std::string::npos) << r.out;
}

TEST(Training, NonFiniteGradientsSkipTheStepAndAreCounted) {
    // A learning rate of 1000 blows the weights up after the first update: every later step's
    // gradients are non-finite, and each must be skipped (no update), logged and counted.
    const auto r = run_shell(std::string("mpirun --allow-run-as-root --oversubscribe -np 1 ") +
                             TRIDENT_BINARY +
                             " run --model gpt-tiny --cluster localhost --devices-per-node 1 "
                             "--tp 1 --pp 1 --dp 1 --mbs 2 --gbs 4 --seq-length 16 "
                             "--train-iters 5 --lr 1000 --clip-grad 0");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find("step 1/5 | loss nan"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("skipped (non-finite gradients; 4 so far)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("skipped 4 steps with non-finite gradients"), std::string::npos) << r.out;
}
