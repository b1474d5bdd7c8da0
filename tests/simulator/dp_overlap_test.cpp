// The data-parallel gradient reduction chunk by chunk, as Megatron-Core starts it: each model
// chunk's reduce-scatter once its gradients of the last micro-batch are made, one bucket per
// chunk beyond the first pipeline rank, on one stream (simulate.cpp reduce_gradients).
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/simulator/simulate.h"

#include <algorithm>
#include <gtest/gtest.h>

using namespace trident;

namespace {

core::JobSpec interleaved() {
    core::JobInputs in;
    in.model = "llama3-8b";
    in.cluster = "dgx-h100";
    in.nodes = 8;
    in.tp = 2;
    in.pp = 2;
    in.vpp = 2;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = 64;
    in.seq_length = 4096;
    in.sequence_parallel = true;
    in.distributed_optimizer = true;
    in.overlap_grad_reduce = true;
    return core::load_job(in);
}

double chunk_dense(const simulator::StageParameters& p, std::size_t c) {
    double n = 0.0;
    for (const core::ShardUnit& u : p.units.at(c)) n += double(u.dense);
    return n;
}

} // namespace

TEST(ChunkGradientReduction, EachChunkStartsWhenItsGradientsAreReady) {
    // Pipeline rank 1 of 2, two chunks, a hand-made timeline: chunk 1's gradients at 5 s, chunk
    // 0's at 8 s, the stage's last pass ending at 8 s. One bucket per chunk (the first pipeline
    // rank alone buckets): chunk 1 reduce-scatters from 5 s, chunk 0 from 8 s or when the stream
    // is free; what runs past 8 s is exposed.
    const core::JobSpec job = interleaved();
    const core::Profile& h100 = test::preset_profile("h100-sxm5-80gb");
    const simulator::CostModel cost(job, h100);
    const simulator::StageParameters& params = cost.parameters(1);
    ASSERT_EQ(params.units.size(), 2u);
    const auto reduce_s = [&](std::size_t c) {
        return cost.collective_s(core::GroupKind::data_shard, 1, core::Collective::reduce_scatter,
                                 chunk_dense(params, c) * 4.0); // fp32 gradients
    };
    const double r0 = reduce_s(0), r1 = reduce_s(1);
    ASSERT_GT(r0, 0.0);
    const simulator::ChunkTiming timing{{8.0, 5.0}, 8.0};
    const simulator::StepTail tail = simulator::step_tail(job, cost, 1, 0.0, &timing);
    const double end = std::max(5.0 + r1, 8.0) + r0;
    EXPECT_NEAR(tail.gradient_reduce_s, end - 8.0, 1e-12);
    // Chunk 1 ready early enough to finish first: only chunk 0's own reduction shows.
    const simulator::ChunkTiming early{{8.0, 8.0 - 10.0 * r1}, 8.0};
    EXPECT_NEAR(simulator::step_tail(job, cost, 1, 0.0, &early).gradient_reduce_s, r0, 1e-12);
    // Without a timeline, the least any can show: the smaller chunk reduction.
    EXPECT_NEAR(simulator::step_tail(job, cost, 1).gradient_reduce_s, std::min(r0, r1), 1e-12);
}
