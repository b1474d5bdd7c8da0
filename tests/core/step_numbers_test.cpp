// The numbers every part shares, each against a hand-computed value.
#include "trident/core/step_numbers.h"

#include <gtest/gtest.h>

namespace trident::core {
namespace {

TEST(StepNumbers, MegatronsBucketGrowsWithTheDataGroup) {
    EXPECT_EQ(ddp_bucket_elements(1), 40'000'000);
    EXPECT_EQ(ddp_bucket_elements(40), 40'000'000);
    EXPECT_EQ(ddp_bucket_elements(128), 128'000'000);
}

TEST(StepNumbers, StateBytesPerParameter) {
    const Precision mixed; // bf16 weights, fp32 gradients, master copy and Adam moments
    EXPECT_DOUBLE_EQ(optimizer_state_bytes_per_parameter(mixed), 12.0);
    EXPECT_DOUBLE_EQ(state_bytes_per_parameter(mixed, 1), 18.0);           // Megatron's 18 bytes
    EXPECT_DOUBLE_EQ(state_bytes_per_parameter(mixed, 8), 6.0 + 12.0 / 8); // 6 + 12/DP
    // Master copy held whole, moments sharded (the CUDA executor's layout).
    EXPECT_DOUBLE_EQ(state_bytes_per_parameter(mixed, 8, false), 6.0 + 4.0 + 8.0 / 8);
    // The CPU executor: fp32 weights and gradients, no separate master copy.
    EXPECT_DOUBLE_EQ(state_bytes_per_parameter(cpu_executor_precision(), 1), 16.0);
    EXPECT_DOUBLE_EQ(state_bytes_per_parameter(cpu_executor_precision(), 4), 8.0 + 2.0);
}

TEST(StepNumbers, UtilizationAndBubble) {
    // 8 devices at 100 TFLOP/s peak doing 400 TFLOP in 1 s: 50 TFLOP/s each, 50 %.
    EXPECT_DOUBLE_EQ(flops_per_device_s(400e12, 1.0, 8), 50e12);
    EXPECT_DOUBLE_EQ(flops_utilization(400e12, 1.0, 8, 100e12), 0.5);
    EXPECT_DOUBLE_EQ(flops_utilization(400e12, 0.0, 8, 100e12), 0.0);
    EXPECT_DOUBLE_EQ(idle_seconds(10.0, 7.5), 2.5);
    EXPECT_DOUBLE_EQ(idle_seconds(10.0, 12.0), 0.0);
    EXPECT_DOUBLE_EQ(bubble_fraction(2.5, 10.0), 0.25);
    EXPECT_DOUBLE_EQ(bubble_fraction(1.0, 0.0), 0.0);
}

} // namespace
} // namespace trident::core
