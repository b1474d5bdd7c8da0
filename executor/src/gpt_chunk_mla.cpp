// Multi-head latent attention (DeepSeek-V2 2024, §2.1; DeepSeek-V3) in a GptChunk layer, as
// Megatron-Core's MLASelfAttention computes it: queries through a low-rank latent (q_down, its
// norm, q_up) or straight from the hidden state; keys and values from one joint latent
// (kv_down gives the latent and a rotary key shared by every head; its norm; kv_up gives each
// head's key and value); decoupled RoPE on the queries' and the shared key's rotary parts.
// The down projections and their norms are whole on every tensor rank, the up projections
// column-parallel over heads. The attention core runs the model's ordinary kernels with one
// key/value group per head and head dimension qk_head_dim + qk_pos_emb_head_dim, values
// zero-padded to it (their padded outputs are dropped), scale 1/√(that dimension).
#include "trident/executor/gpt_chunk.h"
#include "trident/kernels/cpu.h"

#include <algorithm>

namespace trident::executor {

namespace k = kernels::cpu;

void GptChunk::latent_norm_forward(const float* in, float* out, Vec& mean, Vec& rstd,
                                   std::int64_t w, std::int64_t b, std::int64_t width) const {
    const std::int64_t N = shape_.tokens;
    rstd.resize(std::size_t(N));
    if (layernorm_) {
        mean.resize(std::size_t(N));
        k::layernorm_forward(out, mean.data(), rstd.data(), in, p(w), p(b), N, width, norm_eps_);
    } else {
        k::rmsnorm_forward(out, rstd.data(), in, p(w), N, width, norm_eps_);
    }
}

void GptChunk::latent_norm_backward(float* din, const float* dout, const float* in, const Vec& mean,
                                    const Vec& rstd, std::int64_t w, std::int64_t b,
                                    std::int64_t width) const {
    const std::int64_t N = shape_.tokens;
    if (layernorm_)
        k::layernorm_backward(din, g(w), g(b), dout, in, p(w), mean.data(), rstd.data(), N, width);
    else
        k::rmsnorm_backward(din, g(w), dout, in, p(w), rstd.data(), N, width);
}

void GptChunk::mla_forward(const LayerParams& lp, Layer& L) const {
    const core::MlaSpec& a = mla_;
    const std::int64_t N = shape_.tokens, h = shape_.hidden, rd = a.qk_pos_emb_head_dim,
                       lat = a.kv_lora_rank;
    MlaState& s = L.mla;
    if (a.q_lora_rank > 0) { // the q latent
        s.q_c.resize(std::size_t(N * a.q_lora_rank));
        gemm_forward(lp, Linear::mla_q_down, -1, s.q_c.data(), L.ln1.data(), p(lp.q_down), nullptr,
                     N, h, a.q_lora_rank);
    }
    // The joint latent and the shared rotary key: [N × (lat + rd)].
    s.kv_c.resize(std::size_t(N * (lat + rd)));
    gemm_forward(lp, Linear::mla_kv_down, -1, s.kv_c.data(), L.ln1.data(), p(lp.kv_down), nullptr,
                 N, h, lat + rd);
    mla_latent_norms(lp, L);
    mla_up(lp, L);
}

void GptChunk::mla_latent_norms(const LayerParams& lp, Layer& L) const {
    const core::MlaSpec& a = mla_;
    const std::int64_t N = shape_.tokens, rd = a.qk_pos_emb_head_dim, lat = a.kv_lora_rank;
    MlaState& s = L.mla;
    if (a.q_lora_rank > 0) {
        s.q_in.resize(s.q_c.size());
        latent_norm_forward(s.q_c.data(), s.q_in.data(), s.q_mean, s.q_rstd, lp.q_norm_w,
                            lp.q_norm_b, a.q_lora_rank);
    }
    Vec latent(static_cast<std::size_t>(N * lat));
    for (std::int64_t n = 0; n < N; ++n)
        std::copy_n(s.kv_c.data() + n * (lat + rd), lat, latent.data() + n * lat);
    s.c_n.resize(latent.size());
    latent_norm_forward(latent.data(), s.c_n.data(), s.c_mean, s.c_rstd, lp.kv_norm_w, lp.kv_norm_b,
                        lat);
}

void GptChunk::mla_up(const LayerParams& lp, Layer& L) const {
    const core::MlaSpec& a = mla_;
    const std::int64_t N = shape_.tokens, h = shape_.hidden, Hl = shape_.local_heads,
                       D = shape_.head_dim, nope = a.qk_head_dim, rd = a.qk_pos_emb_head_dim,
                       vh = a.v_head_dim, lat = a.kv_lora_rank;
    const MlaState& s = L.mla;
    // Queries: [N × Hl·D], each head its no-position part then its rotary part.
    Vec q(static_cast<std::size_t>(N * Hl * D));
    if (a.q_lora_rank > 0)
        gemm_forward(lp, Linear::mla_q_up, -1, q.data(), s.q_in.data(), p(lp.q_up), nullptr, N,
                     a.q_lora_rank, Hl * D);
    else
        gemm_forward(lp, Linear::mla_q_up, -1, q.data(), L.ln1.data(), p(lp.q_up), nullptr, N, h,
                     Hl * D);
    Vec kv(static_cast<std::size_t>(N * Hl * (nope + vh)));
    gemm_forward(lp, Linear::mla_kv_up, -1, kv.data(), s.c_n.data(), p(lp.kv_up), nullptr, N, lat,
                 Hl * (nope + vh));
    // RoPE on each head's rotary query part and on the shared key.
    for (std::int64_t j = 0; j < Hl; ++j)
        k::rope_forward(q.data() + j * D + nope, N, Hl * D, 1, rd, row_positions_.data(),
                        rotary_base_);
    Vec k_pe(static_cast<std::size_t>(N * rd));
    for (std::int64_t n = 0; n < N; ++n)
        std::copy_n(s.kv_c.data() + n * (lat + rd) + lat, rd, k_pe.data() + n * rd);
    k::rope_forward(k_pe.data(), N, rd, 1, rd, row_positions_.data(), rotary_base_);
    // Packed as the attention kernels read it: queries, keys, values (zero-padded to D).
    const std::int64_t W = 3 * Hl * D;
    L.qkv.assign(std::size_t(N * W), 0.0f);
    for (std::int64_t n = 0; n < N; ++n) {
        float* row = L.qkv.data() + n * W;
        std::copy_n(q.data() + n * Hl * D, Hl * D, row);
        for (std::int64_t j = 0; j < Hl; ++j) {
            const float* kvh = kv.data() + (n * Hl + j) * (nope + vh);
            float* key = row + Hl * D + j * D;
            std::copy_n(kvh, nope, key);
            std::copy_n(k_pe.data() + n * rd, rd, key + nope);
            std::copy_n(kvh + nope, vh, row + 2 * Hl * D + j * D);
        }
    }
}

void GptChunk::compact_values(Layer& L) const {
    const std::int64_t N = shape_.tokens, Hl = shape_.local_heads, D = shape_.head_dim,
                       vh = mla_.v_head_dim;
    L.mla.att_v.resize(std::size_t(N * Hl * vh));
    for (std::int64_t r = 0; r < N * Hl; ++r)
        std::copy_n(L.att.data() + r * D, vh, L.mla.att_v.data() + r * vh);
}

Vec GptChunk::padded_values(const Vec& compact) const {
    const std::int64_t N = shape_.tokens, Hl = shape_.local_heads, D = shape_.head_dim,
                       vh = mla_.v_head_dim;
    Vec d(static_cast<std::size_t>(N * Hl * D), 0.0f);
    for (std::int64_t r = 0; r < N * Hl; ++r)
        std::copy_n(compact.data() + r * vh, vh, d.data() + r * D);
    return d;
}

void GptChunk::mla_backward(const LayerParams& lp, Layer& L, Vec& d_ln1) const {
    const core::MlaSpec& a = mla_;
    const std::int64_t N = shape_.tokens, h = shape_.hidden, Hl = shape_.local_heads,
                       D = shape_.head_dim, nope = a.qk_head_dim, rd = a.qk_pos_emb_head_dim,
                       vh = a.v_head_dim, lat = a.kv_lora_rank, W = 3 * Hl * D;
    MlaState& s = L.mla;
    // Unpack the attention's input gradients: queries; each head's key and value into kv_up's
    // output gradient; the shared key's summed over the heads.
    s.d_q.resize(std::size_t(N * Hl * D));
    s.d_kv_up.assign(std::size_t(N * Hl * (nope + vh)), 0.0f);
    Vec d_k_pe(static_cast<std::size_t>(N * rd), 0.0f);
    for (std::int64_t n = 0; n < N; ++n) {
        const float* row = L.d_qkv.data() + n * W;
        std::copy_n(row, Hl * D, s.d_q.data() + n * Hl * D);
        for (std::int64_t j = 0; j < Hl; ++j) {
            float* kvh = s.d_kv_up.data() + (n * Hl + j) * (nope + vh);
            const float* key = row + Hl * D + j * D;
            std::copy_n(key, nope, kvh);
            for (std::int64_t i = 0; i < rd; ++i) d_k_pe[std::size_t(n * rd + i)] += key[nope + i];
            std::copy_n(row + 2 * Hl * D + j * D, vh, kvh + nope);
        }
    }
    Vec().swap(L.d_qkv);
    for (std::int64_t j = 0; j < Hl; ++j)
        k::rope_backward(s.d_q.data() + j * D + nope, N, Hl * D, 1, rd, row_positions_.data(),
                         rotary_base_);
    k::rope_backward(d_k_pe.data(), N, rd, 1, rd, row_positions_.data(), rotary_base_);
    // Keys and values: kv_up, the latent's norm, kv_down.
    Vec d_c_n(static_cast<std::size_t>(N * lat), 0.0f);
    gemm_input_gradient(lp, Linear::mla_kv_up, -1, d_c_n.data(), s.d_kv_up.data(), p(lp.kv_up), N,
                        lat, Hl * (nope + vh));
    Vec latent(static_cast<std::size_t>(N * lat)),
        d_latent(static_cast<std::size_t>(N * lat), 0.0f);
    for (std::int64_t n = 0; n < N; ++n)
        std::copy_n(s.kv_c.data() + n * (lat + rd), lat, latent.data() + n * lat);
    latent_norm_backward(d_latent.data(), d_c_n.data(), latent.data(), s.c_mean, s.c_rstd,
                         lp.kv_norm_w, lp.kv_norm_b, lat);
    s.d_kv_c.resize(std::size_t(N * (lat + rd)));
    for (std::int64_t n = 0; n < N; ++n) {
        std::copy_n(d_latent.data() + n * lat, lat, s.d_kv_c.data() + n * (lat + rd));
        std::copy_n(d_k_pe.data() + n * rd, rd, s.d_kv_c.data() + n * (lat + rd) + lat);
    }
    gemm_input_gradient(lp, Linear::mla_kv_down, -1, d_ln1.data(), s.d_kv_c.data(), p(lp.kv_down),
                        N, h, lat + rd);
    // Queries: q_up, and the latent's norm and q_down when there is one.
    if (a.q_lora_rank > 0) {
        Vec d_q_in(static_cast<std::size_t>(N * a.q_lora_rank), 0.0f);
        gemm_input_gradient(lp, Linear::mla_q_up, -1, d_q_in.data(), s.d_q.data(), p(lp.q_up), N,
                            a.q_lora_rank, Hl * D);
        s.d_q_c.assign(d_q_in.size(), 0.0f);
        latent_norm_backward(s.d_q_c.data(), d_q_in.data(), s.q_c.data(), s.q_mean, s.q_rstd,
                             lp.q_norm_w, lp.q_norm_b, a.q_lora_rank);
        gemm_input_gradient(lp, Linear::mla_q_down, -1, d_ln1.data(), s.d_q_c.data(), p(lp.q_down),
                            N, h, a.q_lora_rank);
    } else {
        gemm_input_gradient(lp, Linear::mla_q_up, -1, d_ln1.data(), s.d_q.data(), p(lp.q_up), N, h,
                            Hl * D);
    }
}

void GptChunk::mla_weight_gradients(const LayerParams& lp, Layer& L, bool release_inputs) const {
    const core::MlaSpec& a = mla_;
    const std::int64_t N = shape_.tokens, h = shape_.hidden, Hl = shape_.local_heads,
                       D = shape_.head_dim, lat = a.kv_lora_rank, rd = a.qk_pos_emb_head_dim;
    MlaState& s = L.mla;
    gemm_weight_gradient(lp, Linear::mla_kv_up, -1, g(lp.kv_up), nullptr, s.d_kv_up.data(),
                         s.c_n.data(), N, lat, Hl * (a.qk_head_dim + a.v_head_dim));
    gemm_weight_gradient(lp, Linear::mla_kv_down, -1, g(lp.kv_down), nullptr, s.d_kv_c.data(),
                         L.ln1.data(), N, h, lat + rd);
    if (a.q_lora_rank > 0) {
        gemm_weight_gradient(lp, Linear::mla_q_up, -1, g(lp.q_up), nullptr, s.d_q.data(),
                             s.q_in.data(), N, a.q_lora_rank, Hl * D);
        gemm_weight_gradient(lp, Linear::mla_q_down, -1, g(lp.q_down), nullptr, s.d_q_c.data(),
                             L.ln1.data(), N, h, a.q_lora_rank);
    } else {
        gemm_weight_gradient(lp, Linear::mla_q_up, -1, g(lp.q_up), nullptr, s.d_q.data(),
                             L.ln1.data(), N, h, Hl * D);
    }
    if (release_inputs) { // the projection's input (att_v) stays for its own W
        Vec att_v = std::move(s.att_v);
        L.mla = MlaState{};
        L.mla.att_v = std::move(att_v);
        Vec().swap(L.ln1);
    }
}

} // namespace trident::executor
