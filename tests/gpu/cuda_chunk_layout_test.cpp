// The CUDA model chunk finds every tensor it needs in the parameter layout the CPU chunks build
// (by name), for every pipeline rank, virtual chunk and tensor rank of several layouts. This
// is host code only — no GPU needed — so it runs wherever the CUDA backend is built, and
// catches a name or layout mismatch before any GPU run.
#include "../support/tiny_job.h"
#include "../../executor/src/cuda_gpt_chunk.h"
#include "trident/core/job_loader.h"
#include "trident/core/spec_error.h"

#include <gtest/gtest.h>

namespace trident::executor {
namespace {

core::JobSpec job_for(const std::string& model, std::int64_t tp, std::int64_t pp, std::int64_t vpp,
                      bool sp) {
    test::TinyJob tiny;
    tiny.model = std::string(TRIDENT_FIXTURES) + "/models/" + model + ".json";
    tiny.tp = tp;
    tiny.pp = pp;
    tiny.vpp = vpp;
    tiny.sequence_parallel = sp;
    tiny.global_batch_size = 2 * pp * 2;
    tiny.seq_length = 64;
    return tiny.load();
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
    test::TinyJob tiny;
    tiny.model = "gpt-demo"; // head dimension 32
    tiny.micro_batch_size = 1;
    tiny.global_batch_size = 1;
    tiny.seq_length = 64;
    const core::JobSpec job = tiny.load();
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
