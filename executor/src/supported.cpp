// What the CPU executor runs of a job, and what it runs without: the checks `trident run`
// makes before it starts ranks (trainer.h).
#include "trident/core/model_layout.h"
#include "trident/core/schedule.h"
#include "trident/core/spec_error.h"
#include "trident/executor/trainer.h"

namespace trident::executor {

void require_supported(const core::JobSpec& job) {
    const core::ParallelPlan& p = job.plan;
    const auto no = [](const std::string& field, const std::string& what) {
        throw core::SpecError(field, what + " is not run by the CPU executor yet");
    };
    if (job.model.moe) {
        // Megatron-Core trains MoE under tensor parallelism only with sequence parallelism.
        if (p.tp > 1 && !p.sequence_parallel)
            throw core::SpecError("parallel.sequence_parallel",
                                  "mixture of experts with tp " + std::to_string(p.tp) +
                                      " needs --sequence-parallel (as Megatron-Core)");
    }
    if (job.model.mla &&
        job.model.mla->v_head_dim > job.model.mla->qk_head_dim + job.model.mla->qk_pos_emb_head_dim)
        no("model.mla.v_head_dim",
           "a value head wider than the query/key head (" +
               std::to_string(job.model.mla->v_head_dim) + " > " +
               std::to_string(job.model.mla->qk_head_dim + job.model.mla->qk_pos_emb_head_dim) +
               ")");
    if (job.model.mtp_num_layers > 0) {
        // The modules shift the tokens by whole positions of one sequence on one rank.
        if (p.cp > 1)
            no("parallel.cp", "multi-token prediction with context parallelism (the shifted "
                              "tokens cross context ranks)");
        if (job.model.position_embedding == core::PositionEmbedding::learned)
            no("model.position_embedding",
               "multi-token prediction with learned position embeddings (Megatron shifts the "
               "position ids too; the executor's MTP runs RoPE models such as DeepSeek-V3)");
    }
}

std::vector<std::string> ignored_by_executor(const core::JobSpec& job, bool cuda_backend) {
    std::vector<std::string> ignored;
    if (job.plan.tp_comm_overlap)
        ignored.push_back("parallel.tp_comm_overlap: the executors run the tensor-parallel "
                          "collectives after and before their GEMMs (the same numbers, not "
                          "overlapped)");
    if (job.plan.overlap_moe_expert_parallel_comm || job.plan.moe_shared_expert_overlap)
        ignored.push_back("parallel.overlap_moe_expert_parallel_comm / moe_shared_expert_overlap: "
                          "the executors run each pass's token exchange in order (the same "
                          "numbers, not overlapped)");
    // The GEMMs read quantized weights either way; Megatron's FP8 parameter gather changes what
    // the data-parallel gather moves and where the FP8 copy is made, which only the simulator
    // times.
    if (job.plan.fp8.param_gather && !cuda_backend)
        ignored.push_back("parallel.fp8.param_gather: the CPU executor gathers fp32 parameters "
                          "and quantizes each weight at its GEMM (the same quantized weights; "
                          "simulate and plan model the FP8 gather)");
    if (job.model.dropout && cuda_backend)
        ignored.push_back("model.dropout: dropout is not applied by the CUDA backend yet (the CPU "
                          "backend applies it); this run trains without it");
    return ignored;
}

} // namespace trident::executor
