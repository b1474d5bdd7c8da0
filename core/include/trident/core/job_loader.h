#pragma once
// Builds a JobSpec the way every command takes one: references (preset name or file) for the
// model, cluster, training and plan, plus flag overrides for single fields. Overrides are
// written into the JSON before parsing, so a bad flag value is reported with the same field
// name as the same value in a file ("parallel.tp", "cluster.nodes").
#include "trident/core/job.h"

#include <optional>
#include <string>
#include <vector>

namespace trident::core {

struct JobInputs {
    std::optional<std::string> model;
    std::optional<std::string> cluster;
    std::optional<std::string> training;
    std::optional<std::string> plan;
    std::optional<std::int64_t> nodes;
    std::optional<std::int64_t> devices_per_node;

    // model overrides (Megatron's --make-vocab-size-divisible-by, --norm-epsilon)
    std::optional<std::int64_t> make_vocab_size_divisible_by;
    std::optional<double> norm_epsilon;
    std::optional<double> moe_aux_loss_coeff;              // --moe-aux-loss-coeff
    std::optional<double> moe_z_loss_coeff;                // --moe-z-loss-coeff
    std::optional<std::string> moe_expert_capacity_factor; // a number, or none (dropless)
    std::optional<bool> moe_pad_expert_input_to_capacity;  // --moe-pad-expert-input-to-capacity
    std::optional<std::string> moe_load_balance;   // --moe-load-balance forced|aux-loss|FILE.json
    std::optional<std::int64_t> mtp_num_layers;    // --mtp-num-layers
    std::optional<double> mtp_loss_scaling_factor; // --mtp-loss-scaling-factor
    // Megatron's precision-aware optimizer: --use-precision-aware-optimizer with
    // --main-grads-dtype, --exp-avg-dtype, --exp-avg-sq-dtype (and --main-params-dtype fp32)
    std::optional<bool> use_precision_aware_optimizer;
    std::optional<std::string> main_grads_dtype, exp_avg_dtype, exp_avg_sq_dtype, main_params_dtype;

    // training overrides
    std::optional<std::int64_t> global_batch_size;
    std::optional<std::int64_t> seq_length;
    std::optional<std::int64_t> train_iters;
    // optimizer overrides (Megatron's --lr, --min-lr, … ; what `run` takes)
    std::optional<double> lr, min_lr, clip_grad, weight_decay, adam_beta1, adam_beta2;
    std::optional<std::int64_t> lr_warmup_iters, lr_decay_iters, seed;
    std::optional<std::string> lr_decay_style;

    // parallel overrides
    std::optional<std::int64_t> tp, pp, cp, ep, etp, vpp, micro_batch_size;
    std::optional<std::string> dp;                            // a number or "auto"
    std::optional<std::int64_t> num_layers_per_virtual_stage; // Megatron's vpp spelling
    std::optional<std::string> schedule;
    // uneven pipeline stages: "7,8,8,7" or Megatron's layout string "Et*7|t*8|t*8|t*7L"
    std::optional<std::string> pipeline_layout;
    std::optional<std::int64_t> first_stage_layers, last_stage_layers;
    std::optional<bool> account_for_embedding, account_for_loss;
    // FP8: Trident's --precision (bf16, fp8-delayed, …) or Megatron's flags
    std::optional<std::string> precision, fp8_format, fp8_recipe;
    std::optional<bool> fp8_param_gather, first_last_layers_bf16;
    // NVFP4: Megatron's --fp4-format e2m1, --fp4-recipe nvfp4, --fp4-param-gather
    std::optional<std::string> fp4_format, fp4_recipe;
    std::optional<bool> fp4_param_gather;
    std::optional<std::int64_t> bf16_layers_at_start, bf16_layers_at_end, fp8_amax_history;
    std::optional<std::string> recompute; // granularity
    std::optional<std::string> recompute_method;
    std::optional<std::int64_t> recompute_num_layers;
    // --recompute-modules core_attn moe_act …: selective recomputation's modules (implies
    // granularity selective unless --recompute names another)
    std::optional<std::vector<std::string>> recompute_modules;
    std::optional<bool> sequence_parallel;
    std::optional<bool> distributed_optimizer;
    // Sharded data parallelism: Megatron's --data-parallel-sharding-strategy (or a ZeRO stage),
    // --use-megatron-fsdp, --use-torch-fsdp2, --num-distributed-optimizer-instances
    std::optional<std::string> data_parallel_sharding_strategy;
    std::optional<bool> use_megatron_fsdp, use_torch_fsdp2;
    std::optional<std::int64_t> optimizer_instances, fsdp_prefetch_units;
    std::optional<bool> keep_fp8_transpose_cache;
    std::optional<bool> allow_cross_node_tp;
    std::optional<bool> overlap_grad_reduce;
    std::optional<bool> overlap_param_gather;
    std::optional<bool> tp_comm_overlap;
    std::optional<bool> overlap_p2p_comm;
    std::optional<bool> async_tp_backward; // --no-async-tensor-model-parallel-allreduce
    std::optional<bool> overlap_moe_expert_parallel_comm;
    std::optional<bool> moe_shared_expert_overlap;
    std::optional<std::string> moe_token_dispatcher; // --moe-token-dispatcher-type
    std::optional<bool> flash_attention;
};

// The FP8 settings the FP8 flags of `inputs` ask for (nullopt: none given); what `plan` pins.
std::optional<Fp8> fp8_override(const JobInputs& inputs);

// The sharding fields the sharding flags of `inputs` ask for, written into `parallel` (its
// distributed_optimizer key dropped when a strategy is given, so the strategy decides).
void apply_sharding_overrides(const JobInputs& inputs, Json& parallel);

// Megatron's --moe-expert-capacity-factor value: a positive number, or "none"/"dropless"
// (nullopt). SpecError naming `field` otherwise.
std::optional<double> parse_capacity_factor(const std::string& text, const std::string& field);

// Loads, applies overrides, resolves dp "auto", and validates. Throws SpecError.
JobSpec load_job(const JobInputs& inputs);
// The same for a plan given inline: a trident.plan/1 object (or {"preset": NAME, ...}),
// `source` naming it in errors ("published run llama3-70b-…"); `inputs.plan` must be empty.
JobSpec load_job(const Json& plan, const std::string& source, const JobInputs& inputs = {});

// Loads only the model, cluster and training (what the planner searches a plan for); the
// returned plan is a default one, not validated against them. The parallel overrides of
// `inputs` are ignored.
JobSpec load_specs(const JobInputs& inputs);

} // namespace trident::core
