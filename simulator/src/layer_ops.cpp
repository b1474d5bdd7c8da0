// Operations of a transformer layer under tensor/sequence/context/expert parallelism.
// Sources: Shoeybi et al. 2019 (tensor-parallel GEMM split and its all-reduces), Korthikanti
// et al. 2022 (sequence parallelism: all-gather / reduce-scatter in place of all-reduce;
// selective recomputation of the attention core), Narayanan et al. 2021 (FLOP convention),
// Dao 2023 (flash attention: scores never stored, backward recomputes them), Lepikhin et al.
// 2021 and Megatron-Core's MoE (token all-to-all over the expert group), DeepSeek-V2 2024 (MLA).
#include "trident/simulator/layer_ops.h"

#include <algorithm>
#include <cmath>

namespace trident::simulator {

using core::Collective;
using core::GroupKind;
using core::MemoryKernel;
using core::RecomputeGranularity;

LayerView LayerView::of(const core::ParallelPlan& plan, std::int64_t seq_length) {
    LayerView v;
    v.tp = plan.tp;
    v.cp = plan.cp;
    v.ep = plan.ep;
    v.etp = plan.expert_tp();
    v.sequence_parallel = plan.sequence_parallel;
    v.micro_batch = plan.micro_batch_size;
    v.seq = seq_length;
    v.recompute = plan.recompute.granularity;
    v.flash_attention = plan.flash_attention;
    v.dispatcher = plan.token_dispatcher;
    return v;
}

LayerView LayerView::global(std::int64_t sequences, std::int64_t seq_length) {
    LayerView v;
    v.micro_batch = sequences;
    v.seq = seq_length;
    return v;
}

double routed_copies(const core::MoeSpec& e, const LayerView& v) {
    return double(v.expert_tokens()) * double(e.top_k) * e.capacity_factor.value_or(1.0) *
           e.slowest_rank_load(v.ep);
}

double fp8_weight_cast_bytes(const core::Fp8& fp8, double weights) {
    return fp8.param_gather ? 2.0 * weights : fp8_cast_bytes(fp8.recipe, weights);
}

double fp8_cast_bytes(core::Fp8Recipe recipe, double elements) {
    double bytes = elements * (2.0 + 1.0 + 1.0);
    switch (recipe) {
    case core::Fp8Recipe::tensorwise:
        bytes += 2.0 * elements; // the amax pass before the cast
        break;
    case core::Fp8Recipe::blockwise:
        bytes += 2.0 * 4.0 * elements / 128.0; // fp32 scale per 128 (both directions)
        break;
    case core::Fp8Recipe::mxfp8:
        bytes += 2.0 * elements / 32.0; // E8M0 scale per 32 (both directions)
        break;
    default:
        break;
    }
    return bytes;
}

namespace {

// Bytes of one activation element: the parameters' dtype (bf16 on GPUs, fp32 on the CPU backend).
double element_bytes(const core::ModelSpec& m) {
    return double(core::dtype_bytes(m.precision.params));
}

struct Builder {
    std::vector<Op>& ops;
    const LayerView& v;
    bool full_recompute = false; // repeat every forward op inside the backward
    double bias_bytes = 0.0;     // bytes per element of a linear layer's bias traffic (0: no bias)

    void push(Op op) {
        ops.push_back(op);
        if (full_recompute && op.phase == Phase::forward) {
            op.phase = Phase::backward_input;
            op.recompute = true;
            ops.push_back(op);
        }
    }

    // A linear layer: forward, input gradient (dgrad) and weight gradient (wgrad). Under an
    // FP8 recipe (and unless `bf16`: the router) its three GEMMs run in FP8 after casting the
    // input (forward) and the output gradient (backward), each with its transpose for wgrad.
    // `groups` > 1: that many such layers (MoE experts), m tokens each, as one grouped GEMM.
    void linear(std::string_view name, std::int64_t m, std::int64_t n, std::int64_t k,
                bool bf16 = false, std::int64_t groups = 1) {
        if (m <= 0 || n <= 0 || k <= 0) return;
        const double flops = 2.0 * double(m) * double(n) * double(k), g = double(groups);
        const bool fp8 = v.fp8 != core::Fp8Recipe::none && !bf16;
        if (fp8)
            memory("fp8 cast", MemoryKernel::elementwise,
                   fp8_cast_bytes(v.fp8, g * double(m) * double(k)),
                   fp8_cast_bytes(v.fp8, g * double(m) * double(n)));
        const auto gemm = [&](Phase phase, std::int64_t rows, std::int64_t cols,
                              std::int64_t depth) {
            return Op{.name = name,
                      .kind = OpKind::gemm,
                      .phase = phase,
                      .fp8 = fp8,
                      .grouped = groups > 1,
                      .count = groups,
                      .m = rows,
                      .n = cols,
                      .k = depth,
                      .flops = flops};
        };
        push(gemm(Phase::forward, m, n, k));
        ops.push_back(gemm(Phase::backward_input, m, k, n));
        // wgrad reduces over the tokens: per group a k×n result of depth m.
        ops.push_back(gemm(Phase::backward_weight, k, n, m));
        // A bias is broadcast over the output in the forward and summed over the tokens for
        // its gradient (memory traffic the GEMM tables do not hold).
        if (bias_bytes > 0)
            memory(name, MemoryKernel::elementwise, bias_bytes * g * double(m) * double(n),
                   bias_bytes * g * double(m) * double(n), Phase::backward_weight);
    }

    void memory(std::string_view name, MemoryKernel kernel, double forward_bytes,
                double backward_bytes, Phase backward_phase = Phase::backward_input) {
        if (forward_bytes > 0)
            push({.name = name,
                  .kind = OpKind::memory_bound,
                  .phase = Phase::forward,
                  .kernel = kernel,
                  .bytes = forward_bytes});
        if (backward_bytes > 0)
            ops.push_back({.name = name,
                           .kind = OpKind::memory_bound,
                           .phase = backward_phase,
                           .kernel = kernel,
                           .bytes = backward_bytes});
    }

    // `domain_copy_bytes`: a DeepEP all-to-all's bytes per destination domain (Op).
    void collective(std::string_view name, Collective c, GroupKind group, double bytes, Phase phase,
                    double domain_copy_bytes = 0.0) {
        if (bytes <= 0) return;
        Op op{.name = name,
              .kind = OpKind::collective,
              .phase = phase,
              .collective = c,
              .group = group,
              .bytes = bytes,
              .domain_copy_bytes = domain_copy_bytes};
        if (phase == Phase::forward)
            push(op);
        else
            ops.push_back(op);
    }

    // Entering a tensor-parallel region (before a column-parallel GEMM).
    void enter_tp(std::string_view name, double bytes) {
        if (v.tp == 1) return;
        if (v.sequence_parallel) {
            collective(name, Collective::all_gather, GroupKind::tensor, bytes, Phase::forward);
            collective(name, Collective::reduce_scatter, GroupKind::tensor, bytes,
                       Phase::backward_input);
        } else {
            collective(name, Collective::all_reduce, GroupKind::tensor, bytes,
                       Phase::backward_input);
        }
    }

    // Leaving it (after a row-parallel GEMM).
    void leave_tp(std::string_view name, double bytes) {
        if (v.tp == 1) return;
        if (v.sequence_parallel) {
            collective(name, Collective::reduce_scatter, GroupKind::tensor, bytes, Phase::forward);
            collective(name, Collective::all_gather, GroupKind::tensor, bytes,
                       Phase::backward_input);
        } else {
            collective(name, Collective::all_reduce, GroupKind::tensor, bytes, Phase::forward);
        }
    }
};

MemoryKernel norm_kernel(const core::ModelSpec& m) {
    return m.normalization == core::Normalization::layernorm ? MemoryKernel::layernorm
                                                             : MemoryKernel::rmsnorm;
}

// Bytes of a norm over `tokens × width`: forward reads x, writes y; backward reads x and dy,
// writes dx.
void norm(Builder& b, const core::ModelSpec& m, std::string_view name, double tokens,
          double width) {
    const double x = tokens * width * element_bytes(m);
    b.memory(name, norm_kernel(m), 2 * x, 3 * x);
}

// Residual add (with dropout when the model uses it).
void residual(Builder& b, const core::ModelSpec& m, std::string_view name, double tokens,
              double h) {
    const double x = tokens * h * element_bytes(m);
    const double mask = m.dropout ? tokens * h : 0.0;
    b.memory(name, MemoryKernel::elementwise, 3 * x + mask, 2 * x + mask);
}

void mlp(Builder& b, const core::ModelSpec& m, std::string_view prefix_fc1,
         std::string_view prefix_fc2, std::string_view act_name, std::int64_t tokens,
         std::int64_t width, std::int64_t tp, std::int64_t groups = 1) {
    const bool swiglu = m.activation == core::Activation::swiglu;
    const std::int64_t local = width / tp;
    b.linear(prefix_fc1, tokens, (swiglu ? 2 : 1) * local, m.hidden_size, false, groups);
    const double y = double(groups) * double(tokens) * double(local) * element_bytes(m);
    // GeLU reads x, writes y; SwiGLU reads gate and up (2y), writes y. Backward reads what the
    // forward read plus dy and writes the input gradient.
    if (swiglu)
        b.memory(act_name, MemoryKernel::swiglu, 3 * y, 5 * y);
    else
        b.memory(act_name, MemoryKernel::gelu, 2 * y, 3 * y);
    b.linear(prefix_fc2, tokens, m.hidden_size, local, false, groups);
}

// The projections into the attention core: QKV (GQA: fewer key and value groups), or MLA's
// low-rank ones; returns the widths of a score head and a value head.
std::pair<std::int64_t, std::int64_t> attention_projections(Builder& b, const core::ModelSpec& m,
                                                            const LayerView& v,
                                                            std::int64_t tokens) {
    const std::int64_t h = m.hidden_size, t = v.tp, heads = m.num_attention_heads / t;
    std::int64_t score_dim = m.head_dim, value_dim = m.head_dim;
    if (m.mla) {
        const core::MlaSpec& a = *m.mla;
        score_dim = a.qk_head_dim + a.qk_pos_emb_head_dim;
        value_dim = a.v_head_dim;
        // The down-projections are small and replicated across the tensor group.
        if (a.q_lora_rank > 0) {
            b.linear("q down", tokens, a.q_lora_rank, h);
            norm(b, m, "q norm", double(tokens), double(a.q_lora_rank));
            b.linear("q up", tokens, heads * score_dim, a.q_lora_rank);
        } else {
            b.linear("q", tokens, heads * score_dim, h);
        }
        b.linear("kv down", tokens, a.kv_lora_rank + a.qk_pos_emb_head_dim, h);
        norm(b, m, "kv norm", double(tokens), double(a.kv_lora_rank));
        b.linear("kv up", tokens, heads * (a.qk_head_dim + a.v_head_dim), a.kv_lora_rank);
    } else {
        const std::int64_t q = heads * m.head_dim;
        const std::int64_t kv = (m.num_query_groups / t) * m.head_dim;
        b.linear("qkv", tokens, q + 2 * kv, h);
        if (m.position_embedding == core::PositionEmbedding::rope) {
            // RoPE turns the queries and keys in place (Su et al. 2021), and B their gradients.
            const double qk = double(tokens) * double(q + kv) * element_bytes(m);
            b.memory("rope", MemoryKernel::elementwise, 2 * qk, 2 * qk);
        }
    }
    return {score_dim, value_dim};
}

// Context parallelism: each rank gathers the keys and values of the whole sequence and
// computes 1/cp of the attention (Megatron-Core's all-gather flavour of ring attention).
void context_parallel_kv(Builder& b, const core::ModelSpec& m, const LayerView& v,
                         std::int64_t score_dim, std::int64_t value_dim) {
    const std::int64_t t = v.tp, heads = m.num_attention_heads / t;
    const std::int64_t kv_width =
        m.mla ? heads * (score_dim + value_dim) / 2 : (m.num_query_groups / t) * m.head_dim;
    if (v.cp > 1) {
        const double kv_bytes =
            2.0 * double(v.micro_batch) * double(v.seq) * double(kv_width) * element_bytes(m);
        b.collective("cp kv gather", Collective::all_gather, GroupKind::context, kv_bytes,
                     Phase::forward);
        b.collective("cp kv grad", Collective::reduce_scatter, GroupKind::context, kv_bytes,
                     Phase::backward_input);
    }
}

// The core as flash attention (Dao 2023): one fused kernel each way, timed from the profile's
// attention table; selective recomputation runs the forward again inside B.
void flash_attention_core(Builder& b, const LayerView& v, std::int64_t heads,
                          std::int64_t score_dim, std::int64_t value_dim, double core_flops) {
    Op core{.name = "attention core",
            .kind = OpKind::attention,
            .phase = Phase::forward,
            .batch_heads = v.micro_batch * heads,
            .seq = v.seq,
            .head_dim = (score_dim + value_dim) / 2,
            .causal = true,
            .work_fraction = 1.0 / double(v.cp),
            .flops = core_flops};
    b.push(core);
    if (v.recompute == RecomputeGranularity::selective) { // Korthikanti et al. 2022, §4.2
        Op again = core;
        again.phase = Phase::backward_input;
        again.recompute = true;
        b.ops.push_back(again);
    }
    Op back = core;
    back.phase = Phase::backward_input;
    back.flops = 2.0 * core_flops; // dQ, dK (from dS) and dV, dP: twice the forward
    b.ops.push_back(back);
}

// The core as Megatron ran it before flash attention: batched GEMMs around a stored softmax.
void unfused_attention_core(Builder& b, const core::ModelSpec& m, const LayerView& v,
                            std::int64_t heads, std::int64_t score_dim, std::int64_t value_dim) {
    const double s = double(v.seq), bh = double(v.micro_batch * heads);
    // Megatron before flash attention: one GEMM per (sequence, head) — a batched GEMM —
    // around a fused scale-mask-softmax and the attention dropout, all over b·heads·s²/cp
    // scores. Its backward has no weight gradient: both GEMM gradients land in B.
    const auto rows = std::int64_t(bh) * v.seq / v.cp;
    const double scores = double(rows) * s;
    const bool selective = v.recompute == RecomputeGranularity::selective;
    const auto core_op = [&](Op op) {
        b.push(op);
        if (selective) {
            op.phase = Phase::backward_input;
            op.recompute = true;
            b.ops.push_back(op);
        }
    };
    const std::int64_t batch = std::int64_t(bh), per = rows / batch; // query rows per head
    const auto bmm = [&](std::string_view name, std::int64_t n, std::int64_t k) {
        const double flops = 2.0 * double(per) * double(n) * double(k); // per repetition
        core_op({.name = name,
                 .kind = OpKind::gemm,
                 .phase = Phase::forward,
                 .count = batch,
                 .m = per,
                 .n = n,
                 .k = k,
                 .flops = flops});
        b.ops.push_back({.name = name,
                         .kind = OpKind::gemm,
                         .phase = Phase::backward_input,
                         .count = batch,
                         .m = per,
                         .n = k,
                         .k = n,
                         .flops = flops});
        b.ops.push_back({.name = name,
                         .kind = OpKind::gemm,
                         .phase = Phase::backward_input,
                         .count = batch,
                         .m = k,
                         .n = n,
                         .k = per,
                         .flops = flops});
    };
    bmm("attention scores", v.seq, score_dim);
    // The softmax is exponential-bound like the loss's: timed with that kernel's table
    // (read the scores, write the exponentials, normalise).
    core_op({.name = "softmax",
             .kind = OpKind::memory_bound,
             .phase = Phase::forward,
             .kernel = MemoryKernel::softmax_cross_entropy,
             .bytes = 3.0 * element_bytes(m) * scores});
    b.ops.push_back({.name = "softmax",
                     .kind = OpKind::memory_bound,
                     .phase = Phase::backward_input,
                     .kernel = MemoryKernel::elementwise,
                     .bytes = 3.0 * element_bytes(m) * scores});
    if (m.dropout) {
        core_op({.name = "attention dropout",
                 .kind = OpKind::memory_bound,
                 .phase = Phase::forward,
                 .kernel = MemoryKernel::elementwise,
                 .bytes = (2.0 * element_bytes(m) + 1.0) * scores});
        b.ops.push_back({.name = "attention dropout",
                         .kind = OpKind::memory_bound,
                         .phase = Phase::backward_input,
                         .kernel = MemoryKernel::elementwise,
                         .bytes = (2.0 * element_bytes(m) + 1.0) * scores});
    }
    bmm("attention values", value_dim, v.seq);
}

void attention(Builder& b, const core::ModelSpec& m, const LayerView& v, std::int64_t tokens) {
    const std::int64_t h = m.hidden_size, heads = m.num_attention_heads / v.tp;
    const double act = double(tokens) * double(h) * element_bytes(m);
    b.enter_tp("qkv input", act);
    const auto [score_dim, value_dim] = attention_projections(b, m, v, tokens);
    context_parallel_kv(b, m, v, score_dim, value_dim);
    // Core: QKᵀ and AV, 2·b·heads·s²·d each (full s², Narayanan's convention).
    const double s = double(v.seq), bh = double(v.micro_batch * heads);
    const double core_flops =
        (2.0 * bh * s * s * double(score_dim) + 2.0 * bh * s * s * double(value_dim)) /
        double(v.cp);
    if (v.flash_attention)
        flash_attention_core(b, v, heads, score_dim, value_dim, core_flops);
    else
        unfused_attention_core(b, m, v, heads, score_dim, value_dim);
    b.linear("attention out", tokens, h, heads * value_dim);
    b.leave_tp("attention out", act);
}

// What one MoE layer's token exchange moves on this rank: the hidden states it routes
// (norm_tokens × hidden), the routed copies its experts take (the tp group's tokens × top-k,
// padded to capacity, times the busiest rank's load, moe.load_balance), and those factors.
struct Exchange {
    double rank_bytes = 0, received_bytes = 0, norm_tokens = 0, capacity = 1, load = 1;
};

// Dispatch (its forward, and its gradient in the backward) or, `combine`, the way back, as
// Megatron-Core's token dispatchers move the tokens.
void token_exchange(Builder& b, const core::MoeSpec& e, const LayerView& v, const Exchange& x,
                    bool combine) {
    const std::string_view name = combine ? "combine" : "dispatch";
    const auto both = [&](Collective forward, Collective backward, GroupKind g, double bytes,
                          double domain_copy_bytes = 0.0) {
        b.collective(name, forward, g, bytes, Phase::forward, domain_copy_bytes);
        b.collective(name, backward, g, bytes, Phase::backward_input, domain_copy_bytes);
    };
    const auto gather = combine ? Collective::reduce_scatter : Collective::all_gather;
    const auto scatter = combine ? Collective::all_gather : Collective::reduce_scatter;
    switch (v.dispatcher) {
    case core::TokenDispatcher::allgather:
        // The etp·ep group gathers every token's hidden state — and its routing map and
        // probabilities, a byte and four per expert — and keeps what its experts take; combine
        // reduce-scatters the outputs back.
        both(gather, scatter, GroupKind::tensor_expert, x.rank_bytes * double(v.etp * v.ep));
        if (!combine)
            b.collective("routing map", Collective::all_gather, GroupKind::tensor_expert,
                         x.norm_tokens * double(e.num_experts) * 5.0 * double(v.etp * v.ep),
                         Phase::forward);
        return;
    case core::TokenDispatcher::alltoall:
        // Each routed copy crosses the ep group; the expert-tp ranks all-gather what arrived.
        if (v.ep > 1)
            both(Collective::all_to_all, Collective::all_to_all, GroupKind::expert,
                 x.rank_bytes * double(e.top_k) * x.capacity * x.load);
        if (v.etp > 1) both(gather, scatter, GroupKind::expert_tensor, x.received_bytes);
        return;
    case core::TokenDispatcher::flex: {
        // DeepEP: one fused all-to-all over etp·ep that sends a token once to each rank holding
        // any of its experts (every expert-tp rank of an expert's ep rank takes it), its top-k
        // probabilities (fp32). Across NVLink domains a token crosses the network once per
        // destination domain and is forwarded inside it (the cost model counts the domains).
        const double scale = x.capacity * x.load;
        const double probabilities = x.norm_tokens * double(e.top_k) * 4.0;
        both(Collective::all_to_all, Collective::all_to_all, GroupKind::tensor_expert,
             (x.rank_bytes * double(v.etp) * e.expected_destinations(v.ep) + probabilities) * scale,
             (x.rank_bytes + probabilities) * scale);
        return;
    }
    }
}

void moe(Builder& b, const core::ModelSpec& m, const LayerView& v, std::int64_t tokens,
         std::int64_t norm_tokens) {
    const core::MoeSpec& e = *m.moe;
    const std::int64_t h = m.hidden_size;
    b.linear("router", norm_tokens, e.num_experts, h, /*bf16=*/true);
    // The router's fp32 tokens × experts scores: softmax; top-k (its backward scatters the k
    // gradients back into a tokens × experts tensor); the load-balancing loss when weighted
    // (Fedus et al. 2022, Switch Transformer: the scores summed per expert, their gradient
    // broadcast back); the z-loss when weighted (Zoph et al. 2022, ST-MoE: each token's
    // logsumexp squared, its gradient tokens × experts). Megatron-Core runs each as its own
    // memory-bound kernel.
    const double scores_b = double(norm_tokens) * double(e.num_experts) * 4.0;
    const double chosen_b = double(norm_tokens) * double(e.top_k) * (4.0 + 8.0); // prob, index
    b.memory("router softmax", MemoryKernel::elementwise, 2 * scores_b, 2 * scores_b);
    b.memory("router top-k", MemoryKernel::elementwise, scores_b + chosen_b,
             scores_b + double(norm_tokens) * double(e.top_k) * 4.0);
    if (e.aux_loss_coeff > 0)
        b.memory("router aux loss", MemoryKernel::elementwise, scores_b, scores_b);
    if (e.z_loss_coeff > 0)
        b.memory("router z-loss", MemoryKernel::elementwise, scores_b, 2 * scores_b);
    // Token copies routed to experts, padded to capacity when a capacity factor is set; the
    // busiest expert-parallel rank (moe.load_balance) receives `load` times the mean.
    const double copies = routed_copies(e, v);
    const Exchange x{.rank_bytes = double(norm_tokens) * double(h) * element_bytes(m),
                     .received_bytes = copies * double(h) * element_bytes(m),
                     .norm_tokens = double(norm_tokens),
                     .capacity = e.capacity_factor.value_or(1.0),
                     .load = e.slowest_rank_load(v.ep)};
    // alltoall sorts its own copies before sending them; the others sort what they received.
    const double permuted = v.dispatcher == core::TokenDispatcher::alltoall
                                ? x.rank_bytes * double(e.top_k)
                                : x.received_bytes;
    b.memory("permute", MemoryKernel::elementwise, 2 * permuted, 2 * permuted);
    token_exchange(b, e, v, x, false);
    // The ep ranks together receive ep·tokens·top_k copies, spread over the num_experts
    // experts, num_experts/ep of them local, times the busiest rank's load. The local experts
    // run as one grouped GEMM (Megatron-Core --moe-grouped-gemm), timed at its per-expert
    // shape: few tokens per expert is what makes fine-grained experts slow.
    const std::int64_t local_experts = e.num_experts / v.ep;
    const auto per_expert = std::int64_t(std::ceil(copies / double(local_experts)));
    mlp(b, m, "expert fc1", "expert fc2", "expert activation", per_expert, e.expert_ffn_hidden_size,
        v.etp, local_experts);
    token_exchange(b, e, v, x, true);
    b.memory("unpermute", MemoryKernel::elementwise, 2 * permuted, 2 * permuted);
    if (e.shared_expert_ffn_hidden_size > 0) {
        const double act = double(tokens) * double(h) * element_bytes(m);
        b.enter_tp("shared expert input", act);
        mlp(b, m, "shared fc1", "shared fc2", "shared activation", tokens,
            e.shared_expert_ffn_hidden_size, v.tp);
        b.leave_tp("shared expert out", act);
    }
}

} // namespace

std::vector<Op> layer_ops(const core::ModelSpec& m, const LayerView& v, std::int64_t layer) {
    std::vector<Op> ops;
    Builder b{ops, v, v.recompute == RecomputeGranularity::full,
              m.linear_bias ? element_bytes(m) : 0.0};
    const std::int64_t tokens = v.tokens();
    const std::int64_t norm_tokens = v.sequence_parallel ? tokens / v.tp : tokens;
    const double h = double(m.hidden_size);
    norm(b, m, "attention norm", double(norm_tokens), h);
    attention(b, m, v, tokens);
    residual(b, m, "attention residual", double(norm_tokens), h);
    norm(b, m, "mlp norm", double(norm_tokens), h);
    if (m.is_moe_layer(layer)) {
        moe(b, m, v, tokens, norm_tokens);
    } else {
        const double act = double(tokens) * h * element_bytes(m);
        b.enter_tp("mlp input", act);
        mlp(b, m, "fc1", "fc2", "activation", tokens, m.ffn_hidden_size, v.tp);
        b.leave_tp("mlp out", act);
    }
    residual(b, m, "mlp residual", double(norm_tokens), h);
    return ops;
}

std::vector<Op> embedding_ops(const core::ModelSpec& m, const LayerView& v,
                              std::int64_t padded_vocab) {
    (void)padded_vocab;
    std::vector<Op> ops;
    Builder b{ops, v};
    const std::int64_t tokens = v.tokens();
    const double x = double(tokens) * double(m.hidden_size) * element_bytes(m);
    // Vocabulary-parallel lookup: each tp rank fills the rows of its shard, then the shards
    // are summed (reduce-scattered under sequence parallelism).
    b.memory("embedding lookup", MemoryKernel::elementwise, 2 * x, 0);
    b.memory("embedding grad", MemoryKernel::elementwise, 0, 2 * x, Phase::backward_weight);
    b.leave_tp("embedding reduce", x);
    const double local = v.sequence_parallel ? x / double(v.tp) : x;
    if (m.position_embedding == core::PositionEmbedding::learned)
        b.memory("position add", MemoryKernel::elementwise, 3 * local, 2 * local);
    return ops;
}

std::vector<Op> head_ops(const core::ModelSpec& m, const LayerView& layer_view,
                         std::int64_t padded_vocab) {
    std::vector<Op> ops;
    LayerView v = layer_view;
    v.fp8 = core::Fp8Recipe::none; // the LM head stays BF16 under every FP8 recipe
    Builder b{ops, v};
    const std::int64_t tokens = v.tokens();
    const std::int64_t norm_tokens = v.sequence_parallel ? tokens / v.tp : tokens;
    const double h = double(m.hidden_size);
    norm(b, m, "final norm", double(norm_tokens), h);
    b.enter_tp("lm head input", double(tokens) * h * element_bytes(m));
    const std::int64_t local_vocab = padded_vocab / v.tp;
    b.linear("lm head", tokens, local_vocab, m.hidden_size);
    // Vocabulary-parallel cross-entropy: fp32 softmax over the shard; max, sum and target logit
    // all-reduced over the tensor group (Shoeybi et al. 2019, §3).
    const double logits = double(tokens) * double(local_vocab);
    b.memory("cross entropy", MemoryKernel::softmax_cross_entropy, logits * (element_bytes(m) + 4),
             logits * (4 + element_bytes(m)));
    if (v.tp > 1)
        b.collective("cross entropy stats", Collective::all_reduce, GroupKind::tensor,
                     double(tokens) * 3 * 4, Phase::forward);
    return ops;
}

} // namespace trident::simulator
