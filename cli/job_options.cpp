#include "job_options.h"

#include <algorithm>
#include <tuple>

namespace trident::cli {
namespace {

void integer(CLI::App& app, const std::string& names, std::optional<std::int64_t>& target,
             const std::string& help) {
    app.add_option_function<std::int64_t>(
           names, [&target](const std::int64_t& v) { target = v; }, help)
        ->group("Plan overrides");
}

void text(CLI::App& app, const std::string& names, std::optional<std::string>& target,
          const std::string& help, const std::string& group) {
    app.add_option_function<std::string>(
           names, [&target](const std::string& v) { target = v; }, help)
        ->group(group);
}

void flag(CLI::App& app, const std::string& names, std::optional<bool>& target,
          const std::string& help) {
    app.add_flag_function(
           names, [&target](std::int64_t count) { target = count > 0; }, help)
        ->group("Plan overrides");
}

void number(CLI::App& app, const std::string& names, std::optional<double>& target,
            const std::string& help) {
    app.add_option_function<double>(
           names, [&target](const double& v) { target = v; }, help)
        ->group("Optimizer (overrides the training spec)");
}

} // namespace

void add_split_options(CLI::App& app, core::JobInputs& in) {
    text(app, "--pipeline-layout,--pipeline-model-parallel-layout", in.pipeline_layout,
         "Layers per virtual stage, 7,8,8,7, or Megatron's \"Et*7|t*8|t*8|t*7L\"",
         "Plan overrides");
    integer(app, "--decoder-first-pipeline-num-layers", in.first_stage_layers,
            "Layers of the first pipeline rank (the others share the rest)");
    integer(app, "--decoder-last-pipeline-num-layers", in.last_stage_layers,
            "Layers of the last pipeline rank (the others share the rest)");
    flag(app, "--account-for-embedding-in-pipeline-split", in.account_for_embedding,
         "Count the embedding as a layer when splitting (the first stage holds one fewer)");
    flag(app, "--account-for-loss-in-pipeline-split", in.account_for_loss,
         "Count the loss as a layer when splitting (the last stage holds one fewer)");
}

void add_fp8_options(CLI::App& app, core::JobInputs& in) {
    const std::string group = "Precision";
    text(app, "--precision", in.precision,
         "bf16 | fp8-delayed | fp8-tensorwise | fp8-blockwise | mxfp8 | nvfp4 (the linear layers' "
         "GEMMs)",
         group);
    text(app, "--fp8-format", in.fp8_format, "Megatron: e4m3 | hybrid (turns FP8 on)", group);
    text(app, "--fp8-recipe", in.fp8_recipe, "Megatron: delayed | tensorwise | blockwise | mxfp8",
         group);
    app.add_flag_function(
           "--fp8-param-gather", [&in](std::int64_t n) { in.fp8_param_gather = n > 0; },
           "Keep and all-gather the weights in FP8")
        ->group(group);
    text(app, "--fp4-format", in.fp4_format, "Megatron: e2m1 (turns NVFP4 on; excludes FP8)",
         group);
    text(app, "--fp4-recipe", in.fp4_recipe, "Megatron: nvfp4", group);
    app.add_flag_function(
           "--fp4-param-gather", [&in](std::int64_t n) { in.fp4_param_gather = n > 0; },
           "Keep and all-gather the weights in NVFP4")
        ->group(group);
    app.add_flag_function(
           "--first-last-layers-bf16", [&in](std::int64_t n) { in.first_last_layers_bf16 = n > 0; },
           "Leave the first and last layers in BF16")
        ->group(group);
    app.add_option_function<std::int64_t>(
           "--num-layers-at-start-in-bf16",
           [&in](const std::int64_t& v) { in.bf16_layers_at_start = v; },
           "With --first-last-layers-bf16 (default 1)")
        ->group(group);
    app.add_option_function<std::int64_t>(
           "--num-layers-at-end-in-bf16",
           [&in](const std::int64_t& v) { in.bf16_layers_at_end = v; },
           "With --first-last-layers-bf16 (default 1)")
        ->group(group);
    app.add_option_function<std::int64_t>(
           "--fp8-amax-history-len", [&in](const std::int64_t& v) { in.fp8_amax_history = v; },
           "Delayed scaling's amax history (default 1024)")
        ->group(group);
}

void add_sharding_options(CLI::App& app, core::JobInputs& in) {
    const std::string group = "Data-parallel sharding";
    text(app, "--data-parallel-sharding-strategy", in.data_parallel_sharding_strategy,
         "no_shard | optim (ZeRO-1) | optim_grads (ZeRO-2) | optim_grads_params (ZeRO-3, FSDP)",
         group);
    app.add_option_function<std::int64_t>(
           "--zero-stage",
           [&in](const std::int64_t& v) {
               in.data_parallel_sharding_strategy = "zero-" + std::to_string(v);
           },
           "DeepSpeed's spelling: 0-3")
        ->group(group);
    app.add_flag_function(
           "--use-megatron-fsdp", [&in](std::int64_t n) { in.use_megatron_fsdp = n > 0; },
           "Shard through Megatron-FSDP (with --data-parallel-sharding-strategy)")
        ->group(group);
    app.add_flag_function(
           "--use-torch-fsdp2", [&in](std::int64_t n) { in.use_torch_fsdp2 = n > 0; },
           "Shard the parameters through PyTorch FSDP2")
        ->group(group);
    // Megatron renamed --keep-fp8-transpose-cache-when-using-custom-fsdp in August 2025.
    app.add_flag_function(
           "--keep-fp8-transpose-cache,--keep-fp8-transpose-cache-when-using-custom-fsdp",
           [&in](std::int64_t n) { in.keep_fp8_transpose_cache = n > 0; },
           "Megatron-FSDP keeps the FP8 weight transposes from forward to backward")
        ->group(group);
    app.add_option_function<std::int64_t>(
           "--num-distributed-optimizer-instances",
           [&in](const std::int64_t& v) { in.optimizer_instances = v; },
           "Replicas of the sharded state (hybrid sharding: shard inside, replicate across)")
        ->group(group);
    app.add_option_function<std::int64_t>(
           "--fsdp-prefetch-units", [&in](const std::int64_t& v) { in.fsdp_prefetch_units = v; },
           "Layers gathered ahead of the one computing (default 1; 0: no overlap)")
        ->group(group);
}

void add_optimizer_options(CLI::App& app, core::JobInputs& in) {
    const std::string group = "Optimizer (overrides the training spec)";
    number(app, "--lr", in.lr, "Peak learning rate");
    number(app, "--min-lr", in.min_lr, "Learning rate at the end of the decay");
    app.add_option_function<std::int64_t>(
           "--lr-warmup-iters", [&in](const std::int64_t& v) { in.lr_warmup_iters = v; },
           "Linear warmup steps")
        ->group(group);
    app.add_option_function<std::int64_t>(
           "--lr-decay-iters", [&in](const std::int64_t& v) { in.lr_decay_iters = v; },
           "Steps over which the rate decays to --min-lr (default: train iters)")
        ->group(group);
    text(app, "--lr-decay-style", in.lr_decay_style, "cosine | linear | constant", group);
    number(app, "--clip-grad", in.clip_grad, "Global gradient-norm clip (0: off)");
    number(app, "--weight-decay", in.weight_decay, "AdamW weight decay (matrices only)");
    number(app, "--adam-beta1", in.adam_beta1, "AdamW beta1");
    number(app, "--adam-beta2", in.adam_beta2, "AdamW beta2");
    app.add_option_function<std::int64_t>(
           "--seed", [&in](const std::int64_t& v) { in.seed = v; },
           "Seed of the initial weights and the data order (default: the training spec's)")
        ->group(group);
}

void add_spec_options(CLI::App& app, core::JobInputs& in, std::string* nodes_list) {
    const std::string job = "Job (preset name or JSON path)";
    text(app, "--model", in.model, "Model preset or trident.model/1 file", job);
    text(app, "--cluster", in.cluster, "Cluster preset or trident.cluster/1 file", job);
    text(app, "--training", in.training, "trident.training/1 file", job);
    text(app, "--plan", in.plan, "Plan preset or trident.plan/1 file (may name model/cluster)",
         job);
    if (nodes_list)
        app.add_option("--nodes", *nodes_list,
                       "Number of nodes (overrides the cluster's); a list such as 64,128,256 "
                       "plans each size and compares them")
            ->group(job);
    else
        app.add_option_function<std::int64_t>(
               "--nodes", [&in](const std::int64_t& v) { in.nodes = v; },
               "Number of nodes (overrides the cluster's)")
            ->group(job);
    app.add_option_function<std::int64_t>(
           "--devices-per-node", [&in](const std::int64_t& v) { in.devices_per_node = v; },
           "Devices per node (overrides the cluster's; e.g. 1 for a single-rank run on localhost)")
        ->group(job);

    integer(app, "--make-vocab-size-divisible-by", in.make_vocab_size_divisible_by,
            "Pad the vocabulary to a multiple of this · tp (overrides the model's; default 128)");
    app.add_option_function<double>(
           "--norm-epsilon", [&in](const double& v) { in.norm_epsilon = v; },
           "Epsilon of every norm (overrides the model's; default 1e-5)")
        ->group(job);
    app.add_option_function<double>(
           "--moe-aux-loss-coeff", [&in](const double& v) { in.moe_aux_loss_coeff = v; },
           "Load-balancing loss weight (overrides the model's moe.aux_loss_coeff; 0: none)")
        ->group(job);
    app.add_option_function<double>(
           "--moe-z-loss-coeff", [&in](const double& v) { in.moe_z_loss_coeff = v; },
           "Router z-loss weight (overrides the model's moe.z_loss_coeff; default none)")
        ->group(job);
    text(app, "--moe-expert-capacity-factor", in.moe_expert_capacity_factor,
         "Capacity factor of every expert (overrides the model's; none: dropless; plan: a "
         "list such as none,1.0,1.25 to search)",
         job);
    text(app, "--moe-load-balance", in.moe_load_balance,
         "How routed tokens fall on the experts (overrides the model's moe.load_balance): "
         "forced, aux-loss, or a .json file `run --moe-routing-out` wrote",
         job);
    app.add_flag_function(
           "--moe-pad-expert-input-to-capacity",
           [&in](std::int64_t n) { in.moe_pad_expert_input_to_capacity = n > 0; },
           "Pad every expert's input to its capacity (needs --moe-expert-capacity-factor)")
        ->group(job);
    app.add_option_function<std::int64_t>(
           "--mtp-num-layers", [&in](const std::int64_t& v) { in.mtp_num_layers = v; },
           "Multi-token-prediction modules on the last stage (overrides the model's; "
           "DeepSeek-V3 trains with 1)")
        ->group(job);
    app.add_option_function<double>(
           "--mtp-loss-scaling-factor", [&in](const double& v) { in.mtp_loss_scaling_factor = v; },
           "Weight of the MTP losses (default 0.1; recorded and exported)")
        ->group(job);
    app.add_flag_function(
           "--use-precision-aware-optimizer",
           [&in](std::int64_t n) { in.use_precision_aware_optimizer = n > 0; },
           "Megatron's precision-aware optimizer: lets the dtypes below differ from fp32")
        ->group(job);
    for (auto [name, target, help] :
         {std::tuple{"--main-grads-dtype", &in.main_grads_dtype, "fp32 | bf16: main gradients"},
          std::tuple{"--exp-avg-dtype", &in.exp_avg_dtype, "fp32 | bf16 | fp16 | fp8: Adam's m"},
          std::tuple{"--exp-avg-sq-dtype", &in.exp_avg_sq_dtype,
                     "fp32 | bf16 | fp16 | fp8: Adam's v (the same as m here)"},
          std::tuple{"--main-params-dtype", &in.main_params_dtype, "fp32 (main parameters)"}})
        text(app, name, *target, help, job);
    integer(app, "--gbs,--global-batch-size", in.global_batch_size, "Global batch (sequences)");
    integer(app, "--seq-length", in.seq_length, "Sequence length (tokens)");
    integer(app, "--train-iters", in.train_iters, "Training iterations");
}

void add_job_options(CLI::App& app, core::JobInputs& in) {
    add_spec_options(app, in);
    integer(app, "--tp,--tensor-model-parallel-size", in.tp, "Tensor-parallel degree");
    integer(app, "--pp,--pipeline-model-parallel-size", in.pp, "Pipeline-parallel degree");
    text(app, "--dp,--data-parallel-size", in.dp, "Data-parallel degree, or 'auto'",
         "Plan overrides");
    integer(app, "--cp,--context-parallel-size", in.cp, "Context-parallel degree");
    integer(app, "--ep,--expert-model-parallel-size", in.ep, "Expert-parallel degree");
    integer(app, "--etp,--expert-tensor-parallel-size", in.etp,
            "Tensor-parallel degree of the experts (MoE parallel folding; default: tp)");
    text(app, "--moe-token-dispatcher-type", in.moe_token_dispatcher,
         "allgather | alltoall (default) | flex (DeepEP)", "Plan overrides");
    integer(app, "--vpp,--virtual-pipeline-model-parallel-size", in.vpp,
            "Virtual stages per pipeline rank");
    integer(app, "--num-layers-per-virtual-pipeline-stage", in.num_layers_per_virtual_stage,
            "Megatron's spelling of --vpp: layers per model chunk");
    add_split_options(app, in);
    add_fp8_options(app, in);
    add_sharding_options(app, in);
    integer(app, "--mbs,--micro-batch-size", in.micro_batch_size, "Micro-batch size");
    text(app, "--schedule", in.schedule,
         "gpipe | 1f1b | interleaved-1f1b | zero-bubble-h1 | zero-bubble-v | dualpipe | dualpipev",
         "Plan overrides");
    text(app, "--recompute,--recompute-granularity", in.recompute, "none | selective | full",
         "Plan overrides");
    app.add_flag_function(
           "--recompute-activations", [&in](std::int64_t) { in.recompute = "selective"; },
           "Megatron's alias for --recompute selective")
        ->group("Plan overrides");
    text(app, "--recompute-method", in.recompute_method, "block | uniform (full only)",
         "Plan overrides");
    integer(app, "--recompute-num-layers", in.recompute_num_layers,
            "Layers per model chunk recomputed (full only)");
    app.add_option_function<std::vector<std::string>>(
           "--recompute-modules",
           [&in](const std::vector<std::string>& given) {
               // Megatron takes them space-separated; a comma-separated list works too.
               std::vector<std::string> modules;
               for (const std::string& word : given)
                   for (std::size_t start = 0; start <= word.size();) {
                       const std::size_t end = std::min(word.find(',', start), word.size());
                       if (end > start) modules.push_back(word.substr(start, end - start));
                       start = end + 1;
                   }
               in.recompute_modules = modules;
           },
           "Selective recomputation's modules (Megatron-Core): core_attn (default) moe_act "
           "layernorm mla_up_proj mlp moe shared_experts; implies --recompute selective")
        ->expected(1, -1)
        ->group("Plan overrides");
    flag(app, "--sequence-parallel,!--no-sequence-parallel", in.sequence_parallel,
         "Sequence parallelism (needs tp > 1)");
    flag(app, "--distributed-optimizer,--use-distributed-optimizer,!--no-distributed-optimizer",
         in.distributed_optimizer, "Shard optimizer state over data-parallel ranks (ZeRO-1)");
    flag(app, "--allow-cross-node-tp", in.allow_cross_node_tp,
         "Allow tensor-parallel groups to span nodes");
    flag(app, "--overlap-grad-reduce,!--no-overlap-grad-reduce", in.overlap_grad_reduce,
         "Reduce gradient buckets while the last backward runs");
    flag(app, "--overlap-param-gather,!--no-overlap-param-gather", in.overlap_param_gather,
         "Gather updated parameters during the next forward (distributed optimizer)");
    flag(app, "--overlap-p2p-communication,!--no-overlap-p2p-communication", in.overlap_p2p_comm,
         "Run pipeline sends beside the next compute (Megatron: interleaved schedule only; default "
         "on)");
    flag(app, "--async-tensor-model-parallel-allreduce,!--no-async-tensor-model-parallel-allreduce",
         in.async_tp_backward,
         "Launch a column-parallel layer's backward all-reduce (reduce-scatter and re-gather "
         "under sequence parallelism) beside its GEMMs (Megatron's default since late 2021)");
    flag(app, "--overlap-moe-expert-parallel-comm,!--no-overlap-moe-expert-parallel-comm",
         in.overlap_moe_expert_parallel_comm,
         "Merge one micro-batch's forward with another's backward, each one's MoE all-to-all "
         "beside the other's compute (needs ep > 1, alltoall or flex)");
    flag(app, "--moe-shared-expert-overlap,!--no-moe-shared-expert-overlap",
         in.moe_shared_expert_overlap,
         "Run the shared experts on their own stream beside the MoE token exchange "
         "(alltoall or flex; not with --overlap-moe-expert-parallel-comm)");
    flag(app, "--tp-comm-overlap,!--no-tp-comm-overlap", in.tp_comm_overlap,
         "Overlap the sequence-parallel collectives with the GEMMs (needs sequence parallelism)");
    flag(app, "--flash-attention,--use-flash-attn,!--no-flash-attention", in.flash_attention,
         "Fused attention without stored scores (default on)");
}

} // namespace trident::cli
