// A run cut into segments: Megatron's batch ramp-up and a sequence-length schedule against
// hand counts, and the whole run's time summed over segments timed one by one.
#include "../support/gpt2_job.h"
#include "trident/core/job_loader.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/run_segments.h"
#include "trident/simulator/time_to_train.h"

#include <gtest/gtest.h>

namespace trident {
namespace {

TEST(RunSegments, TwoSegmentRampByHand) {
    // Batch 32 → 64 in one increment over 1,000 samples of 1,000 tokens; 3 M tokens in all.
    // 32 per step until 1,000 samples are consumed: ⌈1,000 / 32⌉ = 32 steps (1,024 samples);
    // then 64 per step for the remaining 1,976: ⌈1,976 / 64⌉ = 31 steps.
    const auto segments = simulator::rampup_segments({32, 32, 1000}, 64, 1000, 3e6, "ramp");
    ASSERT_EQ(segments.size(), 2u);
    EXPECT_EQ(segments[0].global_batch_size, 32);
    EXPECT_EQ(segments[0].steps, 32);
    EXPECT_EQ(segments[1].global_batch_size, 64);
    EXPECT_EQ(segments[1].steps, 31);
    EXPECT_EQ(segments[1].seq_length, 1000);
}

TEST(RunSegments, MegatronRampLevels) {
    // 16 → 64 by 16 over 300 samples: three increments of 100 samples each.
    // 16: ⌈100/16⌉ = 7 steps (112); 32: level ⌊112/100⌋ = 1 until 200: ⌈88/32⌉ = 3 (208);
    // 48: until 300: ⌈92/48⌉ = 2 (304); then 64 for the rest of 1,000: ⌈696/64⌉ = 11.
    const auto segments = simulator::rampup_segments({16, 16, 300}, 64, 1, 1000, "ramp");
    ASSERT_EQ(segments.size(), 4u);
    const std::int64_t batches[] = {16, 32, 48, 64}, steps[] = {7, 3, 2, 11};
    for (std::size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(segments[i].global_batch_size, batches[i]) << i;
        EXPECT_EQ(segments[i].steps, steps[i]) << i;
    }
    // A budget inside the ramp ends there.
    const auto short_run = simulator::rampup_segments({16, 16, 300}, 64, 1, 50, "ramp");
    ASSERT_EQ(short_run.size(), 1u);
    EXPECT_EQ(short_run[0].steps, 4); // ⌈50 / 16⌉
}

TEST(RunSegments, RampRefusals) {
    EXPECT_THROW(simulator::rampup_segments({48, 32, 1000}, 64, 1, 1e6, "ramp"), core::SpecError);
    EXPECT_THROW(simulator::rampup_segments({64, 32, 1000}, 64, 1, 1e6, "ramp"), core::SpecError);
    EXPECT_THROW(simulator::rampup_segments({32, 0, 1000}, 64, 1, 1e6, "ramp"), core::SpecError);
}

TEST(RunSegments, SequenceScheduleByHand) {
    const auto stages = simulator::parse_sequence_schedule("4096:1B,8192:100M", "schedule");
    ASSERT_EQ(stages.size(), 2u);
    EXPECT_EQ(stages[1].seq_length, 8192);
    EXPECT_DOUBLE_EQ(stages[1].tokens, 1e8);
    // 512 sequences: ⌈1e9 / 2,097,152⌉ = 477 steps, ⌈1e8 / 4,194,304⌉ = 24.
    const auto segments = simulator::sequence_segments(stages, 512);
    ASSERT_EQ(segments.size(), 2u);
    EXPECT_EQ(segments[0].steps, 477);
    EXPECT_EQ(segments[1].steps, 24);
    for (const char* bad : {"4096", "x:1B", "4096:1B,", "0:1B", "4096:1Q"})
        EXPECT_THROW(simulator::parse_sequence_schedule(bad, "schedule"), core::SpecError) << bad;
}

TEST(RunSegments, TimeToTrainSumsTheSegments) {
    core::JobSpec job = test::gpt2_on_dgx_h100(1, 1, 64, 1000);
    job.cluster.reliability.reset();
    std::vector<simulator::SegmentTime> segments(2);
    segments[0].segment = {32, 1000, 32};
    segments[0].step_time_s = 0.5;
    segments[1].segment = {64, 1000, 31};
    segments[1].step_time_s = 0.9;
    const simulator::TimeToTrain t = simulator::time_to_train(job, segments, 3e6, 1.0);
    EXPECT_EQ(t.steps, 63);
    EXPECT_DOUBLE_EQ(t.trained_tokens, 32 * 32000.0 + 31 * 64000.0);
    EXPECT_DOUBLE_EQ(t.train_s, 32 * 0.5 + 31 * 0.9); // 43.9 s
    EXPECT_DOUBLE_EQ(t.gpu_hours, 8 * 43.9 / 3600);
    ASSERT_EQ(t.segments.size(), 2u);
    EXPECT_DOUBLE_EQ(t.segments[1].train_s, 27.9);
    EXPECT_EQ(simulator::to_json(t).at("segments").size(), 2u);
    EXPECT_NE(simulator::time_to_train_text(t).find("segment 1: batch 32 × 1000 tokens, 32 steps"),
              std::string::npos)
        << simulator::time_to_train_text(t);
}

TEST(RunSegments, SavesRunAcrossSegments) {
    // A short ramp segment is charged at the run's save interval, not its own length: with
    // the same step time everywhere, splitting the run changes nothing.
    const core::JobSpec job = test::gpt2_on_dgx_h100(8, 1, 64, 1000);
    ASSERT_TRUE(job.cluster.reliability.has_value());
    std::vector<simulator::SegmentTime> one(1), two(2);
    one[0].segment = {64, 1000, 100000};
    one[0].step_time_s = 0.5;
    two[0].segment = {64, 1000, 10};
    two[0].step_time_s = 0.5;
    two[1].segment = {64, 1000, 99990};
    two[1].step_time_s = 0.5;
    const simulator::TimeToTrain whole = simulator::time_to_train(job, one, 6.4e9);
    const simulator::TimeToTrain split = simulator::time_to_train(job, two, 6.4e9);
    EXPECT_NEAR(split.wall_s, whole.wall_s, 1e-9 * whole.wall_s);
    EXPECT_EQ(split.goodput->interval_steps, whole.goodput->interval_steps);
    EXPECT_DOUBLE_EQ(split.segments[0].goodput, split.segments[1].goodput);
}

} // namespace
} // namespace trident
