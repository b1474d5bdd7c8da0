// A token budget at a step time: steps, wall time, GPU-hours and cost against hand counts.
#include "../support/gpt2_job.h"
#include "trident/core/job_loader.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/time_to_train.h"

#include <gtest/gtest.h>

namespace trident {
namespace {

// GPT-2 124M on 8 DGX H100 nodes (64 GPUs), 512 sequences of 1,024 tokens: 524,288 per step.
core::JobSpec sixty_four_gpus() {
    core::JobSpec job = test::gpt2_on_dgx_h100(8, 8, 512, 1024);
    job.cluster.reliability.reset(); // step time only; failures are tests/simulator/goodput_test
    return job;
}

TEST(TimeToTrain, TokenCountsInPapersUnits) {
    EXPECT_DOUBLE_EQ(simulator::parse_token_count("15T", "f"), 15e12);
    EXPECT_DOUBLE_EQ(simulator::parse_token_count("300B", "f"), 300e9);
    EXPECT_DOUBLE_EQ(simulator::parse_token_count("300G", "f"), 300e9);
    EXPECT_DOUBLE_EQ(simulator::parse_token_count("2.5M", "f"), 2.5e6);
    EXPECT_DOUBLE_EQ(simulator::parse_token_count("2.5e12", "f"), 2.5e12);
    EXPECT_DOUBLE_EQ(simulator::parse_token_count("1000", "f"), 1000.0);
    for (const char* bad : {"", "15X", "T", "-5", "0.5", "15 T", "1e30"}) {
        try {
            simulator::parse_token_count(bad, "--train-tokens");
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const core::SpecError& e) {
            EXPECT_EQ(e.field(), "--train-tokens");
        }
    }
}

TEST(TimeToTrain, StepsWallTimeGpuHoursAndCostByHand) {
    const core::JobSpec job = sixty_four_gpus();
    ASSERT_EQ(job.training.tokens_per_step(), 524288); // 512 × 1,024
    // 1e9 tokens: ceil(1e9 / 524,288) = 1,908 steps (the last one partly past the budget).
    const simulator::TimeToTrain t = simulator::time_to_train(job, 1.5, 1e9, 2.5);
    EXPECT_EQ(t.steps, 1908);
    EXPECT_DOUBLE_EQ(t.trained_tokens, 1908.0 * 524288.0);
    EXPECT_DOUBLE_EQ(t.train_s, 1908 * 1.5);               // 2,862 s
    EXPECT_DOUBLE_EQ(t.gpu_hours, 64.0 * 2862.0 / 3600.0); // 50.88
    ASSERT_TRUE(t.cost.has_value());
    EXPECT_DOUBLE_EQ(*t.cost, 2.5 * 64.0 * 2862.0 / 3600.0); // 127.2
    EXPECT_EQ(simulator::time_to_train_text(t),
              "1 B tokens: 1.91 K steps, 47.7 minutes of steps, 50.9 GPU-hours, cost 127 (step "
              "time only: the cluster gives no reliability figures)");
    // A budget of exactly whole steps needs no extra one; no price, no cost.
    const simulator::TimeToTrain exact = simulator::time_to_train(job, 2.0, 524288.0 * 10);
    EXPECT_EQ(exact.steps, 10);
    EXPECT_FALSE(exact.cost.has_value());
    EXPECT_FALSE(simulator::to_json(exact).contains("cost"));
    EXPECT_EQ(simulator::to_json(t)["steps"], 1908);
}

TEST(TimeToTrain, DaysForLongRuns) {
    // 15T tokens at 3 s per 524,288-token step: 28,610,230 steps, 993 days.
    const simulator::TimeToTrain t = simulator::time_to_train(sixty_four_gpus(), 3.0, 15e12);
    EXPECT_EQ(t.steps, 28610230);
    EXPECT_NE(
        simulator::time_to_train_text(t).find("28.6 M steps, 993 days of steps, 1.53 M GPU-hours"),
        std::string::npos)
        << simulator::time_to_train_text(t);
}

} // namespace
} // namespace trident
