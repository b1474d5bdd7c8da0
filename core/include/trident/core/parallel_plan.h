#pragma once
// ParallelPlan: how one training step is split over devices — tensor (tp), context (cp),
// expert (ep), data (dp) and pipeline (pp) degrees, virtual stages, micro-batching, the
// pipeline schedule, activation recomputation and optimizer sharding.
#include "trident/core/dtype.h"
#include "trident/core/json_io.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trident::core {

enum class ScheduleKind {
    gpipe,
    one_f_one_b,
    interleaved_1f1b,
    zero_bubble_h1,
    zero_bubble_v,
    dualpipe,
    dualpipev
};
inline constexpr std::array<std::string_view, 7> kScheduleNames = {
    "gpipe",         "1f1b",     "interleaved-1f1b", "zero-bubble-h1",
    "zero-bubble-v", "dualpipe", "dualpipev"};

// How a schedule places model chunks on the pipeline ranks.
//  loop: chunk c of rank r is virtual stage c·p + r (Narayanan et al. 2021) — the one-chunk
//    schedules and interleaved 1F1B.
//  v_shape: chunk 0 of rank r is stage r and chunk 1 is stage 2p − 1 − r, so the model runs
//    down the ranks and back up and rank 0 holds the first and the last stage (ZB-V, Qi et
//    al. 2024, "Pipeline Parallelism with Controllable Memory"; DualPipeV, DeepSeek-AI 2025).
//  two_copies: DualPipe (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", §3.2.1) keeps two
//    copies of a p-stage model: chunk 0 of rank r is stage r of copy 0, chunk 1 is stage
//    p − 1 − r of copy 1; the first half of the micro-batches go through copy 0, the rest
//    through copy 1, from the other end.
enum class StagePlacement { loop, v_shape, two_copies };
constexpr StagePlacement placement_of(ScheduleKind k) {
    if (k == ScheduleKind::zero_bubble_v || k == ScheduleKind::dualpipev)
        return StagePlacement::v_shape;
    return k == ScheduleKind::dualpipe ? StagePlacement::two_copies : StagePlacement::loop;
}
// The V-shaped schedules and DualPipe hold exactly two model chunks per rank (vpp = 2).
constexpr bool holds_two_chunks(ScheduleKind k) {
    return placement_of(k) != StagePlacement::loop;
}
// Whether the schedule runs a layer's W apart from its B (zero-bubble schedules fill the
// pipeline's bubbles with deferred W passes; ZB-V, DualPipe and DualPipeV defer some).
constexpr bool defers_weight_gradients(ScheduleKind k) {
    return k == ScheduleKind::zero_bubble_h1 || holds_two_chunks(k);
}

// The stage that chunk `chunk` of pipeline rank `rank` of `stages` holds: the index of its
// layers in the pipeline split (for DualPipe, in either copy). The one definition; Schedule
// and every part without a Schedule at hand use it.
constexpr std::int32_t virtual_stage(ScheduleKind kind, std::int32_t chunk, std::int32_t stages,
                                     std::int32_t rank) {
    switch (placement_of(kind)) {
    case StagePlacement::v_shape:
        return chunk == 0 ? rank : 2 * stages - 1 - rank;
    case StagePlacement::two_copies:
        return chunk == 0 ? rank : stages - 1 - rank;
    case StagePlacement::loop:
        break;
    }
    return chunk * stages + rank;
}

// Korthikanti et al. 2022: selective recomputes the attention core of every layer; full
// recomputes whole layers from their input.
enum class RecomputeGranularity { none, selective, full };
inline constexpr std::array<std::string_view, 3> kRecomputeGranularityNames = {"none", "selective",
                                                                               "full"};

// Megatron --recompute-method: `block` recomputes the first num_layers layers of each model
// chunk and keeps the rest; `uniform` checkpoints every num_layers-th layer input and
// recomputes all layers in groups of num_layers.
enum class RecomputeMethod { block, uniform };
inline constexpr std::array<std::string_view, 2> kRecomputeMethodNames = {"block", "uniform"};

// FP8 training (Micikevicius et al. 2022; NVIDIA Transformer Engine): the scaling recipe of the
// linear layers' GEMMs (Megatron --fp8-recipe). `none` trains in the parameters' dtype (BF16).
// delayed: per-tensor scales from an amax history; tensorwise: per-tensor scales from the
// current amax (an extra pass); blockwise: 1×128 activation and 128×128 weight scales
// (DeepSeek-V3); mxfp8: 1×32 E8M0 block scales (Blackwell tensor cores); nvfp4: E2M1 values
// with E4M3 scales per 16 and an fp32 scale per tensor (Megatron-Core's --fp4-format e2m1
// --fp4-recipe nvfp4, `parallel.fp4` in a plan; Blackwell) — the same linear layers in 4 bits.
enum class Fp8Recipe { none, delayed, tensorwise, blockwise, mxfp8, nvfp4 };
inline constexpr std::array<std::string_view, 6> kFp8RecipeNames = {
    "none", "delayed", "tensorwise", "blockwise", "mxfp8", "nvfp4"};
// Bytes per element of a tensor stored in a recipe's format: 1 for the FP8 recipes (their
// scales are a few bytes per block of 32 to 128×128), 0.5 + 1/16 for NVFP4 (E2M1 two to a
// byte, an E4M3 scale per 16); 0 for none.
constexpr double quantized_bytes(Fp8Recipe r) {
    return r == Fp8Recipe::none ? 0.0 : r == Fp8Recipe::nvfp4 ? 0.5 + 1.0 / 16.0 : 1.0;
}
// The dtype of a recipe's GEMM inputs, table and peak: fp4 for NVFP4, fp8 for the FP8 recipes.
constexpr Dtype quantized_dtype(Fp8Recipe r) {
    return r == Fp8Recipe::nvfp4 ? Dtype::fp4 : Dtype::fp8;
}
// "FP8 parameter gather" or, under NVFP4, "NVFP4 parameter gather" (fp8.param_gather's name in
// banners and the planner's explanations).
std::string param_gather_name(Fp8Recipe r);
// The precision names the planner and the report use: "bf16", "fp8-delayed", …, "mxfp8",
// "nvfp4".
std::string precision_name(Fp8Recipe r);
// Megatron --fp8-format: E4M3 everywhere, or hybrid (E4M3 forward, E5M2 gradients).
enum class Fp8Format { e4m3, hybrid };
inline constexpr std::array<std::string_view, 2> kFp8FormatNames = {"e4m3", "hybrid"};

struct Fp8 {
    Fp8Recipe recipe = Fp8Recipe::none;
    Fp8Format format = Fp8Format::hybrid;
    bool param_gather = false; // --fp8-param-gather: weights kept and all-gathered in FP8
    // --first-last-layers-bf16 with --num-layers-at-start/end-in-bf16: layers left in BF16.
    std::int64_t bf16_layers_at_start = 0, bf16_layers_at_end = 0;
    std::int64_t amax_history = 1024; // --fp8-amax-history-len (delayed)
    bool enabled() const { return recipe != Fp8Recipe::none; }
};

// Data-parallel sharding (Rajbhandari et al. 2020, "ZeRO"), by Megatron's
// --data-parallel-sharding-strategy names: optim shards the optimizer state (ZeRO-1: Megatron's
// distributed optimizer), optim_grads the gradients too (ZeRO-2), optim_grads_params the
// parameters too (ZeRO-3 / FSDP: each layer all-gathered before its forward and again before
// its backward, its gradients reduce-scattered after it).
enum class DataSharding { no_shard, optim, optim_grads, optim_grads_params };
inline constexpr std::array<std::string_view, 4> kDataShardingNames = {
    "no_shard", "optim", "optim_grads", "optim_grads_params"};
// What runs the gradient and parameter sharding: Megatron-FSDP (--use-megatron-fsdp) or PyTorch
// FSDP2 (--use-torch-fsdp2, which always shards the parameters). The cost model is the same;
// the exported arguments differ.
enum class FsdpImplementation { megatron, torch };
inline constexpr std::array<std::string_view, 2> kFsdpImplementationNames = {"megatron-fsdp",
                                                                             "torch-fsdp2"};

// Megatron-Core's --moe-token-dispatcher-type: how routed tokens reach the experts.
// allgather: every tp·ep rank all-gathers the hidden states (and routing map, probabilities)
// and keeps the tokens its experts take; combine reduce-scatters. alltoall: each routed copy
// (top-k per token) crosses the ep group in an all-to-all, tp ranks all-gather the ones they
// received. flex (DeepEP, --moe-enable-deepep): a fused all-to-all over tp·ep that sends a
// token once per destination rank, however many of its experts live there.
enum class TokenDispatcher { allgather, alltoall, flex };
inline constexpr std::array<std::string_view, 3> kTokenDispatcherNames = {"allgather", "alltoall",
                                                                          "flex"};

struct Sharding {
    DataSharding strategy = DataSharding::no_shard; // ZeRO-2/3 (ZeRO-1: distributed_optimizer)
    FsdpImplementation implementation = FsdpImplementation::megatron;
    // --num-distributed-optimizer-instances: the dp·cp ranks form this many replicas, each
    // sharding the state over its own dp·cp / instances ranks (hybrid sharding, HSDP: shard
    // inside a node, replicate across nodes).
    std::int64_t instances = 1;
    // FSDP units (layers) gathered ahead of the one computing: 1 is Megatron-FSDP's double
    // buffer and FSDP2's default prefetch; 0 gathers each unit only when it is needed.
    std::int64_t prefetch_units = 1;
    // --keep-fp8-transpose-cache: Megatron-FSDP keeps each FP8 weight's transpose (columnwise
    // copy) from the forward to the backward instead of dropping it after the forward and
    // casting it again (mixed_precision.py fp8_discard_transpose_cache).
    bool keep_fp8_transpose_cache = false;
};

// Megatron's default order: tp varies fastest, then cp, ep, dp, and pp slowest, so tensor
// groups stay inside a node. Expert parallelism is carved out of the cp·dp ranks.
inline constexpr std::string_view kDefaultRankOrder = "tp-cp-ep-dp-pp";

// Megatron-Core's --recompute-modules (with granularity selective): the parts of every layer
// whose activations the backward rebuilds instead of keeping. core_attn (the default), mlp
// (a dense MLP), moe (a whole MoE block, its token exchange included) and shared_experts keep
// their input and rerun the part; moe_act (the experts' activation), layernorm (norms whose
// output feeds more than one consumer, so not fused into the next GEMM: MLA's input norm, an
// MoE block's norm) and mla_up_proj (MLA's q/kv up-projections and rotary parts) drop their
// output once used and rebuild it (Megatron's CheckpointWithoutOutput).
enum class RecomputeModule : std::uint8_t {
    core_attn,
    moe_act,
    layernorm,
    mla_up_proj,
    mlp,
    moe,
    shared_experts
};
inline constexpr std::array<std::string_view, 7> kRecomputeModuleNames = {
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"};
constexpr std::uint32_t module_bit(RecomputeModule m) {
    return 1u << unsigned(m);
}

struct Recompute {
    RecomputeGranularity granularity = RecomputeGranularity::none;
    RecomputeMethod method = RecomputeMethod::block;
    std::int64_t num_layers = 0; // full only: layers per model chunk
    // selective only: a set of module_bit()s; Megatron's default is core_attn alone.
    std::uint32_t modules = module_bit(RecomputeModule::core_attn);
    // Whether selective recomputation rebuilds module `m`.
    bool selects(RecomputeModule m) const {
        return granularity == RecomputeGranularity::selective && (modules & module_bit(m)) != 0;
    }
};
// "core_attn,moe_act" (the modules of a selective recomputation, in kRecomputeModuleNames order).
std::string recompute_modules_text(std::uint32_t modules);
// Module names (a JSON array of kRecomputeModuleNames) as module_bit()s; SpecError naming
// `path`[i] for an unknown or repeated name.
std::uint32_t recompute_modules_from_json(const Json& j, const std::string& path);
// The output-discarding modules (layernorm, mla_up_proj, moe_act) that apply to a model with
// these parts, beside core_attn: the cheap recomputation Megatron-Core offers MoE and MLA
// models before recomputing whole modules (0 when the model has neither).
std::uint32_t light_recompute_modules(bool moe, bool mla);

struct ParallelPlan {
    std::int64_t tp = 1;
    std::int64_t pp = 1;
    std::int64_t dp = 1;
    std::int64_t cp = 1;
    std::int64_t ep = 1;
    // Megatron-Core's --expert-tensor-parallel-size ("MoE parallel folding", Liu et al. 2025):
    // the expert layers split each expert over etp ranks and spread the experts over ep, both
    // carved out of a stage's tp·cp·dp ranks (etp fastest, then ep, then expert-dp), while
    // attention keeps tp·cp·dp. Absent: etp = tp, the experts sliced like the dense MLP.
    std::optional<std::int64_t> etp;
    std::int64_t vpp = 1; // model chunks per pipeline rank (2 for V-shaped and DualPipe)
    // Uneven stages (core/pipeline_split.h): the layers of every virtual stage, or Megatron-
    // Core's first/last pipeline rank layer counts, or the embedding and loss counted as a
    // layer each. All absent: every virtual stage holds num_layers / (pp·vpp).
    std::vector<std::int64_t> pipeline_layout;
    std::optional<std::int64_t> first_stage_layers; // --decoder-first-pipeline-num-layers
    std::optional<std::int64_t> last_stage_layers;  // --decoder-last-pipeline-num-layers
    bool account_for_embedding = false;             // --account-for-embedding-in-pipeline-split
    bool account_for_loss = false;                  // --account-for-loss-in-pipeline-split
    bool sequence_parallel = false;
    std::int64_t micro_batch_size = 1;
    ScheduleKind schedule = ScheduleKind::one_f_one_b;
    Recompute recompute;
    Fp8 fp8;
    // Trident's default is alltoall (Megatron's own is allgather; exports always name it).
    TokenDispatcher token_dispatcher = TokenDispatcher::alltoall;
    bool distributed_optimizer = false; // ZeRO-1: optimizer state sharded over dp (·cp)
    Sharding sharding;                  // ZeRO-2/3, FSDP, hybrid sharding
    bool overlap_grad_reduce = false;   // reduce gradient buckets during the last backward
    bool overlap_param_gather = false;  // gather updated parameters during the next forward
    // --tp-comm-overlap: the sequence-parallel all-gathers and reduce-scatters run beside the
    // GEMMs they feed or drain, split into tp pieces (Transformer Engine's userbuffers).
    bool tp_comm_overlap = false;
    // Megatron's async_tensor_model_parallel_allreduce (--no-async-tensor-model-parallel-
    // allreduce turns it off): a column-parallel layer's backward launches its input-gradient
    // all-reduce (reduce-scatter, and the input's re-gather, under sequence parallelism) beside
    // its GEMMs. On since late 2021; the SC'21 runs predate it.
    bool async_tp_backward = true;
    // Megatron's overlap_p2p_comm (--no-overlap-p2p-communication turns it off): pipeline
    // sends run beside the next compute. Megatron does so only in the interleaved schedule;
    // everywhere else (and in 2021's Megatron) a rank's stream waits for each send.
    bool overlap_p2p_comm = true;
    // Megatron-Core's --overlap-moe-expert-parallel-comm: the forward of one micro-batch and the
    // backward of another run merged (combined 1F1B), each one's MoE dispatch and combine
    // beside the other's compute. Needs ep > 1 and the alltoall or flex dispatcher.
    bool overlap_moe_expert_parallel_comm = false;
    // Megatron-Core's --moe-shared-expert-overlap: the shared experts run on their own stream
    // beside the token exchange (fc1 during the dispatch, fc2 during the combine).
    bool moe_shared_expert_overlap = false;
    // Whether pipeline sends run beside the next compute: Megatron's interleaved schedule, and
    // the two-chunk schedules as their references post them — DualPipe commits a chunk's sends
    // when the next chunk starts and waits for them at the one after (deepseek-ai/DualPipe),
    // PyTorch's ScheduleZBVZeroBubble waits for its sends only at the step's end.
    bool p2p_overlapped() const {
        return overlap_p2p_comm &&
               (schedule == ScheduleKind::interleaved_1f1b || holds_two_chunks(schedule));
    }
    // Fused attention that never stores the s² scores (Dao 2022). Off: Megatron's 2021 path of
    // two batched GEMMs around a fused scale-mask-softmax (and dropout), scores kept.
    bool flash_attention = true;
    bool allow_cross_node_tp = false;
    std::string rank_order = std::string(kDefaultRankOrder);

    std::int64_t devices() const { return tp * cp * dp * pp; }
    // Stages the layers are split over: pp·vpp, but pp for DualPipe, whose two chunks per
    // rank are stages of two copies of one pp-stage model.
    std::int64_t model_stages() const {
        return placement_of(schedule) == StagePlacement::two_copies ? pp : pp * vpp;
    }
    // Micro-batches each model chunk runs in a step of m: m, but m/2 for DualPipe (each copy
    // takes half of them).
    std::int64_t chunk_microbatches(std::int64_t m) const {
        return placement_of(schedule) == StagePlacement::two_copies ? m / 2 : m;
    }
    std::int64_t expert_tp() const { return etp.value_or(tp); }
    // Ranks holding the same experts: tp·cp·dp / (etp·ep) (dp·cp / ep when etp = tp).
    std::int64_t expert_dp() const { return (tp * dp * cp) / (expert_tp() * ep); }
    // Whether etp·ep ranks tile a stage's tp·cp·dp (ep tiles dp·cp when etp is not given).
    bool expert_grid_tiles() const {
        return ep >= 1 && expert_tp() >= 1 &&
               (etp ? (tp * cp * dp) % (*etp * ep) == 0 : (dp * cp) % ep == 0);
    }
    // ZeRO stage 0–3: distributed_optimizer decides ZeRO-1 (whatever the strategy field says
    // below optim_grads), the strategy ZeRO-2 and 3.
    int zero_stage() const {
        if (sharding.strategy >= DataSharding::optim_grads) return int(sharding.strategy);
        return distributed_optimizer ? 1 : 0;
    }
    // Ranks one shard of the dense / expert state is spread over (dp·cp, expert-dp, divided
    // into the hybrid-sharding replicas).
    std::int64_t shard_ranks() const { return (dp * cp) / sharding.instances; }
    std::int64_t expert_shard_ranks() const { return expert_dp() / sharding.instances; }
};

std::string to_string(ScheduleKind s);
std::string to_string(RecomputeGranularity g);
std::string to_string(RecomputeMethod m);
// A table cell: "none", "selective", "full 2" (layers per chunk).
std::string short_text(const Recompute& r);
// A sentence's: "none", "selective", "full (block: 2 of 4 layers per chunk)", "full (uniform:
// every layer, in groups of 1)".
std::string describe(const Recompute& r, std::int64_t layers_per_chunk);
// The plan fields that change what a run does beyond its degrees, for banners: "recompute
// full (block: 4 of 4 layers per chunk) · sequence parallel off · distributed optimizer on ·
// flash attention on · overlap grad-reduce on, param-gather off".
std::string describe_features(const ParallelPlan& p, std::int64_t layers_per_chunk);

// `parallel.fp8`: a recipe name ("tensorwise") or {recipe, format, param_gather,
// num_layers_at_start_in_bf16, num_layers_at_end_in_bf16, amax_history_len}.
Fp8 fp8_from_json(const Json& j, const std::string& path = "parallel.fp8");
// NVFP4's object (`parallel.fp4`): its recipe nvfp4.
Fp8 fp4_from_json(const Json& j, const std::string& path = "parallel.fp4");

// The sharding of `parallel` (data_parallel_sharding_strategy, use_megatron_fsdp,
// use_torch_fsdp2, num_distributed_optimizer_instances, fsdp_prefetch_units), read after
// distributed_optimizer: a strategy of optim or more turns the distributed optimizer on; an
// explicit distributed_optimizer false beside one is refused. core/src/data_sharding.cpp.
void read_sharding(ObjectReader& r, ParallelPlan& p);
void write_sharding(const ParallelPlan& p, Json& parallel);
void validate_sharding(const ParallelPlan& p, const std::string& path);
// "zero-3 (optim_grads_params, Megatron-FSDP, 4 replicas)"; "zero-1 (distributed optimizer)".
std::string describe_sharding(const ParallelPlan& p);
// A table cell: "0", "1", "2", "3", with the replicas of hybrid sharding: "3h4".
std::string sharding_cell(const ParallelPlan& p);
// A strategy from its Megatron name or ZeRO alias ("zero-2", "zero2", "2").
DataSharding parse_data_sharding(const std::string& text, const std::string& field);

// `dp` may be the word "auto" in JSON: it is then left 0 here and resolved from the cluster's
// device count by resolve_job (devices / (tp·cp·pp)).
ParallelPlan plan_from_json(const Json& j, const std::string& path = "parallel");
Json to_json(const ParallelPlan& p);
// Rules that involve the plan alone (positive degrees, schedule vs vpp, ...).
void validate(const ParallelPlan& p, const std::string& path = "parallel");
// The expert grid of a stage: ep (and etp·ep when etp is given) dividing its ranks.
void validate_expert_grid(const ParallelPlan& p, const std::string& path = "parallel");

} // namespace trident::core
