// The CUDA model chunk finds every tensor it needs in the parameter layout the CPU chunks build
// (by name), for every pipeline rank, virtual chunk and tensor rank of several layouts. This
// is host code only — no GPU needed — so it runs wherever the CUDA backend is built, and
// catches a name or layout mismatch before any GPU run.
#include "../../executor/src/cuda_gpt_chunk.h"
#include "trident/core/job_loader.h"
#include "trident/core/spec_error.h"

#include <gtest/gtest.h>

namespace trident::executor {
namespace {

core::JobSpec job_for(const std::string& model, std::int64_t tp, std::int64_t pp, std::int64_t vpp,
                      bool sp) {
    core::JobInputs in;
    in.model = std::string(TRIDENT_TEST_DATA) + "/models/" + model + ".json";
    in.cluster = "localhost";
    in.devices_per_node = tp * pp;
    in.tp = tp;
    in.pp = pp;
    in.dp = "1";
    if (vpp > 1) in.vpp = vpp;
    in.sequence_parallel = sp;
    in.micro_batch_size = 2;
    in.global_batch_size = 2 * pp * 2;
    in.seq_length = 64;
    return core::load_job(in);
}

void expect_every_chunk_found(const core::JobSpec& job) {
    const core::ParallelPlan& p = job.plan;
    for (std::int64_t pp_rank = 0; pp_rank < p.pp; ++pp_rank)
        for (std::int64_t tp_rank = 0; tp_rank < p.tp; ++tp_rank) {
            ParameterStore store;
            std::vector<GptChunk> cpu;
            for (std::int32_t c = 0; c < p.vpp; ++c)
                cpu.emplace_back(job, std::int32_t(pp_rank), c, int(tp_rank), 0, 0, store, 1);
            for (std::int32_t c = 0; c < p.vpp; ++c) {
                SCOPED_TRACE("pp rank " + std::to_string(pp_rank) + ", chunk " + std::to_string(c) +
                             ", tp rank " + std::to_string(tp_rank));
                const CudaGptChunk chunk(job, std::int32_t(pp_rank), c, int(tp_rank), store);
                EXPECT_EQ(chunk.first(), cpu[std::size_t(c)].first());
                EXPECT_EQ(chunk.last(), cpu[std::size_t(c)].last());
                // What travels between stages: the same rows as the CPU chunk's, in bf16.
                EXPECT_EQ(chunk.hidden_elements(), cpu[std::size_t(c)].hidden_elements());
            }
        }
}

TEST(CudaChunkLayout, GptWithTiedEmbeddingsBiasesAndLearnedPositions) {
    expect_every_chunk_found(job_for("gpt-cuda-test", 1, 1, 1, false));
    expect_every_chunk_found(job_for("gpt-cuda-test", 2, 2, 1, true));
}

TEST(CudaChunkLayout, LlamaWithGqaRopeAndUntiedHead) {
    expect_every_chunk_found(job_for("llama-cuda-test", 1, 2, 1, false));
    expect_every_chunk_found(job_for("llama-cuda-test", 2, 1, 1, false));
    expect_every_chunk_found(job_for("llama-cuda-test", 2, 2, 1, true));
}

TEST(CudaChunkLayout, RefusesWhatFlashAttentionCannotRun) {
    core::JobInputs in;
    in.model = "gpt-demo"; // head dimension 32
    in.cluster = "localhost";
    in.devices_per_node = 1;
    in.tp = 1;
    in.pp = 1;
    in.dp = "1";
    in.micro_batch_size = 1;
    in.global_batch_size = 1;
    in.seq_length = 64;
    const core::JobSpec job = core::load_job(in);
    ParameterStore store;
    const GptChunk cpu(job, 0, 0, 0, 0, 0, store, 1);
    try {
        const CudaGptChunk chunk(job, 0, 0, 0, store);
        FAIL() << "head dimension 32 accepted";
    } catch (const core::SpecError& e) {
        EXPECT_EQ(e.field(), "model");
        EXPECT_NE(e.reason().find("head_dim"), std::string::npos) << e.reason();
    }
}

} // namespace
} // namespace trident::executor
