// The pieces of a GptChunk layer that selective recomputation by module (Megatron-Core's
// --recompute-modules) drops after the forward and rebuilds in B just before they are needed:
// core_attn (the attention core's saved state), layernorm (both norms' outputs, recomputed
// from the layer's input and the attention residual, and MLA's latent norms' from the
// latents), mlp (a dense layer's fc1 output and
// activation), shared_experts (the same for an MoE layer's shared experts) and moe_act (the
// routed experts' activations, from their fc1 outputs) and mla_up_proj (MLA's per-head
// queries, keys and values, from the saved latents) and moe (an MoE layer's whole routed part:
// router, dispatch, experts and combine run again from the norm's output — the token exchanges
// included, at the same point of every expert rank's schedule). What the rebuild computes is
// what the
// forward computed, bit for bit, so losses and gradients do not change; activation memory does.
#include "trident/executor/gpt_chunk.h"
#include "trident/kernels/cpu.h"

namespace trident::executor {

namespace k = kernels::cpu;

// One of the layer's norms over this rank's rows of `in`, its statistics into mean and rstd.
Vec GptChunk::normed_rows(const Vec& in, Vec& mean, Vec& rstd, std::int64_t w,
                          std::int64_t b) const {
    Vec normed(static_cast<std::size_t>(shape_.rows * shape_.hidden));
    mean.resize(std::size_t(shape_.rows));
    rstd.resize(std::size_t(shape_.rows));
    norm_forward(in.data(), normed.data(), mean.data(), rstd.data(), w, b);
    return normed;
}

void GptChunk::norm1(const LayerParams& lp, Layer& L, Communicator& tp) const {
    L.ln1 = gather_rows(normed_rows(L.x_in, L.ln1_mean, L.ln1_rstd, lp.ln1_w, lp.ln1_b), tp);
}

void GptChunk::norm2(const LayerParams& lp, Layer& L, Communicator& tp) const {
    Vec normed = normed_rows(L.x_mid, L.ln2_mean, L.ln2_rstd, lp.ln2_w, lp.ln2_b);
    // Under sequence parallelism an MoE layer routes this rank's rows (Megatron-Core); only
    // its shared experts, tensor-parallel like a dense MLP, take all rows.
    const bool local_routing = lp.moe && shape_.rows != shape_.tokens;
    if (local_routing && lp.mlp_width > 0) L.moe_in = normed;
    L.ln2 =
        local_routing && lp.mlp_width == 0 ? std::move(normed) : gather_rows(std::move(normed), tp);
}

void GptChunk::mlp_hidden(const LayerParams& lp, Layer& L) const {
    const std::int64_t F = lp.mlp_width, gate = swiglu_ ? 2 : 1;
    L.fc.resize(std::size_t(shape_.tokens * gate * F));
    gemm_forward(lp, Linear::fc1, -1, L.fc.data(), L.ln2.data(), p(lp.fc_w),
                 bias_ ? p(lp.fc_b) : nullptr, shape_.tokens, shape_.hidden, gate * F);
    L.act.resize(std::size_t(shape_.tokens * F));
    if (swiglu_)
        k::swiglu_forward(L.act.data(), L.fc.data(), shape_.tokens, F);
    else
        k::gelu_forward(L.act.data(), L.fc.data(), shape_.tokens * F);
}

bool GptChunk::recomputes_mlp(const LayerParams& lp) const {
    using M = core::RecomputeModule;
    return lp.mlp_width > 0 && recompute_plan_.selects(lp.moe ? M::shared_experts : M::mlp);
}

void GptChunk::drop_recomputed(const LayerParams& lp, Layer& L) const {
    using M = core::RecomputeModule;
    const auto drop = [](Vec& v) { Vec().swap(v); };
    if (recompute_plan_.selects(M::core_attn)) {
        drop(L.probs);
        drop(L.lse);
    }
    if (is_mla_ && recompute_plan_.selects(M::mla_up_proj)) drop(L.qkv);
    if (recompute_plan_.selects(M::layernorm)) {
        for (Vec* v :
             {&L.ln1, &L.ln1_mean, &L.ln1_rstd, &L.ln2, &L.ln2_mean, &L.ln2_rstd, &L.moe_in})
            drop(*v);
        if (is_mla_) // every RMSNorm, as DeepSeek-V3 recomputes them: the latents' too
            for (Vec* v : {&L.mla.q_in, &L.mla.c_n}) drop(*v);
    }
    if (recomputes_mlp(lp)) {
        drop(L.fc);
        drop(L.act);
    }
    if (lp.moe && recompute_plan_.selects(M::moe_act))
        for (Vec& act : L.moe.act) drop(act);
    if (lp.moe && recompute_plan_.selects(M::moe)) L.moe = MoeState{};
}

void GptChunk::rebuild_recomputed(const LayerParams& lp, Layer& L, const ChunkComms& comms) const {
    using M = core::RecomputeModule;
    if (recompute_plan_.selects(M::layernorm)) {
        norm1(lp, L, comms.tensor);
        norm2(lp, L, comms.tensor);
        if (is_mla_) mla_latent_norms(lp, L);
    }
    // Queries, keys and values before the attention core that reads them.
    if (is_mla_ && recompute_plan_.selects(M::mla_up_proj)) mla_up(lp, L);
    if (recompute_plan_.selects(M::core_attn)) attention_forward(L, comms.context);
    if (recomputes_mlp(lp)) mlp_hidden(lp, L);
    if (lp.moe && recompute_plan_.selects(M::moe)) {
        Vec output; // the forward's, already added to the residual
        moe_forward(lp, L, output, comms);
    }
    if (lp.moe && recompute_plan_.selects(M::moe_act) && !recompute_plan_.selects(M::moe)) {
        const std::int64_t F = shape_.local_expert_ffn, gate = swiglu_ ? 2 : 1;
        MoeState& s = L.moe;
        for (std::size_t e = 0; e < s.fc.size(); ++e) {
            const std::int64_t n = std::int64_t(s.fc[e].size()) / (gate * F);
            if (n == 0) continue;
            s.act[e].resize(std::size_t(n * F));
            if (swiglu_)
                k::swiglu_forward(s.act[e].data(), s.fc[e].data(), n, F);
            else
                k::gelu_forward(s.act[e].data(), s.fc[e].data(), n * F);
        }
    }
}

} // namespace trident::executor
