// Failures and checkpoints against hand counts: checkpoint bytes and save time, the job's mean
// time between failures, Young's interval, Daly's expected wall time, asynchronous saves, and
// goodput falling as the job grows.
#include "../support/gpt2_job.h"
#include "trident/core/job_loader.h"
#include "trident/core/parameter_count.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/goodput.h"
#include "trident/simulator/time_to_train.h"

#include <cmath>
#include <gtest/gtest.h>

namespace trident {
namespace {

// GPT-2 124M (bf16 weights, fp32 master and moments: 14 bytes per parameter) on `nodes` DGX
// H100 nodes; 8,192 sequences of 1,024 tokens a step, whole on up to 8,192 GPUs.
core::JobSpec gpt2_on(std::int64_t nodes) {
    return test::gpt2_on_dgx_h100(nodes, 1, 8192, 1024);
}

// 1e-4 failures per GPU-hour; the file system writes and reads 10 GB/s, each node 1 GB/s.
core::ClusterReliability hand_reliability() {
    core::ClusterReliability r;
    r.failures_per_gpu_hour = 1e-4;
    r.storage_write_bytes_per_s = 10e9;
    r.storage_read_bytes_per_s = 10e9;
    r.node_storage_bytes_per_s = 1e9;
    r.host_copy_bytes_per_s = 50e9;
    r.relaunch_s = 120.0;
    return r;
}

simulator::GoodputOptions saves(std::optional<std::int64_t> interval_steps, bool async = false) {
    simulator::GoodputOptions o;
    o.save_interval_steps = interval_steps;
    o.async_save = async;
    return o;
}

TEST(Goodput, CheckpointBytesAndSaveTimeByHand) {
    const core::JobSpec job = gpt2_on(8); // 64 GPUs
    ASSERT_EQ(core::count_parameters(job.model).total(), 124439808);
    const simulator::CheckpointCost c = simulator::checkpoint_cost(job, hand_reliability());
    EXPECT_DOUBLE_EQ(c.bytes, 124439808.0 * 14); // 1,742,157,312
    // 8 nodes × 1 GB/s is below the file system's 10 GB/s: 8 GB/s.
    EXPECT_DOUBLE_EQ(c.write_s, 1742157312.0 / 8e9); // 0.2178 s
    EXPECT_DOUBLE_EQ(c.read_s, 1742157312.0 / 8e9);
    // Each GPU stages its 1/64 at 50 GB/s.
    EXPECT_DOUBLE_EQ(c.stage_s, 1742157312.0 / 64 / 50e9);
    // At 16 nodes the file system's 10 GB/s binds.
    EXPECT_DOUBLE_EQ(simulator::checkpoint_cost(gpt2_on(16), hand_reliability()).write_s,
                     1742157312.0 / 10e9);
}

TEST(Goodput, DalyExpectedWallTimeByHand) {
    // M = 10 h, restart 5 min, 1 h of work saved once an hour at 1 min per save:
    // 36,000 · e^(300/36,000) · (e^(3,660/36,000) − 1) = 3,884.757 s.
    EXPECT_NEAR(simulator::expected_wall_s(3600, 3600, 60, 300, 36000), 3884.757057051275, 1e-6);
    // Failures that never come leave the work and its saves: 10 intervals of 100 + 10 s.
    EXPECT_NEAR(simulator::expected_wall_s(1000, 100, 10, 50, 1e15), 1100.0, 1e-6);
}

TEST(Goodput, YoungIntervalAndGoodputByHand) {
    const core::JobSpec job = gpt2_on(8);
    const simulator::Goodput g = simulator::goodput(job, hand_reliability(), 1.5);
    EXPECT_DOUBLE_EQ(g.mtbf_s, 562500.0); // 3,600 / (1e-4 · 64)
    EXPECT_DOUBLE_EQ(g.save_s, 0.217769664);
    EXPECT_DOUBLE_EQ(g.restart_s, 120.0 + 0.217769664);
    EXPECT_TRUE(g.relaunch_counted);
    // sqrt(2 · 0.2178 · 562,500) = 494.97 s = 329.98 steps of 1.5 s: 330.
    EXPECT_NEAR(g.young_interval_s, 494.965526072271, 1e-9);
    EXPECT_EQ(g.interval_steps, 330);
    EXPECT_DOUBLE_EQ(g.interval_s, 495.0);
    EXPECT_NEAR(g.fraction, 0.9989068096504162, 1e-12);
    // An asked-for interval is kept.
    EXPECT_EQ(simulator::goodput(job, hand_reliability(), 1.5, saves(7)).interval_steps, 7);
}

TEST(Goodput, YoungsIntervalIsDalysOptimumToFirstOrder) {
    // Scan every interval: none beats Young's by more than the second-order terms.
    const core::JobSpec job = gpt2_on(8);
    core::ClusterReliability r = hand_reliability();
    r.failures_per_gpu_hour = 1e-2; // M = 5,625 s, so the optimum is sharp
    r.storage_write_bytes_per_s = r.node_storage_bytes_per_s = 0.1e9;
    const simulator::Goodput young = simulator::goodput(job, r, 1.0);
    double best = 0.0;
    for (std::int64_t k = 1; k < 5000; ++k)
        best = std::max(best, simulator::goodput(job, r, 1.0, saves(k)).fraction);
    EXPECT_GT(young.fraction, best - 2e-3) << "Young " << young.interval_steps;
    EXPECT_LE(young.fraction, best);
    // Shorter and longer intervals both lose.
    EXPECT_LT(simulator::goodput(job, r, 1.0, saves(young.interval_steps / 4)).fraction,
              young.fraction);
    EXPECT_LT(simulator::goodput(job, r, 1.0, saves(young.interval_steps * 4)).fraction,
              young.fraction);
}

TEST(Goodput, AsyncSaveBlocksOnlyWhileStaging) {
    const core::JobSpec job = gpt2_on(8);
    core::ClusterReliability r = hand_reliability();
    r.storage_write_bytes_per_s = r.node_storage_bytes_per_s = 0.01e9; // write: 174 s
    const simulator::Goodput sync = simulator::goodput(job, r, 1.0);
    const simulator::Goodput async = simulator::goodput(job, r, 1.0, saves(std::nullopt, true));
    EXPECT_DOUBLE_EQ(async.save_s, 1742157312.0 / 64 / 50e9);
    // The background write must end before the next save: at least 175 steps apart.
    EXPECT_GE(async.interval_s, async.checkpoint.write_s);
    EXPECT_GT(async.fraction, sync.fraction);
    // Asked to save more often than the write takes, it blocks for the rest of the write.
    const simulator::Goodput rushed = simulator::goodput(job, r, 1.0, saves(100, true));
    EXPECT_DOUBLE_EQ(rushed.save_s, async.save_s + async.checkpoint.write_s - 100.0);
    r.host_copy_bytes_per_s = 0;
    EXPECT_THROW(simulator::goodput(job, r, 1.0, saves(std::nullopt, true)), core::SpecError);
}

TEST(Goodput, FallsAsTheJobGrows) {
    // Per-node storage keeps the save time × failure rate constant; the fixed relaunch and the
    // file system's cap make each failure cost a growing share.
    double previous = 1.0;
    for (const std::int64_t nodes : {8, 16, 64, 256, 1024}) {
        const core::JobSpec job = gpt2_on(nodes);
        const double fraction = simulator::goodput(job, hand_reliability(), 0.5).fraction;
        EXPECT_LT(fraction, previous) << nodes << " nodes";
        previous = fraction;
    }
}

TEST(Goodput, TimeToTrainCountsFailuresAndSaves) {
    core::JobSpec job = gpt2_on(8);
    job.cluster.reliability = hand_reliability();
    const simulator::TimeToTrain t =
        simulator::time_to_train(job, 1.5, 1e9, 2.0, saves(std::nullopt));
    ASSERT_TRUE(t.goodput.has_value());
    EXPECT_EQ(t.steps, 120); // ceil(1e9 / 8,388,608)
    EXPECT_DOUBLE_EQ(t.train_s, 120 * 1.5);
    EXPECT_DOUBLE_EQ(t.wall_s, t.train_s / t.goodput->fraction);
    EXPECT_DOUBLE_EQ(t.failures, t.wall_s / 562500.0);
    EXPECT_DOUBLE_EQ(t.gpu_hours, 64 * t.wall_s / 3600);
    EXPECT_DOUBLE_EQ(*t.cost, 2.0 * t.gpu_hours);
    // A run shorter than Young's interval (330 steps) saves once, at its end.
    EXPECT_EQ(t.goodput->interval_steps, 120);
    const simulator::TimeToTrain long_run = simulator::time_to_train(job, 1.5, 1e12);
    EXPECT_EQ(simulator::to_json(long_run).at("failures").at("save_interval_steps"), 330);
}

TEST(Goodput, ClusterReliabilityFields) {
    const core::Json cluster = core::Json::parse(R"({
        "nodes": 2, "devices_per_node": 8, "device": "h100-sxm5-80gb",
        "intra_node_fabric": "nvlink", "inter_node_fabric": "infiniband",
        "reliability": {"failures_per_node_hour": 0.001, "storage_write_gb_per_s": 40,
                        "storage_read_gb_per_s": 80, "relaunch_s": 600}})");
    const core::ClusterSpec c = core::cluster_from_json(cluster);
    ASSERT_TRUE(c.reliability.has_value());
    EXPECT_DOUBLE_EQ(c.reliability->failures_per_node_hour, 0.001);
    EXPECT_DOUBLE_EQ(c.reliability->storage_write_bytes_per_s, 40e9);
    EXPECT_DOUBLE_EQ(c.reliability->storage_read_bytes_per_s, 80e9);
    EXPECT_EQ(c.reliability->relaunch_s, 600.0);
    // Written back as read.
    EXPECT_EQ(core::to_json(c)["reliability"]["storage_write_gb_per_s"], 40.0);
    core::Json none = cluster;
    none["reliability"]["failures_per_node_hour"] = 0;
    try {
        (void)core::cluster_from_json(none);
        FAIL() << "no failure rate accepted";
    } catch (const core::SpecError& e) {
        EXPECT_EQ(e.field(), "cluster.reliability.failures_per_gpu_hour");
    }
    core::Json typo = cluster;
    typo["reliability"]["storage_write_gbps"] = 1;
    EXPECT_THROW((void)core::cluster_from_json(typo), core::SpecError);
}

} // namespace
} // namespace trident
