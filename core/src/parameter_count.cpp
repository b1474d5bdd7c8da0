#include "trident/core/parameter_count.h"

namespace trident::core {
namespace {

std::int64_t norm_parameters(const ModelSpec& m, std::int64_t width) {
    // LayerNorm has a scale and a shift; RMSNorm only a scale (Zhang & Sennrich 2019).
    return m.normalization == Normalization::layernorm ? 2 * width : width;
}

std::int64_t linear(const ModelSpec& m, std::int64_t in, std::int64_t out) {
    return in * out + (m.linear_bias ? out : 0);
}

// Two-layer MLP of width `ffn`; SwiGLU's first GEMM has two outputs (gate and up), so three
// weight matrices in all (Shazeer 2020).
std::int64_t mlp(const ModelSpec& m, std::int64_t ffn) {
    const std::int64_t first_out = m.activation == Activation::swiglu ? 2 * ffn : ffn;
    return linear(m, m.hidden_size, first_out) + linear(m, ffn, m.hidden_size);
}

struct Attention {
    std::int64_t projections = 0;
    std::int64_t norms = 0;
};

Attention attention(const ModelSpec& m) {
    const std::int64_t h = m.hidden_size, heads = m.num_attention_heads;
    if (!m.mla) {
        const std::int64_t q = heads * m.head_dim, kv = m.num_query_groups * m.head_dim;
        return {linear(m, h, q + 2 * kv) + linear(m, q, h), 0};
    }
    // Multi-head latent attention (DeepSeek-V2, 2024, §2.1): queries through an optional
    // low-rank bottleneck; keys and values from one compressed latent plus a rotary key shared
    // by all heads; the latents are normalised.
    const MlaSpec& a = *m.mla;
    const std::int64_t qk = a.qk_head_dim + a.qk_pos_emb_head_dim;
    Attention out;
    if (a.q_lora_rank > 0) {
        out.projections += linear(m, h, a.q_lora_rank) + linear(m, a.q_lora_rank, heads * qk);
        out.norms += norm_parameters(m, a.q_lora_rank);
    } else {
        out.projections += linear(m, h, heads * qk);
    }
    out.projections += linear(m, h, a.kv_lora_rank + a.qk_pos_emb_head_dim);
    out.projections += linear(m, a.kv_lora_rank, heads * (a.qk_head_dim + a.v_head_dim));
    out.norms += norm_parameters(m, a.kv_lora_rank);
    out.projections += linear(m, heads * a.v_head_dim, h);
    return out;
}

} // namespace

std::int64_t LayerParameters::total() const {
    return attention + attention_norms + layer_norms + dense_mlp + router + shared_experts +
           routed_experts;
}

std::int64_t LayerParameters::active(std::int64_t top_k) const {
    return total() - routed_experts + (routed_experts > 0 ? top_k * one_expert : 0);
}

LayerParameters layer_parameters(const ModelSpec& m, std::int64_t layer) {
    LayerParameters p;
    const Attention a = attention(m);
    p.attention = a.projections;
    p.attention_norms = a.norms;
    p.layer_norms = 2 * norm_parameters(m, m.hidden_size);
    if (m.is_moe_layer(layer)) {
        const MoeSpec& e = *m.moe;
        p.router = m.hidden_size * e.num_experts;
        p.one_expert = mlp(m, e.expert_ffn_hidden_size);
        p.routed_experts = e.num_experts * p.one_expert;
        if (e.shared_expert_ffn_hidden_size > 0)
            p.shared_experts = mlp(m, e.shared_expert_ffn_hidden_size);
    } else {
        p.dense_mlp = mlp(m, m.ffn_hidden_size);
    }
    return p;
}

std::int64_t ParameterCounts::total() const {
    return word_embedding + position_embedding + layers_total + final_norm + output_layer;
}

std::int64_t ParameterCounts::active() const {
    return word_embedding + position_embedding + layers_active + final_norm + output_layer;
}

ParameterCounts count_parameters(const ModelSpec& m) {
    ParameterCounts c;
    c.word_embedding = m.vocab_size * m.hidden_size;
    if (m.position_embedding == PositionEmbedding::learned)
        c.position_embedding = m.max_position_embeddings * m.hidden_size;
    const std::int64_t top_k = m.moe ? m.moe->top_k : 0;
    for (std::int64_t layer = 0; layer < m.num_layers; ++layer) {
        const LayerParameters p = layer_parameters(m, layer);
        c.layers_total += p.total();
        c.layers_active += p.active(top_k);
        c.routed_experts += p.routed_experts;
    }
    c.final_norm = norm_parameters(m, m.hidden_size);
    c.output_layer = m.tied_embeddings ? 0 : m.vocab_size * m.hidden_size;
    for (std::int64_t depth = 0; depth < m.mtp_num_layers; ++depth)
        c.mtp += 3 * norm_parameters(m, m.hidden_size) + 2 * m.hidden_size * m.hidden_size +
                 layer_parameters(m, m.num_layers + depth).total();
    return c;
}

} // namespace trident::core
