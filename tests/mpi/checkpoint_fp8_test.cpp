// Delayed FP8 scaling across a checkpoint: the amax histories are saved beside the shards
// (fp8_amax_history.json, keyed by layer, GEMM, expert and operand), so a resumed run scales
// as the uninterrupted one — bit for bit in the same layout — and a resharded one loads them.
#include "../support/trident_process.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using trident::test::run_shell;

namespace {

const std::string kArgs = " run --model gpt-tiny --cluster localhost --mbs 2 --gbs 8 "
                          "--seq-length 16 --train-iters 12 --seed 11 --lr 1e-3 "
                          "--lr-warmup-iters 2 --fp8-format hybrid --fp8-recipe delayed "
                          "--fp8-amax-history-len 4";
const std::string kPipeline = "mpirun --allow-run-as-root --oversubscribe -np 2 " +
                              std::string(TRIDENT_BINARY) + kArgs +
                              " --devices-per-node 2 --tp 1 --dp 1 --pp 2";

std::map<int, std::string> losses_of(const std::string& output) {
    std::map<int, std::string> losses;
    std::istringstream in(output);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("step ", 0) != 0) continue;
        const auto at = line.find("| loss ");
        losses[std::stoi(line.substr(5))] = line.substr(at + 7, line.find(' ', at + 7) - at - 7);
    }
    return losses;
}

TEST(CheckpointFp8, DelayedScalingResumesAsIfUninterrupted) {
    const auto whole = run_shell(kPipeline);
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    const auto reference = losses_of(whole.out);
    ASSERT_EQ(reference.size(), 12u);

    const fs::path dir = fs::path(testing::TempDir()) / "trident-ckpt-fp8";
    fs::remove_all(dir);
    const auto first = run_shell(kPipeline + " --save " + dir.string() + " --exit-interval 5");
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const fs::path saved = dir / "iter_0000005" / "fp8_amax_history.json";
    ASSERT_TRUE(fs::exists(saved));
    std::ifstream manifest(dir / "iter_0000005" / "manifest.json");
    EXPECT_NE(std::string(std::istreambuf_iterator<char>(manifest), {}).find("fp8_amax_history"),
              std::string::npos);

    // Same layout: the histories carry the scales on, so every loss is the uninterrupted one.
    const auto resumed = run_shell(kPipeline + " --load " + dir.string());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_EQ(resumed.err.find("amax history"), std::string::npos) << resumed.err;
    const auto losses = losses_of(resumed.out);
    ASSERT_EQ(losses.size(), 7u);
    for (const auto& [step, loss] : losses) EXPECT_EQ(loss, reference.at(step)) << "step " << step;

    // Another layout (tp 2 on one stage) finds its operands by key; FP8 layouts agree to 5e-4.
    const auto tp2 = run_shell("mpirun --allow-run-as-root --oversubscribe -np 2 " +
                               std::string(TRIDENT_BINARY) + kArgs +
                               " --devices-per-node 2 --tp 2 --dp 1 --pp 1 --load " + dir.string());
    ASSERT_EQ(tp2.exit_code, 0) << tp2.err;
    EXPECT_EQ(tp2.err.find("amax history"), std::string::npos) << tp2.err;
    for (const auto& [step, loss] : losses_of(tp2.out))
        EXPECT_NEAR(std::stod(loss), std::stod(reference.at(step)),
                    5e-4 * std::stod(reference.at(step)))
            << "tp 2, step " << step;

    // A damaged history file is refused by name, as a damaged shard is.
    {
        std::fstream f(saved, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(20);
        f.put('9');
    }
    const auto damaged = run_shell(kPipeline + " --load " + dir.string());
    EXPECT_EQ(damaged.exit_code, 2);
    EXPECT_NE(damaged.err.find("fp8_amax_history.json"), std::string::npos) << damaged.err;
    EXPECT_NE(damaged.err.find("checksum"), std::string::npos) << damaged.err;
    // `checkpoint verify` checks it with the shards.
    const auto verify =
        run_shell(std::string(TRIDENT_BINARY) + " checkpoint verify --dir " + dir.string());
    EXPECT_NE(verify.exit_code, 0);
    EXPECT_NE(verify.out.find("fp8_amax_history.json"), std::string::npos) << verify.out;
    fs::remove_all(dir);
}

} // namespace
