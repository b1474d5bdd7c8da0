#include "trident/executor/backend.h"

#include "trident/core/spec_error.h"

namespace trident::executor {

Backend choose_backend(const std::string& requested, bool cuda_built, int visible_devices) {
    if (requested == "cpu") return Backend::cpu;
    if (requested == "auto")
        return cuda_built && visible_devices > 0 ? Backend::cuda : Backend::cpu;
    if (requested != "cuda")
        throw core::SpecError("--backend", "'" + requested + "' is not one of auto, cpu, cuda");
    if (!cuda_built)
        throw core::SpecError("--backend", "cuda: this trident was built without the CUDA backend "
                                           "(it needs the CUDA toolkit and NCCL at configure "
                                           "time, and TRIDENT_CUDA on)");
    if (visible_devices <= 0)
        throw core::SpecError("--backend", "cuda: no CUDA device is visible on this machine");
    return Backend::cuda;
}

void require_supported_on_cuda(const core::JobSpec& job) {
    const core::ModelSpec& m = job.model;
    const core::ParallelPlan& p = job.plan;
    const auto no = [](const std::string& field, const std::string& what) {
        throw core::SpecError(field, what + " is not run by the CUDA backend yet (--backend cpu "
                                            "runs it)");
    };
    if (m.moe) no("model.moe", "mixture of experts");
    if (m.mla) no("model.mla", "multi-head latent attention");
    if (m.mtp_num_layers > 0) no("model.mtp_num_layers", "multi-token prediction");
    if (p.recompute.granularity == core::RecomputeGranularity::selective &&
        p.recompute.modules != core::module_bit(core::RecomputeModule::core_attn))
        no("parallel.recompute.modules",
           "selective recomputation of " + core::recompute_modules_text(p.recompute.modules));
    if (p.cp > 1) no("parallel.cp", "context parallelism");
    if (p.fp8.enabled())
        no("parallel.fp8", "FP8 training (" + core::precision_name(p.fp8.recipe) + ")");
    if (p.sharding.instances > 1)
        no("parallel.num_distributed_optimizer_instances",
           "hybrid sharding (" + std::to_string(p.sharding.instances) + " replicas)");
    if (p.zero_stage() >= 2)
        no("parallel.data_parallel_sharding_strategy",
           std::string(core::kDataShardingNames[std::size_t(p.zero_stage())]) + " (ZeRO-" +
               std::to_string(p.zero_stage()) + ")");
    // Their twin chunks and one-rank tied embedding are summed on the host (model_copies.h).
    if (core::holds_two_chunks(p.schedule))
        no("parallel.schedule", "schedule \"" + core::to_string(p.schedule) + "\"");
    // What the flash-attention kernels take (kernels/cuda/flash_attention.h).
    if (m.head_dim != 64 && m.head_dim != 128)
        throw core::SpecError("model.head_dim", "the CUDA backend's flash attention takes head "
                                                "dimension 64 or 128, not " +
                                                    std::to_string(m.head_dim));
    if (job.training.seq_length % 64 != 0)
        throw core::SpecError("training.seq_length",
                              "the CUDA backend's flash attention needs a multiple of 64, not " +
                                  std::to_string(job.training.seq_length));
}

} // namespace trident::executor
