// `trident run --moe-routing-out`: the routed slots per expert, summed over every MoE layer,
// training micro-batch and rank, written as the histogram moe.load_balance reads.
#include "../support/trident_process.h"
#include "trident/core/model_spec.h"

#include <cstdio>
#include <gtest/gtest.h>
#include <numeric>
#include <string>
#include <vector>

namespace {

// 3 steps of 8 sequences of 32 tokens, each token to 4 of 16 experts in each of 4 MoE layers.
const std::string kJob = " run --model qwen-moe-tiny --cluster localhost --mbs 2 --gbs 8 "
                         "--steps 3 --seed 7 --seq-length 32";
constexpr double kSlots = 3.0 * 8 * 32 * 4 * 4;

struct Routing {
    std::vector<double> tokens_per_expert;
    std::vector<std::vector<double>> passes;
};

Routing routing_of(int ranks, const std::string& layout) {
    const std::string out =
        testing::TempDir() + "trident-routing-" + std::to_string(ranks) + ".json";
    std::remove(out.c_str());
    const std::string command = "mpirun --allow-run-as-root --oversubscribe -np " +
                                std::to_string(ranks) + " " + TRIDENT_BINARY + kJob +
                                " --devices-per-node " + std::to_string(ranks) + " " + layout +
                                " --moe-routing-out " + out;
    const auto r = trident::test::run_shell(command);
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.err;
    // Read back as the simulator reads it: a valid moe.load_balance histogram.
    trident::core::MoeSpec moe;
    moe.num_experts = 16;
    trident::core::read_load_balance(trident::core::Json(out), "moe.load_balance", moe);
    std::remove(out.c_str());
    return {moe.tokens_per_expert, moe.tokens_per_expert_passes};
}

double total(const std::vector<std::vector<double>>& passes) {
    double sum = 0.0;
    for (const auto& pass : passes) sum += std::accumulate(pass.begin(), pass.end(), 0.0);
    return sum;
}

TEST(MoeRouting, EverySlotIsCountedOnceInEveryLayout) {
    const Routing routed_one = routing_of(1, "");
    const std::vector<double>& one = routed_one.tokens_per_expert;
    // Per pass: 3 steps × 4 micro-batches × 4 MoE layers, each 2 · 32 tokens × top-4.
    ASSERT_EQ(routed_one.passes.size(), 48u);
    for (const auto& pass : routed_one.passes)
        EXPECT_EQ(std::accumulate(pass.begin(), pass.end(), 0.0), 2 * 32 * 4);
    ASSERT_EQ(one.size(), 16u);
    EXPECT_EQ(std::accumulate(one.begin(), one.end(), 0.0), kSlots);
    // Tensor ranks under sequence parallelism route their own rows (counted once for the
    // group), data and expert ranks their own tokens; the recomputed forward is not counted.
    const Routing routed_four =
        routing_of(4, "--tp 2 --dp 2 --ep 2 --sequence-parallel --recompute-granularity full "
                      "--recompute-method uniform --recompute-num-layers 1");
    const std::vector<double>& four = routed_four.tokens_per_expert;
    ASSERT_EQ(four.size(), 16u);
    EXPECT_EQ(std::accumulate(four.begin(), four.end(), 0.0), kSlots);
    // Each pass is what the experts of one etp·ep group received: every slot in exactly one.
    EXPECT_EQ(total(routed_four.passes), kSlots);
    EXPECT_EQ(total(routed_one.passes), kSlots);
    // The same tokens meet the same router: the same histogram (up to a near-tie flipping).
    for (std::size_t e = 0; e < one.size(); ++e)
        EXPECT_NEAR(four[e], one[e], 0.01 * kSlots / 16) << "expert " << e;
}

// The simulator reads a run's routing back (--moe-load-balance FILE): with the passes, the
// busiest expert-parallel rank is each pass's busiest on average — above the mean, where the
// run's summed histogram is nearly even — and the simulated step is slower than forced balance.
TEST(MoeRouting, TheSimulatorReplaysTheRunsPasses) {
    const std::string out = testing::TempDir() + "trident-routing-replay.json";
    const std::string layout = " --devices-per-node 2 --dp 2 --ep 2";
    const auto r = trident::test::run_shell("mpirun --allow-run-as-root --oversubscribe -np 2 " +
                                            std::string(TRIDENT_BINARY) + kJob + layout +
                                            " --moe-routing-out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string simulate = std::string(TRIDENT_BINARY) +
                                 " simulate --model qwen-moe-tiny --cluster localhost --mbs 2 "
                                 "--gbs 8 --seq-length 32 --profile " +
                                 TRIDENT_FIXTURES + "/profiles/cpu-host-2-ranks.json" + layout;
    const auto forced = trident::test::run_shell(simulate);
    const auto replayed = trident::test::run_shell(simulate + " --moe-load-balance " + out);
    ASSERT_EQ(forced.exit_code, 0) << forced.err;
    ASSERT_EQ(replayed.exit_code, 0) << replayed.err;
    const auto load_of = [](const std::string& report) {
        const std::string key = "busiest expert-parallel rank at ";
        const auto at = report.find(key);
        return at == std::string::npos ? -1.0 : std::stod(report.substr(at + key.size()));
    };
    EXPECT_EQ(load_of(forced.out), 1.0) << forced.out;
    trident::core::MoeSpec moe;
    moe.num_experts = 16;
    trident::core::read_load_balance(trident::core::Json(out), "moe.load_balance", moe);
    EXPECT_NEAR(load_of(replayed.out), moe.slowest_rank_load(2), 0.006) << replayed.out;
    EXPECT_GT(moe.slowest_rank_load(2), 1.0);
    std::remove(out.c_str());
}

TEST(MoeRouting, ADenseModelIsRefused) {
    const auto r = trident::test::run_shell(std::string(TRIDENT_BINARY) +
                                            " run --model gpt-tiny --cluster localhost --mbs 1 "
                                            "--gbs 1 --devices-per-node 1 --steps 1 "
                                            "--moe-routing-out "
                                            "/tmp/trident-routing-dense.json");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--moe-routing-out"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("no experts"), std::string::npos) << r.err;
}

} // namespace
