// Operations of a transformer layer under tensor/sequence/context/expert parallelism.
// Sources: Shoeybi et al. 2019 (tensor-parallel GEMM split and its all-reduces), Korthikanti
// et al. 2022 (sequence parallelism: all-gather / reduce-scatter in place of all-reduce;
// selective recomputation of the attention core), Narayanan et al. 2021 (FLOP convention),
// Dao 2023 (flash attention: scores never stored, backward recomputes them), Lepikhin et al.
// 2021 and Megatron-Core's MoE (token all-to-all over the expert group), DeepSeek-V2 2024 (MLA).
#include "trident/simulator/layer_ops.h"

#include "op_builder.h"

#include <algorithm>
#include <cmath>
#include <optional>

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
    v.recompute_modules = plan.recompute.modules;
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
    return double(v.expert_tokens()) * double(e.top_k) * e.expert_load(v.ep);
}

double fp8_weight_cast_bytes(const core::Fp8& fp8, double weights) {
    // With the parameter gather the optimizer writes the quantized weight: only its transpose
    // is made (read and written in the recipe's format).
    return fp8.param_gather ? 2.0 * core::quantized_bytes(fp8.recipe) * weights
                            : fp8_cast_bytes(fp8.recipe, weights);
}

double fp8_cast_bytes(core::Fp8Recipe recipe, double elements) {
    // Read the 16-bit values, write the copy the forward GEMM reads and the transposed one the
    // weight gradient reads (Transformer Engine's cast_transpose).
    double bytes = elements * (2.0 + 2.0 * core::quantized_bytes(recipe));
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
    case core::Fp8Recipe::nvfp4:
        // The tensor's amax first (its fp32 scale); each copy made from the 16-bit values
        // (NVFP4BlockScaling: "to avoid double quantization errors"), the random Hadamard
        // transform fused into the column-wise cast; the E4M3 block scales are in
        // quantized_bytes.
        bytes += 2.0 * elements;
        break;
    default:
        break;
    }
    return bytes;
}

namespace {

using namespace detail;

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
        // mla_up_proj recomputation rebuilds the per-head queries, keys and values from the
        // latents kept (Megatron-Core's MLA: the up-projections and their rotary parts).
        if (a.q_lora_rank > 0) {
            b.linear("q down", tokens, a.q_lora_rank, h);
            { // layernorm recomputation rebuilds every norm, the latents' too (DeepSeek-V3)
                const RecomputedModule rebuilt(b, v, core::RecomputeModule::layernorm);
                norm(b, m, "q norm", double(tokens), double(a.q_lora_rank));
            }
            const RecomputedModule up(b, v, core::RecomputeModule::mla_up_proj);
            b.linear("q up", tokens, heads * score_dim, a.q_lora_rank);
        } else {
            b.linear("q", tokens, heads * score_dim, h);
        }
        b.linear("kv down", tokens, a.kv_lora_rank + a.qk_pos_emb_head_dim, h);
        {
            const RecomputedModule rebuilt(b, v, core::RecomputeModule::layernorm);
            norm(b, m, "kv norm", double(tokens), double(a.kv_lora_rank));
        }
        const RecomputedModule up(b, v, core::RecomputeModule::mla_up_proj);
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
    if (v.recomputes(core::RecomputeModule::core_attn)) { // Korthikanti et al. 2022, §4.2
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
    const bool selective = v.recomputes(core::RecomputeModule::core_attn);
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

} // namespace

std::vector<Op> layer_ops(const core::ModelSpec& m, const LayerView& v, std::int64_t layer) {
    std::vector<Op> ops;
    Builder b{ops, v, v.recompute == RecomputeGranularity::full,
              m.linear_bias ? element_bytes(m) : 0.0};
    const std::int64_t tokens = v.tokens();
    const std::int64_t norm_tokens = v.sequence_parallel ? tokens / v.tp : tokens;
    const double h = double(m.hidden_size);
    const bool moe_layer = m.is_moe_layer(layer);
    // layernorm recomputation applies to the norms not fused into the GEMM after them (Megatron-
    // Core's TE layer specs): MLA's input norm feeds two down-projections, an MoE block's norm
    // the router and the experts.
    {
        const RecomputedModule rebuilt(b, m.mla ? v : LayerView{},
                                       core::RecomputeModule::layernorm);
        norm(b, m, "attention norm", double(norm_tokens), h);
    }
    attention(b, m, v, tokens);
    residual(b, m, "attention residual", double(norm_tokens), h);
    {
        const RecomputedModule rebuilt(b, moe_layer ? v : LayerView{},
                                       core::RecomputeModule::layernorm);
        norm(b, m, "mlp norm", double(norm_tokens), h);
    }
    if (moe_layer) {
        const RecomputedModule rebuilt(b, v, core::RecomputeModule::moe);
        moe(b, m, v, tokens, norm_tokens);
    } else {
        const RecomputedModule rebuilt(b, v, core::RecomputeModule::mlp);
        const double act = double(tokens) * h * element_bytes(m);
        b.enter_tp("mlp input", act);
        mlp(b, m, v, "fc1", "fc2", "activation", tokens, m.ffn_hidden_size, v.tp);
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