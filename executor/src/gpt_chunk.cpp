#include "trident/executor/gpt_chunk.h"

#include "trident/core/hash.h"
#include "trident/kernels/cpu.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace trident::executor {

namespace k = kernels::cpu;

std::int64_t ParameterStore::add(std::string name, std::int64_t size, core::TensorFlags flags) {
    const std::int64_t offset = std::int64_t(values.size());
    tensors.push_back({flags, std::move(name), offset, size, size, {{0, size}}});
    values.resize(values.size() + std::size_t(size), 0.0f);
    grads.resize(values.size(), 0.0f);
    return offset;
}

double GptChunk::Activations::bytes() const {
    double n = 0.0;
    const auto add = [&](std::initializer_list<const Vec*> vs) {
        for (const Vec* v : vs) n += double(v->size());
    };
    add({&input, &output, &embedding_grad, &lnf, &lnf_mean, &lnf_rstd, &logits, &row_max, &sum_exp,
         &dlogits, &hidden_out, &dinput});
    for (const Layer& l : layers) {
        add({&l.x_in, &l.ln1, &l.ln1_mean, &l.ln1_rstd, &l.qkv, &l.kv, &l.probs, &l.lse, &l.att,
             &l.x_mid, &l.ln2, &l.ln2_mean, &l.ln2_rstd, &l.fc, &l.act, &l.d_qkv, &l.d_proj_out,
             &l.d_fc, &l.d_fc2_out});
        const MoeState& s = l.moe;
        add({&s.probs, &s.gates, &s.load, &s.d_logits, &s.lse, &l.moe_in});
        const MlaState& t = l.mla;
        add({&t.q_c, &t.q_in, &t.q_mean, &t.q_rstd, &t.kv_c, &t.c_n, &t.c_mean, &t.c_rstd, &t.att_v,
             &t.d_q, &t.d_q_c, &t.d_kv_up, &t.d_kv_c});
        for (const auto* experts : {&s.x, &s.fc, &s.act, &s.d_fc, &s.d_out, &s.gate})
            for (const Vec& v : *experts) n += double(v.size());
    }
    for (const Mtp& d : mtp) {
        add({&d.emb, &d.e_mean, &d.e_rstd, &d.h_prev, &d.h_mean, &d.h_rstd, &d.cat, &d.out,
             &d.lnf_mean, &d.lnf_rstd, &d.lnf, &d.logits, &d.row_max, &d.sum_exp});
        n += double(d.tokens.size() + d.targets.size() + d.counted.size() / 4);
    }
    return n * sizeof(float);
}

namespace {

// The full tensor named `name`, N(0, std²) from a generator keyed by (seed, name): the same
// values on every rank and in every layout.
Vec full_normal(std::uint64_t seed, const std::string& name, std::int64_t count, float std) {
    std::mt19937_64 generator(core::fnv1a(name, core::kFnvOffsetBasis ^ seed));
    std::normal_distribution<float> normal(0.0f, std);
    Vec v(static_cast<std::size_t>(count));
    for (auto& x : v) x = normal(generator);
    return v;
}

} // namespace

std::vector<std::int64_t> allocate_tensors(const core::ChunkLayout& layout, ParameterStore& store,
                                           std::uint64_t seed) {
    std::vector<std::int64_t> offsets;
    for (const core::TensorLayout& t : layout.tensors()) {
        const std::int64_t offset = store.add(t.name(), t.size, t.flags);
        ParameterStore::Tensor& stored = store.tensors.back();
        stored.full_size = t.full_size();
        stored.placement = t.placement;
        float* out = store.values.data() + offset;
        if (t.init == core::TensorInit::ones) std::fill_n(out, t.size, 1.0f);
        if (t.init == core::TensorInit::normal) {
            // Generated whole, then this rank's runs in its storage order (padding stays 0).
            const Vec full = full_normal(seed, t.init_name(), t.full_size(), float(t.init_std));
            for (const auto& [begin, length] : t.placement) {
                std::copy_n(full.begin() + begin, length, out);
                out += length;
            }
        }
        offsets.push_back(offset);
    }
    return offsets;
}

namespace {

void add_bias(float* x, const float* bias, std::int64_t N, std::int64_t C) {
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t c = 0; c < C; ++c) x[n * C + c] += bias[c];
}

} // namespace

std::vector<std::int32_t> context_positions(std::int64_t seq, std::int64_t cp, std::int64_t rank) {
    std::vector<std::int32_t> positions;
    const std::int64_t c = seq / (2 * cp);
    for (std::int64_t part : {rank, 2 * cp - 1 - rank})
        for (std::int64_t i = 0; i < c; ++i) positions.push_back(std::int32_t(part * c + i));
    return positions;
}

GptChunk::GptChunk(const core::JobSpec& job, std::int32_t pipeline_rank, std::int32_t chunk,
                   int tp_rank, int ep_rank, int cp_rank, ParameterStore& store, std::uint64_t seed,
                   int etp_rank)
    : model_(&job.model), store_(&store) {
    const core::ModelSpec& m = job.model;
    const core::ParallelPlan& plan = job.plan;
    recompute_plan_ = plan.recompute;
    const core::ChunkLayout layout(job, pipeline_rank, chunk, tp_rank, ep_rank, plan.cp,
                                   core::LayoutDetail::tensors, etp_rank);
    shape_ = layout.shape();
    first_ = shape_.first;
    last_ = shape_.last;
    layernorm_ = m.normalization == core::Normalization::layernorm;
    swiglu_ = m.activation == core::Activation::swiglu;
    bias_ = m.linear_bias;
    seq_ = job.training.seq_length;
    cp_ = plan.cp;
    cp_rank_ = cp_rank;
    for (std::int64_t c = 0; c < cp_; ++c) positions_.push_back(context_positions(seq_, cp_, c));
    for (auto p : positions_[std::size_t(cp_rank)]) visible_.push_back(p + 1);
    rope_ = m.position_embedding == core::PositionEmbedding::rope;
    rotary_base_ = m.rotary_base;
    norm_eps_ = float(m.norm_epsilon);
    dropout_ = m.dropout;
    seed_ = seed;
    tp_rank_ = tp_rank;
    for (std::int64_t b = 0; b < shape_.micro_batch; ++b)
        row_positions_.insert(row_positions_.end(), positions_[std::size_t(cp_rank)].begin(),
                              positions_[std::size_t(cp_rank)].end());
    loss_tokens_ = shape_.micro_batch * seq_;
    sp_ = plan.sequence_parallel;
    flash_ = plan.flash_attention;
    if (m.moe) {
        experts_ = m.moe->num_experts;
        top_k_ = m.moe->top_k;
        router_groups_ = m.moe->router_num_groups;
        group_topk_ = m.moe->router_group_topk;
        aux_coeff_ = m.moe->aux_loss_coeff;
        z_coeff_ = m.moe->z_loss_coeff;
        capacity_factor_ = m.moe->capacity_factor.value_or(0.0);
        pad_to_capacity_ = m.moe->pad_to_capacity;
        dispatcher_ = plan.token_dispatcher;
    }
    // MLA: one key/value group per head, of the queries' and keys' width (values padded).
    proj_in_ = shape_.local_heads * shape_.head_dim;
    if (m.mla) {
        is_mla_ = true;
        mla_ = *m.mla;
        shape_.head_dim = mla_.qk_head_dim + mla_.qk_pos_emb_head_dim;
        shape_.local_kv_groups = shape_.local_heads;
        proj_in_ = shape_.local_heads * mla_.v_head_dim;
    }
    chunk_ = chunk;
    first_tensor_ = store.tensors.size();
    const std::vector<std::int64_t> offsets = allocate_tensors(layout, store, seed);
    for (std::size_t i = 0; i < layout.tensors().size(); ++i)
        tensor_units_.push_back(layout.unit_of(i));
    const auto at = [&](core::TensorRole role, std::int64_t layer = -1, std::int64_t expert = -1) {
        const std::int64_t i = layout.find(role, layer, expert);
        return i < 0 ? std::int64_t(-1) : offsets[std::size_t(i)];
    };
    using R = core::TensorRole;
    if (first_) {
        wte_ = at(R::word_embedding);
        wpe_ = at(R::position_embedding);
        embedding_units_ = {0};
    }
    for (std::int64_t layer = shape_.first_layer;
         layer < shape_.first_layer + layout.shape().layers; ++layer) {
        layers_.push_back(layer_params(job, layout, offsets, layer));
        recompute_.push_back(job.recompute_at(layer - shape_.first_layer));
    }
    main_layers_ = layers_.size();
    if (last_) {
        lnf_w_ = at(R::final_norm_weight);
        lnf_b_ = at(R::final_norm_bias);
        // Tied on one chunk holding both ends: literally the same tensor.
        head_ = m.tied_embeddings && first_ ? wte_ : at(R::output_weight);
        head_units_ = {layout.unit_of(std::size_t(layout.find(R::final_norm_weight)))};
        if (head_ == wte_) head_units_.push_back(0);
        add_mtp_modules(job, layout, offsets);
    }
}

GptChunk::LayerParams GptChunk::layer_params(const core::JobSpec& job,
                                             const core::ChunkLayout& layout,
                                             const std::vector<std::int64_t>& offsets,
                                             std::int64_t layer) const {
    const core::ModelSpec& m = job.model;
    const auto at = [&](core::TensorRole role, std::int64_t expert = -1) {
        const std::int64_t i = layout.find(role, layer, expert);
        return i < 0 ? std::int64_t(-1) : offsets[std::size_t(i)];
    };
    using R = core::TensorRole;
    LayerParams lp{};
    lp.index = std::int32_t(layers_.size());
    lp.unit = layout.unit_of(std::size_t(layout.find(R::norm1_weight, layer)));
    lp.fp8 = job.plan.fp8.enabled() && job.layer_fp8(layer) != core::Fp8Recipe::none;
    lp.ln1_w = at(R::norm1_weight);
    lp.ln1_b = at(R::norm1_bias);
    lp.qkv_w = at(R::qkv_weight);
    lp.qkv_b = at(R::qkv_bias);
    lp.q_down = at(R::mla_q_down);
    lp.q_norm_w = at(R::mla_q_norm);
    lp.q_norm_b = at(R::mla_q_norm_bias);
    lp.q_up = at(R::mla_q_up);
    lp.kv_down = at(R::mla_kv_down);
    lp.kv_norm_w = at(R::mla_kv_norm);
    lp.kv_norm_b = at(R::mla_kv_norm_bias);
    lp.kv_up = at(R::mla_kv_up);
    lp.proj_w = at(R::proj_weight);
    lp.proj_b = at(R::proj_bias);
    lp.ln2_w = at(R::norm2_weight);
    lp.ln2_b = at(R::norm2_bias);
    lp.moe = m.is_moe_layer(layer);
    if (lp.moe) {
        lp.router_w = at(R::router_weight);
        for (std::int64_t e = shape_.first_expert; e < shape_.first_expert + shape_.local_experts;
             ++e)
            lp.experts.push_back({at(R::expert_fc1_weight, e), at(R::expert_fc1_bias, e),
                                  at(R::expert_fc2_weight, e), at(R::expert_fc2_bias, e)});
    }
    const bool shared = lp.moe && m.moe->shared_expert_ffn_hidden_size > 0;
    if (!lp.moe || shared) {
        lp.fc_w = at(shared ? R::shared_fc1_weight : R::fc1_weight);
        lp.fc_b = at(shared ? R::shared_fc1_bias : R::fc1_bias);
        lp.fc2_w = at(shared ? R::shared_fc2_weight : R::fc2_weight);
        lp.fc2_b = at(shared ? R::shared_fc2_bias : R::fc2_bias);
        lp.mlp_width =
            shared ? m.moe->shared_expert_ffn_hidden_size / job.plan.tp : shape_.local_ffn;
    }
    return lp;
}

void GptChunk::norm_forward(const float* in, float* out, float* mean, float* rstd, std::int64_t w,
                            std::int64_t b) const {
    if (layernorm_)
        k::layernorm_forward(out, mean, rstd, in, p(w), p(b), shape_.rows, shape_.hidden,
                             norm_eps_);
    else
        k::rmsnorm_forward(out, rstd, in, p(w), shape_.rows, shape_.hidden, norm_eps_);
}

void GptChunk::norm_backward(float* dinp, const float* dout, const float* in, const float* mean,
                             const float* rstd, std::int64_t w, std::int64_t b) const {
    if (layernorm_)
        k::layernorm_backward(dinp, g(w), g(b), dout, in, p(w), mean, rstd, shape_.rows,
                              shape_.hidden);
    else
        k::rmsnorm_backward(dinp, g(w), dout, in, p(w), rstd, shape_.rows, shape_.hidden);
}

Vec GptChunk::gather_rows(Vec local, Communicator& tp) const {
    if (!sp_) return local;
    Vec all(local.size() * std::size_t(tp.size())); // rows of any width (MTP's are 2h)
    tp.all_gather(local.data(), all.data(), local.size());
    return all;
}

Vec GptChunk::reduce_rows(Vec partial, Communicator& tp) const {
    if (!sp_) {
        tp.all_reduce_sum(partial.data(), partial.size());
        return partial;
    }
    Vec mine(partial.size() / std::size_t(tp.size()));
    tp.reduce_scatter_sum(partial.data(), mine.data(), mine.size());
    return mine;
}

void GptChunk::layer_forward(std::size_t i, Layer& L, Vec& x, const ChunkComms& comms,
                             const Activations& a) const {
    Communicator& tp = comms.tensor;
    const std::int64_t layer = shape_.first_layer + std::int64_t(i);
    const std::int64_t NLH = shape_.rows * shape_.hidden,
                       Wl = (shape_.local_heads + 2 * shape_.local_kv_groups) * shape_.head_dim;
    const LayerParams& lp = layers_[i];
    // x holds this rank's rows; the GEMMs and attention see all N rows.
    L.x_in = x;
    norm1(lp, L, tp);
    if (is_mla_) {
        mla_forward(lp, L);
    } else {
        L.qkv.resize(std::size_t(shape_.tokens * Wl));
        gemm_forward(lp, Linear::qkv, -1, L.qkv.data(), L.ln1.data(), p(lp.qkv_w),
                     bias_ ? p(lp.qkv_b) : nullptr, shape_.tokens, shape_.hidden, Wl);
    }
    if (rope_ && !is_mla_) { // queries and keys turn by their positions; values do not
        k::rope_forward(L.qkv.data(), shape_.tokens, Wl, shape_.local_heads, shape_.head_dim,
                        row_positions_.data(), rotary_base_);
        k::rope_forward(L.qkv.data() + shape_.local_heads * shape_.head_dim, shape_.tokens, Wl,
                        shape_.local_kv_groups, shape_.head_dim, row_positions_.data(),
                        rotary_base_);
    }
    if (dropping(a)) L.attention_keys = attention_dropout_keys(layer, a);
    attention_forward(L, comms.context);
    if (is_mla_) { // keep the output without its (all-zero) value padding only
        compact_values(L);
        Vec().swap(L.att);
    }
    Vec y(static_cast<std::size_t>(shape_.tokens * shape_.hidden));
    gemm_forward(lp, Linear::proj, -1, y.data(), projection_input(L).data(), p(lp.proj_w), nullptr,
                 shape_.tokens, proj_in_, shape_.hidden);
    y = reduce_rows(std::move(y), tp); // row-parallel: sum the partial outputs
    if (bias_) add_bias(y.data(), p(lp.proj_b), shape_.rows, shape_.hidden);
    if (dropping(a)) drop_rows(y, attention_out, layer, a);
    L.x_mid.resize(std::size_t(NLH));
    for (std::int64_t j = 0; j < NLH; ++j)
        L.x_mid[std::size_t(j)] = x[std::size_t(j)] + y[std::size_t(j)];
    norm2(lp, L, tp);
    if (lp.moe) {
        moe_forward(lp, L, y, comms);
        if (lp.mlp_width > 0) { // shared experts: every token, beside the routed
            const Vec shared = mlp_forward(lp, L, tp);
            for (std::int64_t j = 0; j < NLH; ++j) y[std::size_t(j)] += shared[std::size_t(j)];
        }
    } else {
        y = mlp_forward(lp, L, tp);
    }
    if (dropping(a)) drop_rows(y, mlp_out, layer, a);
    for (std::int64_t j = 0; j < NLH; ++j)
        x[std::size_t(j)] = L.x_mid[std::size_t(j)] + y[std::size_t(j)];
}

Vec GptChunk::mlp_forward(const LayerParams& lp, Layer& L, Communicator& tp) const {
    const std::int64_t F = lp.mlp_width;
    mlp_hidden(lp, L);
    Vec y(static_cast<std::size_t>(shape_.tokens * shape_.hidden));
    gemm_forward(lp, Linear::fc2, -1, y.data(), L.act.data(), p(lp.fc2_w), nullptr, shape_.tokens,
                 F, shape_.hidden);
    y = reduce_rows(std::move(y), tp);
    if (bias_) add_bias(y.data(), p(lp.fc2_b), shape_.rows, shape_.hidden);
    return y;
}

void GptChunk::hold_units(const ChunkComms& comms, const std::vector<std::int32_t>& units) const {
    if (comms.units)
        for (std::int32_t u : units) comms.units->acquire(chunk_, u);
}

void GptChunk::drop_units(const ChunkComms& comms, const std::vector<std::int32_t>& units) const {
    if (comms.units)
        for (std::int32_t u : units) comms.units->release(chunk_, u);
}

std::vector<std::int32_t> GptChunk::step_units(PassOrder order, std::size_t step) const {
    const bool forward = order == PassOrder::forward;
    if (forward ? first_ : last_) {
        if (step == 0) return forward ? embedding_units_ : head_units_;
        --step;
    }
    if (step < main_layers_) return layer_unit(forward ? step : main_layers_ - 1 - step);
    if (forward && last_ && step == main_layers_) return head_units_;
    return {};
}

void GptChunk::hold_step(const ChunkComms& comms, PassOrder order, std::size_t step) const {
    if (!comms.units) return;
    hold_units(comms, step_units(order, step));
    const std::size_t depth = std::size_t(comms.units->prefetch_depth());
    for (std::size_t next = step + 1; next <= step + depth; ++next)
        for (std::int32_t u : step_units(order, next)) comms.units->prefetch(chunk_, u);
}

void GptChunk::drop_step(const ChunkComms& comms, PassOrder order, std::size_t step) const {
    drop_units(comms, step_units(order, step));
}

Vec GptChunk::embed(const std::int32_t* tokens, std::int64_t table, Communicator& tp) const {
    // Vocabulary-parallel lookup: each shard fills its rows, the tensor group sums them (into
    // this rank's rows under sequence parallelism).
    Vec all(static_cast<std::size_t>(shape_.tokens * shape_.hidden));
    k::embedding_forward(all.data(), tokens, p(table), shape_.tokens, shape_.hidden,
                         shape_.vocab_start, shape_.local_vocab);
    return reduce_rows(std::move(all), tp);
}

void GptChunk::settle_layer(std::size_t i, Layer& L, Activations& a) const {
    a.router_loss += L.moe.router_loss;
    // Here, not in layer_forward: a fully recomputed layer runs that again in B.
    if (a.training && layers_[i].moe) count_routed_slots(L.moe);
    if (recompute_[i] == core::RecomputeGranularity::full) {
        Vec input = std::move(L.x_in);
        L = Layer{};
        L.x_in = std::move(input); // only the layer's input stays until B
    } else if (recompute_[i] == core::RecomputeGranularity::selective) {
        drop_recomputed(layers_[i], L); // rebuilt in B
    }
}

double GptChunk::head_loss(const Vec& lnf, Vec& logits, Vec& row_max, Vec& sum_exp,
                           const std::int32_t* targets, const std::uint8_t* counted,
                           Communicator& tp) const {
    logits.resize(std::size_t(shape_.tokens * shape_.local_vocab));
    k::matmul_forward(logits.data(), lnf.data(), p(head_), nullptr, shape_.tokens, shape_.hidden,
                      shape_.local_vocab);
    // Padding rows of the vocabulary are not classes: they get no probability.
    for (std::int64_t v = std::max<std::int64_t>(0, shape_.vocab - shape_.vocab_start);
         v < shape_.local_vocab; ++v)
        for (std::int64_t n = 0; n < shape_.tokens; ++n)
            logits[std::size_t(n * shape_.local_vocab + v)] = -1e30f;
    row_max.resize(std::size_t(shape_.tokens));
    sum_exp.resize(std::size_t(shape_.tokens));
    Vec target(static_cast<std::size_t>(shape_.tokens));
    k::cross_entropy_row_max(row_max.data(), logits.data(), shape_.tokens, shape_.local_vocab);
    tp.all_reduce_max(row_max.data(), std::size_t(shape_.tokens));
    k::cross_entropy_target_logit(target.data(), logits.data(), targets, shape_.tokens,
                                  shape_.local_vocab, shape_.vocab_start);
    tp.all_reduce_sum(target.data(), std::size_t(shape_.tokens));
    k::cross_entropy_exp(logits.data(), sum_exp.data(), row_max.data(), shape_.tokens,
                         shape_.local_vocab); // logits → exps
    tp.all_reduce_sum(sum_exp.data(), std::size_t(shape_.tokens));
    double loss = 0.0;
    for (std::int64_t n = 0; n < shape_.tokens; ++n)
        if (!counted || counted[n])
            loss += std::log(double(sum_exp[std::size_t(n)])) + row_max[std::size_t(n)] -
                    target[std::size_t(n)];
    return loss;
}

void GptChunk::forward(Activations& a, const ChunkComms& comms) const {
    Communicator& tp = comms.tensor;
    Vec x;
    if (first_) {
        hold_step(comms, PassOrder::forward, 0);
        x = embed(a.tokens, wte_, tp);
        const std::int64_t row0 = sp_ ? tp.rank() * shape_.rows : 0;
        const auto& position = positions_[std::size_t(cp_rank_)];
        if (wpe_ >= 0)
            for (std::int64_t n = 0; n < shape_.rows; ++n)
                for (std::int64_t c = 0; c < shape_.hidden; ++c)
                    x[std::size_t(n * shape_.hidden + c)] +=
                        p(wpe_)[position[std::size_t((row0 + n) % shape_.local_sequence)] *
                                    shape_.hidden +
                                c];
        if (dropping(a)) drop_rows(x, embedding_out, -1, a);
        drop_step(comms, PassOrder::forward, 0);
    } else {
        x = std::move(a.input); // layer 0 keeps it as its x_in
    }
    a.layers.assign(layers_.size(), Layer{});
    for (std::size_t i = 0; i < main_layers_; ++i) {
        Layer& L = a.layers[i];
        hold_step(comms, PassOrder::forward, forward_step(i));
        layer_forward(i, L, x, comms, a);
        drop_step(comms, PassOrder::forward, forward_step(i));
        settle_layer(i, L, a);
    }
    if (!last_) {
        a.output = std::move(x);
        return;
    }
    a.hidden_out = std::move(x);
    hold_step(comms, PassOrder::forward, forward_step(main_layers_));
    Vec normed(static_cast<std::size_t>(shape_.rows * shape_.hidden));
    a.lnf_mean.resize(std::size_t(shape_.rows));
    a.lnf_rstd.resize(std::size_t(shape_.rows));
    norm_forward(a.hidden_out.data(), normed.data(), a.lnf_mean.data(), a.lnf_rstd.data(), lnf_w_,
                 lnf_b_);
    a.lnf = gather_rows(std::move(normed), tp);
    a.loss = head_loss(a.lnf, a.logits, a.row_max, a.sum_exp, a.targets, nullptr, tp) /
             double(loss_tokens_);
    drop_step(comms, PassOrder::forward, forward_step(main_layers_));
    if (!mtp_.empty()) mtp_forward(a, comms);
}

} // namespace trident::executor
