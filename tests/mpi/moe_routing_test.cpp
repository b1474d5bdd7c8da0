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

std::vector<double> routing_of(int ranks, const std::string& layout) {
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
    return moe.tokens_per_expert;
}

TEST(MoeRouting, EverySlotIsCountedOnceInEveryLayout) {
    const std::vector<double> one = routing_of(1, "");
    ASSERT_EQ(one.size(), 16u);
    EXPECT_EQ(std::accumulate(one.begin(), one.end(), 0.0), kSlots);
    // Tensor ranks under sequence parallelism route their own rows (counted once for the
    // group), data and expert ranks their own tokens; the recomputed forward is not counted.
    const std::vector<double> four =
        routing_of(4, "--tp 2 --dp 2 --ep 2 --sequence-parallel --recompute-granularity full "
                      "--recompute-method uniform --recompute-num-layers 1");
    ASSERT_EQ(four.size(), 16u);
    EXPECT_EQ(std::accumulate(four.begin(), four.end(), 0.0), kSlots);
    // The same tokens meet the same router: the same histogram (up to a near-tie flipping).
    for (std::size_t e = 0; e < one.size(); ++e)
        EXPECT_NEAR(four[e], one[e], 0.01 * kSlots / 16) << "expert " << e;
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
