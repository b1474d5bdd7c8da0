// The executor's correctness: 4 steps of a tiny GPT (fp32, fixed seed) give the same loss in
// every layout as in one process, within 1e-5 relative. Runs `trident run` under mpirun.
#include "../cli/run_command.h"

#include <cmath>
#include <cstdlib>
#include <gtest/gtest.h>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::string kCommon = " --cluster localhost --mbs 2 --gbs 8 --steps 4 --seed 7";

std::vector<double> losses_of(const std::string& output) {
    std::vector<double> losses;
    std::istringstream in(output);
    for (std::string line; std::getline(in, line);) {
        const auto at = line.find("| loss ");
        if (line.rfind("step ", 0) == 0 && at != std::string::npos) losses.push_back(std::stod(line.substr(at + 7)));
    }
    return losses;
}

std::vector<double> run(int ranks, const std::string& model, const std::string& layout) {
    std::string command = "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(ranks) + " " +
                          TRIDENT_BINARY + " run --model " + model + kCommon + " --devices-per-node " +
                          std::to_string(ranks) + " " + layout;
    const auto r = trident::test::run_shell(command);
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.err;
    return losses_of(r.out);
}

struct Layout {
    int ranks;
    const char* model;
    const char* layout;
};

class Layouts : public testing::TestWithParam<Layout> {};

TEST_P(Layouts, LossesMatchOneProcess) {
    const Layout& l = GetParam();
    const auto reference = run(1, l.model, "--tp 1 --pp 1 --dp 1");
    const auto losses = run(l.ranks, l.model, l.layout);
    ASSERT_EQ(reference.size(), 4u);
    ASSERT_EQ(losses.size(), reference.size()) << l.layout;
    for (std::size_t i = 0; i < losses.size(); ++i)
        EXPECT_NEAR(losses[i], reference[i], 1e-5 * std::fabs(reference[i])) << l.layout << " step " << i + 1;
    EXPECT_LT(reference.back(), reference.front()); // it learns
}

const std::string kEight = std::string(TRIDENT_TEST_DATA) + "/models/gpt-tiny-8-layers.json";

INSTANTIATE_TEST_SUITE_P(
    Executor, Layouts,
    testing::Values(Layout{2, "gpt-tiny", "--tp 2 --pp 1 --dp 1"}, Layout{2, "gpt-tiny", "--tp 1 --pp 2 --dp 1"},
                    Layout{2, "gpt-tiny", "--tp 1 --pp 1 --dp 2"}, Layout{4, "gpt-tiny", "--tp 2 --pp 2 --dp 1"},
                    Layout{4, "gpt-tiny", "--tp 2 --pp 1 --dp 2"}, Layout{4, "gpt-tiny", "--tp 1 --pp 2 --dp 2"},
                    Layout{2, "gpt-tiny", "--tp 1 --pp 2 --dp 1 --schedule zero-bubble-h1"},
                    Layout{2, "gpt-tiny", "--tp 1 --pp 2 --dp 1 --schedule gpipe"},
                    Layout{2, "gpt-tiny", "--tp 1 --pp 1 --dp 2 --distributed-optimizer"},
                    Layout{4, kEight.c_str(), "--tp 1 --pp 4 --dp 1 --vpp 2"},
                    Layout{2, "llama-tiny", "--tp 2 --pp 1 --dp 1"},
                    Layout{2, "llama-tiny", "--tp 1 --pp 2 --dp 1"},
                    Layout{2, "gpt-tiny", "--tp 2 --pp 1 --dp 1 --recompute selective"},
                    Layout{2, "gpt-tiny", "--tp 2 --pp 1 --dp 1 --sequence-parallel"},
                    Layout{4, "llama-tiny", "--tp 2 --pp 2 --dp 1 --sequence-parallel"},
                    Layout{2, "moe-tiny", "--tp 1 --pp 1 --dp 2 --ep 2"},
                    Layout{2, "moe-tiny", "--tp 1 --pp 1 --dp 2 --ep 1"},
                    Layout{4, "moe-tiny", "--tp 1 --pp 2 --dp 2 --ep 2"},
                    Layout{2, "gpt-tiny", "--tp 1 --pp 2 --dp 1 --recompute full --recompute-num-layers 1"}),
    [](const testing::TestParamInfo<Layout>& info) { return "layout_" + std::to_string(info.index); });

double peak_activation_bytes(const std::string& output) {
    const auto at = output.find("peak activation bytes (largest rank): ");
    return at == std::string::npos ? -1.0 : std::stod(output.substr(at + 38));
}

TEST(Recomputation, SameLossLessActivationMemory) {
    // Two stages: the first holds two micro-batches' activations under 1F1B.
    std::vector<double> peaks;
    std::vector<std::vector<double>> losses;
    for (const char* policy : {"--recompute none", "--recompute selective", "--recompute full --recompute-num-layers 2"}) {
        const std::string command = "mpirun --allow-run-as-root --oversubscribe -np 2 " + std::string(TRIDENT_BINARY) +
                                    " run --model gpt-tiny" + kCommon + " --devices-per-node 2 --tp 1 --pp 2 --dp 1 " + policy;
        const auto r = trident::test::run_shell(command);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        peaks.push_back(peak_activation_bytes(r.out));
        losses.push_back(losses_of(r.out));
    }
    EXPECT_EQ(losses[1], losses[0]); // recomputation repeats the same arithmetic
    EXPECT_EQ(losses[2], losses[0]);
    EXPECT_GT(peaks[0], peaks[1]);   // selective drops the attention probabilities
    EXPECT_GT(peaks[1], peaks[2]);   // full keeps only each layer's input
}

} // namespace
