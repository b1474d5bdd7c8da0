// Exports of a chosen layout: a plan file for `simulate`/`run`, and Megatron-LM arguments.
#include "trident/core/spec_error.h"
#include "trident/planner/planner.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>

namespace trident::planner {

core::Json plan_file(const Candidate& c, double memory_budget_bytes) {
    core::Json j = core::to_json(c.job);
    j["planner"] = {
        {"recompute_reason", c.recompute_reason},    {"split_reason", c.split_reason},
        {"memory_savers", c.memory_savers},          {"predicted_step_time_s", c.step_time_s},
        {"predicted_tokens_per_s", c.tokens_per_s},  {"predicted_mfu", c.mfu},
        {"peak_memory_bytes", c.peak_memory_bytes},  {"peak_memory_stage", c.peak_stage},
        {"memory_budget_bytes", memory_budget_bytes}};
    return j;
}

namespace {

using Arg = std::function<void(const std::string&, const std::string&)>;

// The pipeline split in Megatron-Core's flags: the Megatron flags the plan gave as they are;
// a listed layout as --decoder-first/last-pipeline-num-layers when it has that form (equal
// chunks on every rank, equal middle ranks), else as --pipeline-model-parallel-layout.
void split_arguments(const core::JobSpec& job, const Arg& arg) {
    const core::ParallelPlan& p = job.plan;
    const auto n = [](std::int64_t v) { return std::to_string(v); };
    const core::PipelineSplit split = job.pipeline_split();
    if (split.even() && !core::uneven_split_requested(p)) {
        if (p.vpp > 1) arg("--num-layers-per-virtual-pipeline-stage", n(split.layers_of(0)));
        return;
    }
    if (p.vpp > 1) arg("--num-virtual-stages-per-pipeline-rank", n(p.vpp));
    if (p.account_for_embedding) arg("--account-for-embedding-in-pipeline-split", "");
    if (p.account_for_loss) arg("--account-for-loss-in-pipeline-split", "");
    if (p.account_for_embedding || p.account_for_loss) return;
    std::vector<std::int64_t> per_rank(std::size_t(p.pp), 0);
    bool equal_chunks = true;
    for (std::int64_t vs = 0; vs < split.stages(); ++vs) {
        const std::int64_t r = vs % p.pp;
        equal_chunks = equal_chunks && split.layers_of(vs) == split.layers_of(r);
        per_rank[std::size_t(r)] += split.layers_of(vs);
    }
    bool equal_middle = true;
    for (std::int64_t r = 2; r + 1 < p.pp; ++r)
        equal_middle = equal_middle && per_rank[r] == per_rank[1];
    if (equal_chunks && equal_middle && p.pp > 2) {
        if (per_rank.front() != per_rank[1])
            arg("--decoder-first-pipeline-num-layers", n(per_rank.front()));
        if (per_rank.back() != per_rank[1])
            arg("--decoder-last-pipeline-num-layers", n(per_rank.back()));
        return;
    }
    arg("--pipeline-model-parallel-layout",
        "\"" + core::megatron_layout_string(split, job.model.mtp_num_layers) + "\"");
}

// ZeRO-2/3 through Megatron-FSDP (its guide adds --no-gradient-accumulation-fusion) or
// PyTorch FSDP2, with the checkpoint format Megatron-LM's argument checks require of each
// (fsdp_dtensor; torch_dist), and hybrid sharding's replicas.
void sharding_arguments(const core::ParallelPlan& p, const Arg& arg) {
    if (p.zero_stage() >= 2) {
        if (p.sharding.implementation == core::FsdpImplementation::torch) {
            arg("--use-torch-fsdp2", "");
            arg("--no-gradient-accumulation-fusion", "");
            arg("--ckpt-format", "torch_dist");
        } else {
            arg("--use-megatron-fsdp", "");
            arg("--data-parallel-sharding-strategy",
                std::string(core::kDataShardingNames[std::size_t(p.zero_stage())]));
            if (p.sharding.keep_fp8_transpose_cache) arg("--keep-fp8-transpose-cache", "");
            arg("--no-gradient-accumulation-fusion", "");
            arg("--ckpt-format", "fsdp_dtensor");
        }
    }
    if (p.sharding.instances > 1)
        arg("--num-distributed-optimizer-instances", std::to_string(p.sharding.instances));
}

} // namespace

namespace {

std::string number(std::int64_t v) {
    return std::to_string(v);
}

// The mixture-of-experts and multi-latent-attention architecture flags.
void moe_and_mla_arguments(const core::ModelSpec& m, const Arg& arg) {
    if (m.moe) {
        arg("--num-experts", number(m.moe->num_experts));
        arg("--moe-router-topk", number(m.moe->top_k));
        if (m.moe->expert_ffn_hidden_size != m.ffn_hidden_size)
            arg("--moe-ffn-hidden-size", number(m.moe->expert_ffn_hidden_size));
        if (m.moe->shared_expert_ffn_hidden_size > 0)
            arg("--moe-shared-expert-intermediate-size",
                number(m.moe->shared_expert_ffn_hidden_size));
        if (m.moe->capacity_factor)
            arg("--moe-expert-capacity-factor", std::to_string(*m.moe->capacity_factor));
        if (m.moe->pad_to_capacity) arg("--moe-pad-expert-input-to-capacity", "");
        arg("--moe-aux-loss-coeff", std::to_string(m.moe->aux_loss_coeff));
        if (m.moe->z_loss_coeff > 0) arg("--moe-z-loss-coeff", std::to_string(m.moe->z_loss_coeff));
        if (m.moe->router_num_groups > 0) {
            arg("--moe-router-num-groups", number(m.moe->router_num_groups));
            arg("--moe-router-group-topk", number(m.moe->router_group_topk));
        }
        arg("--moe-grouped-gemm", "");
    }
    if (m.mla) {
        arg("--multi-latent-attention", "");
        if (m.mla->q_lora_rank > 0) arg("--q-lora-rank", number(m.mla->q_lora_rank));
        arg("--kv-lora-rank", number(m.mla->kv_lora_rank));
        arg("--qk-head-dim", number(m.mla->qk_head_dim));
        arg("--qk-pos-emb-head-dim", number(m.mla->qk_pos_emb_head_dim));
        arg("--v-head-dim", number(m.mla->v_head_dim));
    }
    if (m.mtp_num_layers > 0) {
        arg("--mtp-num-layers", number(m.mtp_num_layers));
        char factor[32];
        std::snprintf(factor, sizeof factor, "%g", m.mtp_loss_scaling_factor);
        arg("--mtp-loss-scaling-factor", factor);
    }
}

// The model's architecture, as pretrain_gpt.py's flags name it.
void model_arguments(const core::JobSpec& job, const Arg& arg) {
    const core::ModelSpec& m = job.model;
    arg("--num-layers", number(m.num_layers));
    arg("--hidden-size", number(m.hidden_size));
    arg("--ffn-hidden-size", number(m.ffn_hidden_size));
    arg("--num-attention-heads", number(m.num_attention_heads));
    if (m.num_query_groups != m.num_attention_heads) {
        arg("--group-query-attention", "");
        arg("--num-query-groups", number(m.num_query_groups));
    }
    if (m.head_dim * m.num_attention_heads != m.hidden_size)
        arg("--kv-channels", number(m.head_dim));
    arg("--seq-length", number(job.training.seq_length));
    arg("--max-position-embeddings", number(m.max_position_embeddings));
    if (m.make_vocab_size_divisible_by != 128)
        arg("--make-vocab-size-divisible-by", number(m.make_vocab_size_divisible_by));
    if (m.norm_epsilon != 1e-5) {
        char eps[32];
        std::snprintf(eps, sizeof eps, "%g", m.norm_epsilon);
        arg("--norm-epsilon", eps);
    }
    if (m.activation == core::Activation::swiglu) arg("--swiglu", "");
    if (m.normalization == core::Normalization::rmsnorm) arg("--normalization", "RMSNorm");
    if (m.position_embedding == core::PositionEmbedding::rope) {
        arg("--position-embedding-type", "rope");
        char base[32];
        std::snprintf(base, sizeof base, "%g", m.rotary_base);
        arg("--rotary-base", base);
    }
    if (!m.tied_embeddings) arg("--untie-embeddings-and-output-weights", "");
    if (!m.linear_bias) arg("--disable-bias-linear", "");
    if (!m.dropout) {
        arg("--attention-dropout", "0.0");
        arg("--hidden-dropout", "0.0");
    }
    moe_and_mla_arguments(m, arg);
}

// The parameters' dtype and the FP8 recipe.
void precision_arguments(const core::JobSpec& job, const Arg& arg) {
    const core::ParallelPlan& p = job.plan;
    if (job.model.precision.params == core::Dtype::bf16) arg("--bf16", "");
    if (job.model.precision.params == core::Dtype::fp16) arg("--fp16", "");
    const core::Precision& prec = job.model.precision;
    if (prec.grads != core::Dtype::fp32 || prec.optimizer_state != core::Dtype::fp32) {
        arg("--use-precision-aware-optimizer", "");
        arg("--main-grads-dtype", core::to_string(prec.grads));
        arg("--exp-avg-dtype", core::to_string(prec.optimizer_state));
        arg("--exp-avg-sq-dtype", core::to_string(prec.optimizer_state));
    }
    if (!p.fp8.enabled()) return;
    if (p.fp8.recipe == core::Fp8Recipe::nvfp4) { // Megatron-Core's FP4 flags (arguments.py)
        arg("--fp4-format", "e2m1");
        arg("--fp4-recipe", "nvfp4");
        if (p.fp8.param_gather) arg("--fp4-param-gather", "");
    } else {
        arg("--fp8-format", std::string(core::kFp8FormatNames[int(p.fp8.format)]));
        arg("--fp8-recipe", std::string(core::kFp8RecipeNames[int(p.fp8.recipe)]));
        if (p.fp8.recipe == core::Fp8Recipe::delayed) {
            arg("--fp8-amax-history-len", number(p.fp8.amax_history));
            arg("--fp8-amax-compute-algo", "max");
        }
        if (p.fp8.param_gather) arg("--fp8-param-gather", "");
    }
    if (p.fp8.bf16_layers_at_start > 0 || p.fp8.bf16_layers_at_end > 0) {
        arg("--first-last-layers-bf16", "");
        arg("--num-layers-at-start-in-bf16", number(p.fp8.bf16_layers_at_start));
        arg("--num-layers-at-end-in-bf16", number(p.fp8.bf16_layers_at_end));
    }
}

// Parallel degrees, sharding, overlap, recomputation and the batch.
void parallel_arguments(const core::JobSpec& job, const Arg& arg) {
    const core::ParallelPlan& p = job.plan;
    arg("--tensor-model-parallel-size", number(p.tp));
    arg("--pipeline-model-parallel-size", number(p.pp));
    split_arguments(job, arg);
    if (p.cp > 1) arg("--context-parallel-size", number(p.cp));
    if (p.ep > 1) arg("--expert-model-parallel-size", number(p.ep));
    if (p.etp) arg("--expert-tensor-parallel-size", number(*p.etp));
    if (job.model.moe) {
        arg("--moe-token-dispatcher-type",
            std::string(core::kTokenDispatcherNames[int(p.token_dispatcher)]));
        if (p.token_dispatcher == core::TokenDispatcher::flex) arg("--moe-enable-deepep", "");
    }
    if (p.sequence_parallel) arg("--sequence-parallel", "");
    // PyTorch FSDP2 shards the optimizer itself: Megatron's distributed optimizer and its
    // parameter gather do not apply.
    const bool torch_fsdp2 =
        p.zero_stage() >= 2 && p.sharding.implementation == core::FsdpImplementation::torch;
    if (p.distributed_optimizer && !torch_fsdp2) arg("--use-distributed-optimizer", "");
    sharding_arguments(p, arg);
    if (p.overlap_grad_reduce) arg("--overlap-grad-reduce", "");
    if (p.overlap_param_gather && !torch_fsdp2) arg("--overlap-param-gather", "");
    if (p.tp_comm_overlap) arg("--tp-comm-overlap", "");
    if (p.overlap_moe_expert_parallel_comm) arg("--overlap-moe-expert-parallel-comm", "");
    if (p.moe_shared_expert_overlap) arg("--moe-shared-expert-overlap", "");
    if (p.schedule == core::ScheduleKind::interleaved_1f1b && !p.overlap_p2p_comm)
        arg("--no-overlap-p2p-communication", "");
    if (p.flash_attention) arg("--use-flash-attn", "");
    if (p.recompute.granularity != core::RecomputeGranularity::none)
        arg("--recompute-granularity", core::to_string(p.recompute.granularity));
    if (p.recompute.granularity == core::RecomputeGranularity::selective) {
        std::string modules = core::recompute_modules_text(p.recompute.modules);
        std::replace(modules.begin(), modules.end(), ',', ' ');
        arg("--recompute-modules", modules);
    }
    if (p.recompute.granularity == core::RecomputeGranularity::full) {
        arg("--recompute-method", core::to_string(p.recompute.method));
        arg("--recompute-num-layers", number(p.recompute.num_layers));
    }
    arg("--micro-batch-size", number(p.micro_batch_size));
    arg("--global-batch-size", number(job.training.global_batch_size));
}

} // namespace

namespace {

// Megatron-LM has no ZB-V or DualPipe(V): the job as 1F1B with each rank's layers (the sum of
// its two chunks) as the pipeline layout.
core::JobSpec as_one_f_one_b(const core::JobSpec& job) {
    core::JobSpec out = job;
    core::ParallelPlan& p = out.plan;
    const core::PipelineSplit split = job.pipeline_split();
    std::vector<std::int64_t> per_rank(std::size_t(p.pp), 0);
    for (std::int32_t r = 0; r < std::int32_t(p.pp); ++r)
        for (std::int32_t c = 0; c < std::int32_t(p.vpp); ++c)
            per_rank[std::size_t(r)] +=
                split.layers_of(core::virtual_stage(p.schedule, c, std::int32_t(p.pp), r));
    p.schedule = core::ScheduleKind::one_f_one_b;
    p.vpp = 1;
    p.first_stage_layers.reset();
    p.last_stage_layers.reset();
    p.account_for_embedding = p.account_for_loss = false;
    p.pipeline_layout = std::move(per_rank);
    return out;
}

} // namespace

std::string megatron_arguments(const core::JobSpec& given, const std::string& launcher) {
    const bool two_chunks = core::holds_two_chunks(given.plan.schedule);
    const core::JobSpec job = two_chunks ? as_one_f_one_b(given) : given;
    const core::ParallelPlan& p = job.plan;
    std::ostringstream a;
    const Arg arg = [&](const std::string& name, const std::string& value) {
        a << " \\\n  " << name << (value.empty() ? "" : " " + value);
    };
    a << "# " << job.model.name << ": " << job.cluster.devices() << " GPUs (" << job.cluster.nodes
      << " nodes x " << job.cluster.devices_per_node << ")";
    if (two_chunks)
        a << "\n# " << core::to_string(given.plan.schedule)
          << " has no Megatron-LM flag: these arguments run 1F1B with each rank's layers";
    if (p.schedule == core::ScheduleKind::zero_bubble_h1)
        a << "\n# zero-bubble-h1 has no Megatron-LM flag: these arguments run 1F1B";
    if (p.schedule == core::ScheduleKind::gpipe)
        a << "\n# Megatron-LM has no GPipe schedule: these arguments run 1F1B";
    if (launcher == "torchrun")
        a << "\ntorchrun --nnodes " << job.cluster.nodes << " --nproc-per-node "
          << job.cluster.devices_per_node
          << " --rdzv-backend c10d --rdzv-endpoint \"$MASTER_ADDR:$MASTER_PORT\" \\\n  ";
    else if (launcher == "srun")
        a << "\nsrun --nodes " << job.cluster.nodes << " --ntasks-per-node "
          << job.cluster.devices_per_node << " --gpus-per-node " << job.cluster.devices_per_node
          << " python \\\n  ";
    else if (!launcher.empty())
        throw core::SpecError("--launcher", "'" + launcher + "' is not one of torchrun, srun");
    else
        a << "\n";
    a << "pretrain_gpt.py";
    model_arguments(job, arg);
    precision_arguments(job, arg);
    parallel_arguments(job, arg);
    a << "\n";
    return a.str();
}

} // namespace trident::planner
