// The profile `trident profile --backend cpu|cuda` writes, from made-up timings: it must load
// with core::Profile::from_json, answer lookups from the tables it was given, and derive the
// peak and the fabric's α and bandwidth by the same rule for both backends.
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"
#include "trident/executor/measured_profile.h"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>

namespace trident::executor {
namespace {

// A GPU at ~500 TFLOP/s for GEMMs and 3 TB/s for memory, with optional 2- and 4-GPU NCCL tables.
ProfileMeasurements made_up(bool collectives) {
    ProfileMeasurements m;
    m.name = "test-gpu";
    m.dtype = core::Dtype::bf16;
    m.fabric = "nvlink";
    m.method = "Made up for a test.";
    m.measured_on = std::string("testhost: ") + (collectives ? "4" : "1") + " × Made-up GPU";
    m.memory_bytes = 80e9;
    m.memory_bandwidth_bytes_per_s = 3e12;
    m.date = "2026-11-30T00:00:00Z";
    m.command = "trident profile --backend cuda --quick";
    for (std::int64_t a : {256, 1024, 4096})
        for (std::int64_t b : {256, 1024, 4096})
            for (std::int64_t c : {256, 1024, 4096})
                m.gemm.push_back({a, b, c, 2.0 * double(a * b * c) / 5e14 + 5e-6});
    for (std::int64_t d : {64, 128})
        for (std::int64_t bh : {8, 32})
            for (std::int64_t t : {512, 2048}) {
                const double f = 2.0 * double(bh * t * t * d) / 2e14;
                m.attention.push_back({bh, t, d, f, 2.5 * f});
            }
    for (const auto name : core::kMemoryKernelNames)
        for (double bytes : {1e6, 1e8, 1e9})
            m.memory_bound[std::string(name)].push_back({bytes, bytes / 3e12 + 3e-6});
    if (collectives)
        for (const auto name : core::kCollectiveNames)
            for (std::int64_t g : {2, 4})
                for (double bytes : {1e3, 1e6, 1e9})
                    if (name != "send_recv" || g == 2)
                        m.collectives.push_back({std::string(name), g, bytes, 1e-5 + bytes / 2e11});
    return m;
}

TEST(MeasuredProfile, OneGpuLoadsWithoutCollectiveTables) {
    const core::Json j = measured_profile_json(made_up(false));
    const core::Profile p = core::Profile::from_json(j);
    EXPECT_EQ(p.name(), "test-gpu");
    EXPECT_EQ(p.provenance().kind, "measured");
    EXPECT_NE(p.provenance().method.find("No collective tables"), std::string::npos);
    EXPECT_TRUE(p.has_fabric("nvlink"));
    EXPECT_TRUE(j["fabrics"]["nvlink"]["collectives"].empty());
    // Peak = the best GEMM rate; bandwidth = the streaming rate given; placeholders for the
    // fabric.
    EXPECT_DOUBLE_EQ(j["fabrics"]["nvlink"]["alpha_s"].get<double>(), 1e-6);
    EXPECT_DOUBLE_EQ(j["fabrics"]["nvlink"]["bus_bandwidth_bytes_per_s"].get<double>(), 3e12);
    EXPECT_NEAR(p.peak_flops_per_s(core::Dtype::bf16),
                2.0 * 4096.0 * 4096 * 4096 / (2.0 * 4096.0 * 4096 * 4096 / 5e14 + 5e-6), 1e9);
    EXPECT_DOUBLE_EQ(p.memory_bandwidth_bytes_per_s(), 3e12);
    EXPECT_DOUBLE_EQ(p.memory_bytes(), 80e9);
}

TEST(MeasuredProfile, LookupsReturnTheMeasuredTimes) {
    const core::Profile p = core::Profile::from_json(measured_profile_json(made_up(false)));
    const core::Timing g = p.gemm(core::Dtype::bf16, 1024, 1024, 1024);
    EXPECT_TRUE(g.fallback.empty());
    EXPECT_NEAR(g.seconds, 2.0 * 1024.0 * 1024 * 1024 / 5e14 + 5e-6, 1e-9);
    const core::Timing a = p.attention(core::Dtype::bf16, 32, 2048, 128, true, true);
    EXPECT_TRUE(a.fallback.empty());
    EXPECT_NEAR(a.seconds, 2.5 * 2.0 * 32.0 * 2048 * 2048 * 128 / 2e14, 1e-9);
    const core::Timing mb = p.memory_bound(core::MemoryKernel::adamw, 1e8);
    EXPECT_NEAR(mb.seconds, 1e8 / 3e12 + 3e-6, 1e-9);
}

TEST(MeasuredProfile, GroupedGemmTimingsBecomeTheGroupedTable) {
    ProfileMeasurements m = made_up(false);
    EXPECT_FALSE(measured_profile_json(m)["kernels"].contains("grouped_gemm")); // optional
    for (std::int64_t g : {2, 8})
        for (std::int64_t a : {16, 256})
            for (std::int64_t b : {256, 1024})
                for (std::int64_t c : {16, 256})
                    m.grouped_gemm.push_back({g, a, b, c, double(g) * (a * b * c / 1e14 + 5e-6)});
    const core::Profile p = core::Profile::from_json(measured_profile_json(m));
    const core::Timing t = p.grouped_gemm(core::Dtype::bf16, 8, 256, 1024, 16);
    EXPECT_TRUE(t.fallback.empty()) << t.fallback;
    EXPECT_NEAR(t.seconds, 8 * (256.0 * 1024 * 16 / 1e14 + 5e-6), 1e-12);
    m.grouped_gemm[1].seconds = -1.0;
    EXPECT_THROW(measured_profile_json(m), std::invalid_argument);
}

TEST(MeasuredProfile, CollectivesBecomeTheNvlinkFabric) {
    const core::Json j = measured_profile_json(made_up(true));
    const core::Profile p = core::Profile::from_json(j);
    EXPECT_NE(p.provenance().method.find("smallest send/recv"), std::string::npos);
    const core::Timing t = p.collective("nvlink", core::Collective::all_reduce, 4, 1e6);
    EXPECT_TRUE(t.fallback.empty());
    EXPECT_NEAR(t.seconds, 1e-5 + 1e6 / 2e11, 1e-9);
    EXPECT_DOUBLE_EQ(j["fabrics"]["nvlink"]["alpha_s"].get<double>(), 1e-5 + 1e3 / 2e11);
    // All-reduce bus bandwidth at 4 GPUs, largest message: algbw · 2·3/4.
    EXPECT_NEAR(j["fabrics"]["nvlink"]["bus_bandwidth_bytes_per_s"].get<double>(),
                1e9 / (1e-5 + 1e9 / 2e11) * 1.5, 1e3);
}

TEST(MeasuredProfile, RejectsMissingOrNonPositiveTables) {
    ProfileMeasurements m = made_up(false);
    m.memory_bound.erase("swiglu");
    EXPECT_THROW(measured_profile_json(m), std::invalid_argument);
    m = made_up(false);
    m.gemm[3].seconds = 0.0;
    EXPECT_THROW(measured_profile_json(m), std::invalid_argument);
    m = made_up(true);
    m.collectives[0].collective = "all_reduce_fast";
    EXPECT_THROW(measured_profile_json(m), std::invalid_argument);
}

TEST(MeasuredProfile, ACpuProfileUsesFp32AndTheShmFabricByTheSameRule) {
    ProfileMeasurements m = made_up(true);
    m.name = "cpu-host";
    m.dtype = core::Dtype::fp32;
    m.fabric = "shm";
    m.collectives.erase(std::remove_if(m.collectives.begin(), m.collectives.end(),
                                       [](const CollectiveTiming& c) { return c.group != 2; }),
                        m.collectives.end());
    const core::Json j = measured_profile_json(m);
    const core::Profile p = core::Profile::from_json(j);
    EXPECT_TRUE(p.has_fabric("shm"));
    EXPECT_FALSE(p.has_fabric("nvlink"));
    EXPECT_GT(p.peak_flops_per_s(core::Dtype::fp32), 4e14);
    EXPECT_TRUE(p.gemm(core::Dtype::fp32, 1024, 1024, 1024).fallback.empty());
    // α from the smallest send/recv; bandwidth: all-reduce of 2 (bus factor 1).
    EXPECT_DOUBLE_EQ(j["fabrics"]["shm"]["alpha_s"].get<double>(), 1e-5 + 1e3 / 2e11);
    EXPECT_NEAR(j["fabrics"]["shm"]["bus_bandwidth_bytes_per_s"].get<double>(),
                1e9 / (1e-5 + 1e9 / 2e11), 1e3);
    // The CPU backend runs kernels synchronously: no host issue time is written or modelled.
    EXPECT_FALSE(j["device"].contains("host_op_issue_s"));
    EXPECT_EQ(p.host_op_issue_s(), 0.0);
    // Unless said, collectives leave compute alone (a GPU's NCCL figure is not measured).
    EXPECT_EQ(p.overlap_slowdown(), 0.0);
}

TEST(MeasuredProfile, CollectivesThatBlockTheRankTakeItsWholeCompute) {
    ProfileMeasurements m = made_up(true);
    m.communication_blocks_compute = true; // the CPU backend's blocking MPI, one core a rank
    const core::Json j = measured_profile_json(m);
    EXPECT_EQ(j["device"]["sms"], 1);
    EXPECT_EQ(j["device"]["communication_sms"], 1);
    const core::Profile p = core::Profile::from_json(j);
    EXPECT_DOUBLE_EQ(p.overlap_slowdown(), 1.0);
    EXPECT_DOUBLE_EQ(p.overlap_slowdown("nvlink"), 1.0);
}

TEST(MeasuredProfile, AMeasuredLaunchRateBecomesTheHostIssueTime) {
    ProfileMeasurements m = made_up(false);
    m.host_op_issue_s = 3.5e-6;
    const core::Profile p = core::Profile::from_json(measured_profile_json(m));
    EXPECT_DOUBLE_EQ(p.host_op_issue_s(), 3.5e-6);
}

} // namespace
} // namespace trident::executor

namespace trident::executor {
namespace {

TEST(CollectiveSweep, OneTableForBothProfilers) {
    // nccl-tests' conventions: whole buffers for all-reduce and broadcast, per-rank blocks for
    // all-gather, reduce-scatter and all-to-all (recording the whole buffer), send/recv in
    // pairs only.
    const auto pairs = collective_sweep({4096.0, 1 << 20}, 2);
    ASSERT_EQ(pairs.size(), 12u);
    EXPECT_EQ(pairs[0].collective, core::Collective::all_reduce);
    EXPECT_EQ(pairs[0].count, 1024u);
    EXPECT_EQ(pairs[1].collective, core::Collective::all_gather);
    EXPECT_EQ(pairs[1].count, 512u);
    EXPECT_DOUBLE_EQ(pairs[1].recorded_bytes, 4096.0);
    EXPECT_EQ(pairs[5].collective, core::Collective::send_recv);
    const auto fours = collective_sweep({4000.0}, 4);
    ASSERT_EQ(fours.size(), 5u); // no send/recv in a group of four
    EXPECT_EQ(fours[3].collective, core::Collective::all_to_all);
    EXPECT_EQ(fours[3].count, 250u);
    // Rows only for what a backend measured.
    const auto rows = run_collective_sweep(fours, [](const SweepPoint& p) {
        return p.collective == core::Collective::broadcast ? 0.0 : 1e-3;
    });
    ASSERT_EQ(rows.size(), 4u);
    EXPECT_EQ(rows[0].collective, "all_reduce");
    EXPECT_EQ(rows[0].group, 4);
    EXPECT_DOUBLE_EQ(rows[0].bytes, 4000.0);
}

} // namespace
} // namespace trident::executor
