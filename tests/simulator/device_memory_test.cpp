// What the device holds beyond the allocated tensors (simulator/device_memory.h) against sizes
// worked out by hand from the code that allocates them, and the loss's transient logits.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/simulator/device_memory.h"
#include "trident/simulator/memory.h"
#include "trident/simulator/report.h"
#include "trident/simulator/simulate.h"

#include <gtest/gtest.h>
#include <sstream>

using namespace trident;
using core::kMiB;

namespace {

core::JobSpec job_of(const std::string& model, const std::string& cluster, std::int64_t nodes,
                     std::int64_t tp, std::int64_t pp, std::int64_t ep = 1,
                     std::int64_t seq_length = 1024) {
    core::JobInputs in;
    in.model = model;
    in.cluster = cluster;
    in.nodes = nodes;
    in.tp = tp;
    in.pp = pp;
    in.ep = ep;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = 64;
    in.seq_length = seq_length;
    return core::load_job(in);
}

} // namespace

TEST(DeviceMemory, DeepEpBuffersFollowItsSizeHints) {
    // DeepSeek-V3's hidden 7168 in BF16 (14,336-byte rows), DeepEP's default configs at 20 SMs:
    // NVLink hint 10 channels · 8 peers · (20 B + 256 slots · (14,336 + 2,056) B) at 8 ranks;
    // from 16 ranks 288 slots and an RDMA buffer of 2 · (14,336 + 2,072) B slots.
    const double workspace = 32 * kMiB;
    EXPECT_DOUBLE_EQ(simulator::deepep_buffer_bytes(14336, 8), 335709824.0 + workspace);
    EXPECT_DOUBLE_EQ(simulator::deepep_buffer_bytes(14336, 16),
                     377673984.0 + 91887744.0 + workspace);
    EXPECT_DOUBLE_EQ(simulator::deepep_buffer_bytes(14336, 64),
                     377677824.0 + 336047360.0 + workspace);
    EXPECT_EQ(simulator::deepep_buffer_bytes(14336, 1), 0.0);
}

TEST(DeviceMemory, NcclBuffersPerGroupTheRankTalksIn) {
    // tp 4 · dp 2 inside a node, pp 2 across the two: two rings of 32 channels × 12 MiB, and
    // one pipeline neighbour over the network at 2 channels.
    const core::JobSpec dense = job_of("llama3-8b", "dgx-h100", 2, 4, 2);
    EXPECT_DOUBLE_EQ(simulator::nccl_buffer_bytes(dense, 0), (2 * 32 * 12 + 2 * 12) * kMiB);
    // Mixtral with ep 8 on one node, the alltoall dispatcher: the data-parallel ring and seven
    // NVLink peers at 32 channels each — 2.8 GB beside the 3.28 GB an all-to-all added on
    // 8×H100 in NVIDIA/nccl#1685.
    const core::JobSpec moe = job_of("mixtral-8x7b", "dgx-h100", 1, 1, 1, 8);
    const double all_to_all = 7 * 32 * 12 * kMiB;
    EXPECT_DOUBLE_EQ(simulator::nccl_buffer_bytes(moe, 0), 32 * 12 * kMiB + all_to_all);
    EXPECT_NEAR(all_to_all / 3.28e9, 1.0, 0.15);
}

TEST(DeviceMemory, ReserveAndRuntimeAddUpToTheDeviceTotal) {
    const core::JobSpec job = job_of("llama3-8b", "dgx-h100", 2, 4, 2);
    const auto stages = simulator::memory_per_stage(
        job, core::make_schedule(core::ScheduleKind::one_f_one_b, 2, 1, 8));
    for (const simulator::StageMemory& s : stages) {
        EXPECT_DOUBLE_EQ(s.allocator_reserve_bytes, 0.05 * s.allocated_bytes());
        EXPECT_DOUBLE_EQ(s.runtime_bytes,
                         simulator::kCudaContextBytes + simulator::nccl_buffer_bytes(job, 0));
        EXPECT_DOUBLE_EQ(s.total_bytes(),
                         s.allocated_bytes() + s.allocator_reserve_bytes + s.runtime_bytes);
    }
    // A dropless MoE's expert inputs change size every step: a larger allowance.
    EXPECT_DOUBLE_EQ(
        simulator::allocator_reserve_fraction(job_of("mixtral-8x7b", "dgx-h100", 1, 1, 1, 8)),
        0.10);
    // The CPU executor's devices have no CUDA context, NCCL or caching allocator.
    const core::JobSpec cpu = job_of("gpt-tiny", "localhost", 1, 1, 1, 1, 32);
    const auto host = simulator::memory_per_stage(
        cpu, core::make_schedule(core::ScheduleKind::one_f_one_b, 1, 1, 4));
    EXPECT_EQ(host[0].runtime_bytes, 0.0);
    EXPECT_EQ(host[0].allocator_reserve_bytes, 0.0);
}

TEST(DeviceMemory, LossHoldsTheBf16LogitsBesideTheirFp32Copy) {
    // GPT-2 124M, one stage: the 16-bit logits (2 bytes × 1,024 tokens × 50,304 padded vocab)
    // beside the fp32 ones the cross-entropy keeps are the backward's largest extra.
    const core::JobSpec job = job_of("gpt2-124m", "dgx-h100", 1, 1, 1);
    ASSERT_EQ(job.model.padded_vocab_size(1), 50304);
    const auto stages = simulator::memory_per_stage(
        job, core::make_schedule(core::ScheduleKind::one_f_one_b, 1, 1, 8));
    EXPECT_DOUBLE_EQ(stages[0].backward_working_bytes, 2.0 * 1024 * 50304);
}

TEST(DeviceMemory, TheReportNamesAllocatedReservedAndDeviceMemory) {
    const core::JobSpec job = job_of("mixtral-8x7b", "dgx-h100", 1, 1, 1, 8);
    std::ostringstream out;
    simulator::print_report(simulator::simulate(job, test::preset_profile("h100-sxm5-80gb")), out);
    const std::string text = out.str();
    EXPECT_NE(text.find("allocated (Megatron's max allocated)"), std::string::npos) << text;
    EXPECT_NE(text.find("reserved (an allocator allowance of 10 %)"), std::string::npos) << text;
    EXPECT_NE(text.find("on the device (CUDA context 0.4, NCCL 3.0)"), std::string::npos) << text;
    EXPECT_NE(text.find("reserve runtime)"), std::string::npos) << "the stage table's columns";
}
