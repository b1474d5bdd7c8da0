#include "trident/core/job.h"

#include "trident/core/schedule.h"
#include "trident/core/spec_error.h"

namespace trident::core {

std::int64_t JobSpec::micro_batches_per_step() const {
    // m = B / (b · dp) (Narayanan et al. 2021, §2.2).
    return training.global_batch_size / (plan.micro_batch_size * plan.dp);
}

PipelineSplit JobSpec::pipeline_split() const {
    return core::pipeline_split(model, plan);
}

std::int64_t JobSpec::max_layers_per_chunk() const {
    return pipeline_split().max_layers();
}

RecomputeGranularity JobSpec::recompute_at(std::int64_t position) const {
    const Recompute& rc = plan.recompute;
    if (rc.granularity != RecomputeGranularity::full) return rc.granularity;
    if (rc.method == RecomputeMethod::uniform || position < rc.num_layers)
        return RecomputeGranularity::full;
    return RecomputeGranularity::none;
}

RecomputeGranularity JobSpec::layer_recompute(std::int64_t layer) const {
    const Recompute& rc = plan.recompute;
    if (rc.granularity != RecomputeGranularity::full || rc.method == RecomputeMethod::uniform)
        return recompute_at(0);
    if (!uneven_split_requested(plan) && model.num_layers % plan.model_stages() == 0)
        return recompute_at(layer % (model.num_layers / plan.model_stages()));
    return recompute_at(pipeline_split().position(layer));
}

Fp8Recipe JobSpec::layer_fp8(std::int64_t layer) const {
    const Fp8& f = plan.fp8;
    if (layer < f.bf16_layers_at_start || layer >= model.num_layers - f.bf16_layers_at_end)
        return Fp8Recipe::none;
    return f.recipe;
}

Recompute with_recompute_defaults(Recompute r, std::int64_t layers_per_chunk) {
    if (r.granularity == RecomputeGranularity::full && r.num_layers == 0)
        r.num_layers = r.method == RecomputeMethod::uniform ? 1 : layers_per_chunk;
    return r;
}

namespace {

// PyTorch FSDP2 in Megatron-LM (its argument checks): no expert parallelism, untied output
// weights, not fp16, and no FP8 parameter gather (Megatron turns it off under Transformer
// Engine 2 rather than run it).
void validate_torch_fsdp2(const ModelSpec& m, const ParallelPlan& p) {
    if (p.zero_stage() < 2 || p.sharding.implementation != FsdpImplementation::torch) return;
    const std::string field = "parallel.use_torch_fsdp2";
    if (p.ep > 1)
        throw SpecError(field,
                        "PyTorch FSDP2 does not run with expert parallelism in Megatron (ep " +
                            std::to_string(p.ep) + "); use_megatron_fsdp does");
    if (m.tied_embeddings)
        throw SpecError(field, "PyTorch FSDP2 needs untied embedding and output weights in "
                               "Megatron (--untie-embeddings-and-output-weights); model '" +
                                   m.name + "' ties them");
    if (m.precision.params == Dtype::fp16)
        throw SpecError(field, "PyTorch FSDP2 does not run fp16 parameters in Megatron; use bf16");
    if (p.fp8.param_gather)
        throw SpecError("parallel.fp8.param_gather",
                        "PyTorch FSDP2 gathers BF16 weights (Megatron turns --fp8-param-gather "
                        "off under it); drop fp8 param_gather or use use_megatron_fsdp");
}

} // namespace

void validate(const JobSpec& job) {
    const ModelSpec& m = job.model;
    const ClusterSpec& c = job.cluster;
    const TrainingSpec& t = job.training;
    const ParallelPlan& p = job.plan;
    validate(m);
    validate(c);
    validate(t);
    validate(p);
    const auto s = [](std::int64_t v) { return std::to_string(v); };

    if (m.num_attention_heads % p.tp != 0)
        throw SpecError("parallel.tp",
                        s(p.tp) + " must divide num_attention_heads " + s(m.num_attention_heads));
    if (m.num_query_groups % p.tp != 0)
        throw SpecError("parallel.tp", s(p.tp) + " must divide num_query_groups " +
                                           s(m.num_query_groups) + " (KV heads)");
    const PipelineSplit split = core::pipeline_split(m, p);
    if (p.fp8.bf16_layers_at_start + p.fp8.bf16_layers_at_end > m.num_layers)
        throw SpecError("parallel.fp8.num_layers_at_start_in_bf16",
                        s(p.fp8.bf16_layers_at_start) + " + " + s(p.fp8.bf16_layers_at_end) +
                            " BF16 layers exceed the model's " + s(m.num_layers));
    if (!m.moe && p.ep != 1)
        throw SpecError("parallel.ep", "must be 1: model '" + m.name + "' has no experts");
    if (!m.moe && p.etp)
        throw SpecError("parallel.etp", "applies to experts only: model '" + m.name +
                                            "' has none (drop expert_tensor_parallel_size)");
    if (m.moe && m.moe->num_experts % p.ep != 0)
        throw SpecError("parallel.ep",
                        s(p.ep) + " must divide moe.num_experts " + s(m.moe->num_experts));
    if (p.overlap_moe_expert_parallel_comm) {
        if (!m.moe || p.ep < 2)
            throw SpecError("parallel.overlap_moe_expert_parallel_comm",
                            "needs expert parallelism (ep " + s(p.ep) + ")");
        if (p.token_dispatcher == TokenDispatcher::allgather)
            throw SpecError("parallel.overlap_moe_expert_parallel_comm",
                            "needs the alltoall or flex dispatcher, not allgather (Megatron-Core)");
        validate_moe_overlap_schedule(p);
    }
    if (p.moe_shared_expert_overlap) validate_shared_expert_overlap(m, p);
    validate_torch_fsdp2(m, p);
    // Megatron keeps main gradients and moments below fp32 only in the precision-aware optimizer,
    // which it refuses without the distributed one (optimizer/__init__.py) — except fp16
    // gradients of fp16 parameters, its --fp16 default (arguments.py forces fp32 gradient
    // accumulation for bf16 only).
    const bool fp16_default = m.precision.params == Dtype::fp16 && m.precision.grads == Dtype::fp16;
    if (((m.precision.grads != Dtype::fp32 && !fp16_default) ||
         m.precision.optimizer_state != Dtype::fp32) &&
        !p.distributed_optimizer)
        throw SpecError(m.precision.optimizer_state != Dtype::fp32
                            ? "model.precision.optimizer_state"
                            : "model.precision.grads",
                        "below fp32 needs the precision-aware optimizer, which Megatron runs "
                        "only with distributed_optimizer (ZeRO-1 or more); the plan has dp " +
                            s(p.dp) +
                            " without it (add --distributed-optimizer, or keep fp32 "
                            "with --exp-avg-dtype fp32 --exp-avg-sq-dtype fp32)");
    if (c.devices() != p.devices()) {
        std::string reason = "tp·cp·dp·pp = " + s(p.tp) + "·" + s(p.cp) + "·" + s(p.dp) + "·" +
                             s(p.pp) + " = " + s(p.devices()) + " must equal the cluster's " +
                             s(c.devices()) + " devices";
        const std::int64_t model_parallel = p.tp * p.cp * p.pp;
        if (c.devices() % model_parallel == 0)
            reason += " (dp " + s(c.devices() / model_parallel) + " would fit)";
        throw SpecError("parallel.dp", reason);
    }
    // Tensor groups stay on one NVLink fabric: a node, or an NVL72 rack's domain.
    const std::int64_t domain = c.fabric_domain();
    const std::string what = c.nvlink_domain > 0 ? "nvlink_domain_size " : "devices_per_node ";
    if (p.tp > domain && !p.allow_cross_node_tp)
        throw SpecError("parallel.tp", s(p.tp) + " exceeds " + what + s(domain) +
                                           "; tensor parallelism across nodes needs "
                                           "allow_cross_node_tp");
    if (p.tp <= domain && domain % p.tp != 0 && !p.allow_cross_node_tp)
        throw SpecError("parallel.tp", s(p.tp) + " must divide " + what + s(domain) +
                                           " or tensor groups straddle nodes (allow with "
                                           "allow_cross_node_tp)");
    if (t.global_batch_size % (p.micro_batch_size * p.dp) != 0)
        throw SpecError("training.global_batch_size",
                        s(t.global_batch_size) + " must be divisible by micro_batch_size·dp = " +
                            s(p.micro_batch_size) + "·" + s(p.dp));
    if (t.seq_length > m.max_position_embeddings)
        throw SpecError("training.seq_length", s(t.seq_length) +
                                                   " exceeds the model's max_position_embeddings " +
                                                   s(m.max_position_embeddings));
    if (p.cp > 1 && t.seq_length % (2 * p.cp) != 0)
        throw SpecError("training.seq_length",
                        s(t.seq_length) + " must be divisible by 2·cp = " + s(2 * p.cp) +
                            " (context parallelism splits each sequence into 2·cp chunks to "
                            "balance the causal mask)");
    if (p.sequence_parallel && (t.seq_length / p.cp) % p.tp != 0)
        throw SpecError("training.seq_length",
                        s(t.seq_length) + " per context rank must be divisible by tp = " + s(p.tp) +
                            " with sequence parallelism");
    const std::int64_t m_batches = job.micro_batches_per_step();
    validate_schedule(p.schedule, p.pp, p.vpp, m_batches);
    if (p.recompute.granularity == RecomputeGranularity::full && p.recompute.num_layers < 1)
        throw SpecError("parallel.recompute.num_layers",
                        "full recomputation needs num_layers >= 1 (got " +
                            s(p.recompute.num_layers) + ")");
    if (p.recompute.num_layers > split.max_layers())
        throw SpecError("parallel.recompute.num_layers",
                        s(p.recompute.num_layers) + " exceeds the " + s(split.max_layers()) +
                            " layers of the largest model chunk");
    validate_recompute_modules(m, p.recompute);
}

std::string moe_overlap_schedule_problem(const ParallelPlan& p) {
    // Megatron-Core merges a forward and a backward chunk of different micro-batches: at
    // pp > 1 only its interleaved schedule has them (DualPipe and the V schedules pair their
    // two chunks as DeepSeek-V3 does); it recomputes neither whole layers nor MoE blocks.
    if (p.pp > 1 && p.schedule != ScheduleKind::interleaved_1f1b && !holds_two_chunks(p.schedule))
        return "needs virtual pipeline stages at pp " + std::to_string(p.pp) +
               " (interleaved-1f1b, or dualpipe/dualpipev/zero-bubble-v), not " +
               to_string(p.schedule) + " (Megatron-Core)";
    if (p.recompute.granularity == RecomputeGranularity::full)
        return "cannot run with full recomputation (Megatron-Core)";
    if (p.recompute.selects(RecomputeModule::moe))
        return "cannot run with the moe recomputation module (Megatron-Core)";
    return "";
}

std::string shared_expert_overlap_problem(const ModelSpec& m, const ParallelPlan& p) {
    if (!m.moe || m.moe->shared_expert_ffn_hidden_size == 0)
        return "needs shared experts; " + m.name + " has none";
    if (p.token_dispatcher == TokenDispatcher::allgather)
        return "works with the alltoall or flex dispatcher only (Megatron-Core), not allgather";
    if (p.overlap_moe_expert_parallel_comm)
        return "cannot run with overlap_moe_expert_parallel_comm (Megatron-Core disables it "
               "there: the merged passes hide the exchange already)";
    if (p.recompute.selects(RecomputeModule::shared_experts))
        return "cannot run with the shared_experts recomputation module (Megatron-Core)";
    return "";
}

void validate_moe_overlap_schedule(const ParallelPlan& p) {
    if (const std::string problem = moe_overlap_schedule_problem(p); !problem.empty())
        throw SpecError("parallel.overlap_moe_expert_parallel_comm", problem);
}

void validate_shared_expert_overlap(const ModelSpec& m, const ParallelPlan& p) {
    if (const std::string problem = shared_expert_overlap_problem(m, p); !problem.empty())
        throw SpecError("parallel.moe_shared_expert_overlap", problem);
}

void validate_recompute_modules(const ModelSpec& m, const Recompute& rc) {
    if (rc.granularity != RecomputeGranularity::selective) return;
    const bool dense_layers = !m.moe || m.num_moe_layers() < m.num_layers;
    const auto refuse = [&](RecomputeModule module, const std::string& why) {
        throw SpecError("parallel.recompute.modules",
                        std::string(kRecomputeModuleNames[std::size_t(module)]) + " " + why + "; " +
                            m.name + " has none (modules: " + recompute_modules_text(rc.modules) +
                            ")");
    };
    if (rc.selects(RecomputeModule::mla_up_proj) && !m.mla)
        refuse(RecomputeModule::mla_up_proj, "recomputes multi-head latent attention");
    for (auto module : {RecomputeModule::moe, RecomputeModule::moe_act})
        if (rc.selects(module) && !m.moe) refuse(module, "recomputes mixture-of-experts layers");
    if (rc.selects(RecomputeModule::shared_experts) &&
        (!m.moe || m.moe->shared_expert_ffn_hidden_size == 0))
        refuse(RecomputeModule::shared_experts, "recomputes shared experts");
    if (rc.selects(RecomputeModule::mlp) && !dense_layers)
        refuse(RecomputeModule::mlp, "recomputes dense MLP layers");
}

Json to_json(const JobSpec& job) {
    Json j;
    j["format"] = "trident.plan/1";
    j["model"] = to_json(job.model);
    j["model"].erase("format");
    j["cluster"] = to_json(job.cluster);
    j["cluster"].erase("format");
    j["training"] = to_json(job.training);
    j["parallel"] = to_json(job.plan);
    if (!job.profile.empty()) j["profile"] = job.profile;
    if (!job.data_path.empty()) {
        j["data"] = {{"path", job.data_path}};
        if (!job.data_split.empty()) j["data"]["split"] = job.data_split;
    }
    return j;
}

} // namespace trident::core
