// The backward of a GptChunk: input gradients (B) layer by layer from the last, then either
// keeping what the weight gradients (W) need for a later backward_weight — zero-bubble
// schedules move W — or, in the fused backward every other schedule runs (as autograd does in
// Megatron-LM), computing each linear layer's weight gradient right after its input gradient
// and freeing what it read. A micro-batch in its fused backward therefore holds only the layers
// not yet reached and the one being worked on; under full recomputation that one is the only
// layer whose activations exist (its forward is run again from its saved input just before its
// backward), which is what makes recomputation save memory at every pipeline depth
// (Korthikanti et al. 2022).
#include "trident/executor/gpt_chunk.h"
#include "trident/kernels/cpu.h"

#include <chrono>

namespace trident::executor {

namespace k = kernels::cpu;

namespace {

// Runs `work`, adding the seconds it takes to `total`.
template <typename F>
void timed(double& total, F&& work) {
    const auto start = std::chrono::steady_clock::now();
    work();
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

Vec GptChunk::branch_gradient(const Vec& dx, DropoutSite site, std::int64_t layer,
                              const Activations& a) const {
    Vec g = dx; // a dropped-out branch: dx through the same mask (the residual keeps dx itself)
    if (dropping(a)) drop_rows(g, site, layer, a);
    return g;
}

void GptChunk::linear_weight_gradient(const LayerParams& lp, Layer& L, Linear which,
                                      bool release_inputs) const {
    const std::int64_t Wl = (shape_.local_heads + 2 * shape_.local_kv_groups) * shape_.head_dim,
                       gate = swiglu_ ? 2 : 1;
    // dW += doutᵀ · input (and the bias's Σ dout), from the output gradient B left and the
    // input the forward saved.
    const auto grad = [&](std::int64_t w, std::int64_t b, Vec& dout, Vec& in, std::int64_t C,
                          std::int64_t OC) {
        gemm_weight_gradient(lp, which, -1, g(w), bias_ ? g(b) : nullptr, dout.data(), in.data(),
                             shape_.tokens, C, OC);
        if (release_inputs) {
            release(dout);
            // An MoE layer's shared experts read L.ln2 with the router: its W frees it.
            if (&in != &L.ln2 || !lp.moe) release(in);
        }
    };
    switch (which) {
    case Linear::qkv:
        if (is_mla_) return mla_weight_gradients(lp, L, release_inputs);
        return grad(lp.qkv_w, lp.qkv_b, L.d_qkv, L.ln1, shape_.hidden, Wl);
    case Linear::proj:
        return grad(lp.proj_w, lp.proj_b, L.d_proj_out, projection_input(L), proj_in_,
                    shape_.hidden);
    case Linear::fc1:
        return grad(lp.fc_w, lp.fc_b, L.d_fc, L.ln2, shape_.hidden, gate * lp.mlp_width);
    case Linear::fc2:
        return grad(lp.fc2_w, lp.fc2_b, L.d_fc2_out, L.act, lp.mlp_width, shape_.hidden);
    case Linear::mla_q_down: // MLA's projections: all four with Linear::qkv
    case Linear::mla_q_up:
    case Linear::mla_kv_down:
    case Linear::mla_kv_up:
        return mla_weight_gradients(lp, L, release_inputs);
    case Linear::mtp_eh_proj: // taken in B (gpt_chunk_mtp.cpp)
        return;
    }
}

void GptChunk::moe_weight_gradients(const LayerParams& lp, Layer& L, bool release_inputs) const {
    const std::int64_t gate = swiglu_ ? 2 : 1;
    MoeState& s = L.moe;
    k::matmul_backward_weight(g(lp.router_w), nullptr, s.d_logits.data(), routed_input(L).data(),
                              shape_.rows, shape_.hidden, experts_);
    const std::int64_t F = shape_.local_expert_ffn;
    for (std::size_t e = 0; e < lp.experts.size(); ++e) {
        const std::int64_t rows = std::int64_t(s.x[e].size()) / shape_.hidden;
        if (rows == 0) continue;
        const ExpertParams& x = lp.experts[e];
        gemm_weight_gradient(lp, Linear::fc1, std::int32_t(e), g(x.fc_w),
                             bias_ ? g(x.fc_b) : nullptr, s.d_fc[e].data(), s.x[e].data(), rows,
                             shape_.hidden, gate * F);
        gemm_weight_gradient(lp, Linear::fc2, std::int32_t(e), g(x.fc2_w),
                             bias_ ? g(x.fc2_b) : nullptr, s.d_out[e].data(),
                             weighted_activation(s, std::int64_t(e)).data(), rows, F,
                             shape_.hidden);
    }
    if (release_inputs) {
        release(L.ln2);
        release(L.moe_in);
        L.moe = MoeState{};
    }
}

void GptChunk::head_weight_gradient(Activations& a, bool release_inputs) const {
    k::matmul_backward_weight(g(head_), nullptr, a.dlogits.data(), a.lnf.data(), shape_.tokens,
                              shape_.hidden, shape_.local_vocab);
    if (release_inputs) {
        release(a.dlogits);
        release(a.lnf);
    }
}

void GptChunk::embedding_weight_gradient(Activations& a, bool release_inputs) const {
    k::embedding_backward(g(wte_), a.tokens, a.embedding_grad.data(), shape_.tokens, shape_.hidden,
                          shape_.vocab_start, shape_.local_vocab);
    if (wpe_ >= 0)
        for (std::int64_t n = 0; n < shape_.tokens; ++n)
            for (std::int64_t c = 0; c < shape_.hidden; ++c)
                g(wpe_)[positions_[std::size_t(cp_rank_)][std::size_t(n % shape_.local_sequence)] *
                            shape_.hidden +
                        c] += a.embedding_grad[std::size_t(n * shape_.hidden + c)];
    if (release_inputs) release(a.embedding_grad);
}

void GptChunk::layer_backward(std::size_t i, Activations& a, Vec& dx, float loss_scale,
                              const ChunkComms& comms, bool fused) const {
    Communicator& tp = comms.tensor;
    const LayerParams& lp = layers_[i];
    Layer& L = a.layers[i];
    const std::int64_t layer = shape_.first_layer + std::int64_t(i);
    const std::int64_t NH = shape_.tokens * shape_.hidden,
                       Wl = (shape_.local_heads + 2 * shape_.local_kv_groups) * shape_.head_dim;
    const auto weights = [&](auto&& work) {
        if (fused) timed(a.weight_gradient_s, work);
    };
    // The peak inside B, where the layer holds the most: after each gradient buffer appears.
    const auto note_peak = [&] { a.peak_bytes = std::max(a.peak_bytes, a.bytes()); };
    if (recompute_[i] == core::RecomputeGranularity::full) {
        Vec x = L.x_in; // the layer's forward again, from its saved input
        layer_forward(i, L, x, comms, a);
    } else if (recompute_[i] == core::RecomputeGranularity::selective) {
        rebuild_recomputed(lp, L, comms); // what the forward dropped, again
    }
    note_peak();
    // MLP: x_out = x_mid + fc2(act(fc1(norm2(x_mid)))) — or the experts'.
    Vec d_ln2(static_cast<std::size_t>(NH), 0.0f);
    if (lp.moe) { // this rank's rows: the router's and (sequence parallel) the experts' input
        const Vec dy = branch_gradient(dx, mlp_out, layer, a);
        d_ln2.assign(std::size_t(shape_.rows * shape_.hidden), 0.0f);
        moe_backward(lp, L, dy, d_ln2, loss_scale, comms);
        note_peak();
        if (lp.mlp_width > 0) { // the shared experts' B (and W) before the router's W frees ln2
            const Vec shared = mlp_backward(lp, L, dy, a, tp, fused);
            for (std::size_t j = 0; j < d_ln2.size(); ++j) d_ln2[j] += shared[j];
        }
        weights([&] { moe_weight_gradients(lp, L, true); });
    } else {
        d_ln2 = mlp_backward(lp, L, branch_gradient(dx, mlp_out, layer, a), a, tp, fused);
    }
    // dx becomes the gradient of x_mid: the residual's plus the norm's.
    norm_backward(dx.data(), d_ln2.data(), L.x_mid.data(), L.ln2_mean.data(), L.ln2_rstd.data(),
                  lp.ln2_w, lp.ln2_b);
    for (Vec* v : {&d_ln2, &L.x_mid, &L.ln2_mean, &L.ln2_rstd}) release(*v);
    // Attention: x_mid = x_in + proj(attention(qkv(norm1(x_in)))).
    L.d_proj_out = gather_rows(branch_gradient(dx, attention_out, layer, a), tp);
    Vec d_att(static_cast<std::size_t>(shape_.tokens * proj_in_), 0.0f);
    gemm_input_gradient(lp, Linear::proj, -1, d_att.data(), L.d_proj_out.data(), p(lp.proj_w),
                        shape_.tokens, proj_in_, shape_.hidden);
    if (is_mla_) { // the values' padding had no effect, and its outputs were zeros
        d_att = padded_values(d_att);
        if (flash_) L.att = padded_values(L.mla.att_v); // its backward reads the output
    }
    note_peak();
    attention_backward(L, d_att, comms.context); // flash reads the output (att) too
    note_peak();
    for (Vec* v : {&d_att, &L.probs, &L.lse, &L.kv, &L.qkv}) release(*v);
    if (is_mla_) release(L.att); // rebuilt for the attention backward only
    std::vector<std::uint64_t>().swap(L.attention_keys);
    weights([&] { linear_weight_gradient(lp, L, Linear::proj, true); });
    Vec d_ln1(static_cast<std::size_t>(NH), 0.0f);
    if (is_mla_) {
        mla_backward(lp, L, d_ln1);
    } else {
        if (rope_) { // back through the rotation: the gradients of the unrotated q and k
            k::rope_backward(L.d_qkv.data(), shape_.tokens, Wl, shape_.local_heads, shape_.head_dim,
                             row_positions_.data(), rotary_base_);
            k::rope_backward(L.d_qkv.data() + shape_.local_heads * shape_.head_dim, shape_.tokens,
                             Wl, shape_.local_kv_groups, shape_.head_dim, row_positions_.data(),
                             rotary_base_);
        }
        gemm_input_gradient(lp, Linear::qkv, -1, d_ln1.data(), L.d_qkv.data(), p(lp.qkv_w),
                            shape_.tokens, shape_.hidden, Wl);
    }
    weights([&] { linear_weight_gradient(lp, L, Linear::qkv, true); });
    d_ln1 = reduce_rows(std::move(d_ln1), tp);
    norm_backward(dx.data(), d_ln1.data(), L.x_in.data(), L.ln1_mean.data(), L.ln1_rstd.data(),
                  lp.ln1_w, lp.ln1_b);
    // What remains is what W needs (nothing, after a fused backward).
    for (Vec* v : {&L.x_in, &L.ln1_mean, &L.ln1_rstd}) release(*v);
}

Vec GptChunk::mlp_backward(const LayerParams& lp, Layer& L, Vec dy, Activations& a,
                           Communicator& tp, bool fused) const {
    const std::int64_t F = lp.mlp_width, gate = swiglu_ ? 2 : 1;
    const auto weights = [&](auto&& work) {
        if (fused) timed(a.weight_gradient_s, work);
    };
    const auto note_peak = [&] { a.peak_bytes = std::max(a.peak_bytes, a.bytes()); };
    L.d_fc2_out = gather_rows(std::move(dy), tp);
    note_peak();
    Vec d_act(static_cast<std::size_t>(shape_.tokens * F), 0.0f);
    gemm_input_gradient(lp, Linear::fc2, -1, d_act.data(), L.d_fc2_out.data(), p(lp.fc2_w),
                        shape_.tokens, F, shape_.hidden);
    weights([&] { linear_weight_gradient(lp, L, Linear::fc2, true); });
    L.d_fc.assign(std::size_t(shape_.tokens * gate * F), 0.0f);
    if (swiglu_)
        k::swiglu_backward(L.d_fc.data(), L.fc.data(), d_act.data(), shape_.tokens, F);
    else
        k::gelu_backward(L.d_fc.data(), L.fc.data(), d_act.data(), shape_.tokens * F);
    note_peak();
    release(d_act);
    release(L.fc);
    Vec d_in(static_cast<std::size_t>(shape_.tokens * shape_.hidden), 0.0f);
    gemm_input_gradient(lp, Linear::fc1, -1, d_in.data(), L.d_fc.data(), p(lp.fc_w), shape_.tokens,
                        shape_.hidden, gate * F);
    weights([&] { linear_weight_gradient(lp, L, Linear::fc1, true); });
    return reduce_rows(std::move(d_in), tp); // column-parallel input gradient
}

void GptChunk::backward_pass(Activations& a, const float* dout, float loss_scale,
                             const ChunkComms& comms, bool fused) const {
    Communicator& tp = comms.tensor;
    const std::int64_t NH = shape_.tokens * shape_.hidden, NLH = shape_.rows * shape_.hidden;
    a.weight_gradient_s = 0.0;
    a.peak_bytes = a.bytes();
    Vec dx(static_cast<std::size_t>(NLH), 0.0f); // gradient of this rank's rows
    if (last_) {
        // MTP first (its units released before the main head's are held): the gradient its
        // module 0 sends to the main final norm's output rows.
        const Vec d_mtp = mtp_.empty() ? Vec{} : mtp_backward(a, loss_scale, comms, fused);
        hold_step(comms, PassOrder::backward, 0);
        // The forward left the exponentials in `logits`: they become the gradient in place.
        k::cross_entropy_backward(a.logits.data(), a.sum_exp.data(), a.targets,
                                  loss_scale / float(loss_tokens_), shape_.tokens,
                                  shape_.local_vocab, shape_.vocab_start);
        a.dlogits = std::move(a.logits);
        Vec dlnf(static_cast<std::size_t>(NH), 0.0f);
        k::matmul_backward_input(dlnf.data(), a.dlogits.data(), p(head_), shape_.tokens,
                                 shape_.hidden, shape_.local_vocab);
        if (fused) timed(a.weight_gradient_s, [&] { head_weight_gradient(a, true); });
        dlnf = reduce_rows(std::move(dlnf), tp); // the LM head is column-parallel
        for (std::size_t j = 0; j < d_mtp.size(); ++j) dlnf[j] += d_mtp[j];
        norm_backward(dx.data(), dlnf.data(), a.hidden_out.data(), a.lnf_mean.data(),
                      a.lnf_rstd.data(), lnf_w_, lnf_b_);
        drop_step(comms, PassOrder::backward, 0);
        for (Vec* v : {&a.hidden_out, &a.lnf_mean, &a.lnf_rstd, &a.row_max, &a.sum_exp})
            release(*v);
    } else {
        std::copy(dout, dout + NLH, dx.begin());
    }
    for (std::size_t i = main_layers_; i-- > 0;) {
        hold_step(comms, PassOrder::backward, backward_step(i));
        layer_backward(i, a, dx, loss_scale, comms, fused);
        drop_step(comms, PassOrder::backward, backward_step(i));
    }
    // The embedding's weight gradient needs every row (the table is split by vocabulary).
    if (first_) {
        a.embedding_grad = gather_rows(branch_gradient(dx, embedding_out, -1, a), tp);
        if (fused) timed(a.weight_gradient_s, [&] { embedding_weight_gradient(a, true); });
    } else {
        a.dinput = std::move(dx);
    }
}

void GptChunk::backward_input(Activations& a, const float* dout, float loss_scale,
                              const ChunkComms& comms) const {
    backward_pass(a, dout, loss_scale, comms, false);
}

void GptChunk::backward(Activations& a, const float* dout, float loss_scale,
                        const ChunkComms& comms) const {
    backward_pass(a, dout, loss_scale, comms, true);
}

void GptChunk::backward_weight(Activations& a) const {
    for (std::size_t i = 0; i < layers_.size(); ++i) {
        const LayerParams& lp = layers_[i];
        Layer& L = a.layers[i];
        linear_weight_gradient(lp, L, Linear::qkv, true);
        linear_weight_gradient(lp, L, Linear::proj, true);
        if (lp.mlp_width > 0) { // the dense MLP, or the shared experts (before the router)
            linear_weight_gradient(lp, L, Linear::fc1, true);
            linear_weight_gradient(lp, L, Linear::fc2, true);
        }
        if (lp.moe) moe_weight_gradients(lp, L, true);
    }
    if (last_) head_weight_gradient(a, true);
    if (first_) embedding_weight_gradient(a, true);
}

} // namespace trident::executor
