#include "trident/executor/gpt_chunk.h"

#include "trident/core/hash.h"
#include "trident/kernels/cpu.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace trident::executor {

namespace k = kernels::cpu;

std::int64_t ParameterStore::add(std::string name, std::int64_t size, TensorFlags flags) {
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
        add({&s.probs, &s.gates, &s.load, &s.slot_out, &s.d_logits});
        for (const auto* experts : {&s.x, &s.fc, &s.act, &s.d_fc, &s.d_out})
            for (const Vec& v : *experts) n += double(v.size());
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

// Rows [begin, begin + count) of a row-major [rows × cols] tensor.
void copy_rows(float* out, const Vec& full, std::int64_t cols, std::int64_t begin,
               std::int64_t count) {
    std::copy(full.begin() + begin * cols, full.begin() + (begin + count) * cols, out);
}

// Columns [begin, begin + count) of every row.
void copy_cols(float* out, const Vec& full, std::int64_t rows, std::int64_t cols,
               std::int64_t begin, std::int64_t count) {
    for (std::int64_t r = 0; r < rows; ++r)
        std::copy(full.begin() + r * cols + begin, full.begin() + r * cols + begin + count,
                  out + r * count);
}

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
                   int tp_rank, int ep_rank, int cp_rank, ParameterStore& store, std::uint64_t seed)
    : model_(&job.model), store_(&store) {
    const core::ModelSpec& m = job.model;
    const core::ParallelPlan& plan = job.plan;
    const std::int64_t t = plan.tp, r = tp_rank;
    layernorm_ = m.normalization == core::Normalization::layernorm;
    swiglu_ = m.activation == core::Activation::swiglu;
    bias_ = m.linear_bias;
    B_ = plan.micro_batch_size;
    seq_ = job.training.seq_length;
    cp_ = plan.cp;
    cp_rank_ = cp_rank;
    for (std::int64_t c = 0; c < cp_; ++c) positions_.push_back(context_positions(seq_, cp_, c));
    T_ = std::int64_t(positions_[std::size_t(cp_rank)].size()); // this rank's tokens per sequence
    for (auto p : positions_[std::size_t(cp_rank)]) visible_.push_back(p + 1);
    N_ = B_ * T_;
    rope_ = m.position_embedding == core::PositionEmbedding::rope;
    rotary_base_ = m.rotary_base;
    norm_eps_ = float(m.norm_epsilon);
    dropout_ = m.dropout;
    seed_ = seed;
    tp_rank_ = tp_rank;
    for (std::int64_t b = 0; b < B_; ++b)
        row_positions_.insert(row_positions_.end(), positions_[std::size_t(cp_rank)].begin(),
                              positions_[std::size_t(cp_rank)].end());
    loss_tokens_ = B_ * seq_;
    sp_ = plan.sequence_parallel;
    flash_ = plan.flash_attention;
    Nl_ = sp_ ? N_ / t : N_;
    h_ = m.hidden_size;
    D_ = m.head_dim;
    const std::int64_t H = m.num_attention_heads, KV = m.num_query_groups, F = m.ffn_hidden_size;
    Hl_ = H / t;
    KVl_ = KV / t;
    Fl_ = F / t;
    vocab_ = m.vocab_size;
    Vl_ = m.padded_vocab_size(t) / t; // padded rows are masked out of the softmax
    vocab_start_ = r * Vl_;
    if (m.moe) {
        experts_ = m.moe->num_experts;
        top_k_ = m.moe->top_k;
        expert_ffn_ = m.moe->expert_ffn_hidden_size;
        aux_coeff_ = m.moe->aux_loss_coeff;
        capacity_factor_ = m.moe->capacity_factor.value_or(0.0);
        local_experts_ = experts_ / plan.ep;
        first_expert_ = ep_rank * local_experts_;
    }
    const std::int64_t vs = std::int64_t(chunk) * plan.pp + pipeline_rank;
    const std::int64_t per_chunk = job.layers_per_model_chunk();
    first_ = vs == 0;
    last_ = vs == plan.pp * plan.vpp - 1;
    first_layer_ = vs * per_chunk;
    const float init_std = 0.02f;
    // GPT-2's scaled init of the residual projections: 0.02 / √(2L).
    const float residual_std = init_std / std::sqrt(2.0f * float(m.num_layers));
    const auto ones = [&](std::int64_t offset, std::int64_t n) { std::fill_n(p(offset), n, 1.0f); };
    const auto add_norm = [&](const std::string& name, std::int64_t& w, std::int64_t& b) {
        w = store.add(name + ".weight", h_, {.tp_replicated = true, .sequence_partial = sp_});
        ones(w, h_);
        b = layernorm_ ? store.add(name + ".bias", h_, {.tp_replicated = true, .sequence_partial = sp_}) : -1;
    };
    // Record where the last tensor's shard sits in its full tensor: row blocks (begin, count)
    // of a [rows × cols] tensor, or a column block of every row.
    const auto place_rows = [&](std::int64_t full_rows, std::int64_t cols,
                                std::vector<std::pair<std::int64_t, std::int64_t>> blocks) {
        auto& t = store.tensors.back();
        t.full_size = full_rows * cols;
        t.placement.clear();
        for (auto [begin, count] : blocks) t.placement.push_back({begin * cols, count * cols});
    };
    const auto place_cols = [&](std::int64_t rows, std::int64_t full_cols, std::int64_t begin,
                                std::int64_t count) {
        auto& t = store.tensors.back();
        t.full_size = rows * full_cols;
        t.placement.clear();
        for (std::int64_t r = 0; r < rows; ++r)
            t.placement.push_back({r * full_cols + begin, count});
    };
    const auto vocab_table = [&](const std::string& name, bool duplicate) {
        const bool tied = m.tied_embeddings && name == "embedding.word";
        const std::int64_t offset =
            store.add(duplicate ? name + ".tied_copy" : name, Vl_ * h_,
                      {.decay = true, .duplicate = duplicate, .tied_embedding = tied});
        const Vec full = full_normal(seed, name, m.vocab_size * h_, init_std);
        const std::int64_t rows =
            std::max<std::int64_t>(0, std::min(Vl_, m.vocab_size - vocab_start_));
        if (rows > 0) copy_rows(p(offset), full, h_, vocab_start_, rows);
        place_rows(m.vocab_size, h_, {{vocab_start_, rows}}); // padding rows belong nowhere
        return offset;
    };

    if (first_) {
        wte_ = vocab_table("embedding.word", false);
        if (m.position_embedding == core::PositionEmbedding::learned) {
            wpe_ = store.add("embedding.position", m.max_position_embeddings * h_,
                             {.decay = true, .tp_replicated = true});
            const Vec full =
                full_normal(seed, "embedding.position", m.max_position_embeddings * h_, init_std);
            std::copy(full.begin(), full.end(), p(wpe_));
        }
    }
    for (std::int64_t layer = vs * per_chunk; layer < (vs + 1) * per_chunk; ++layer) {
        const std::string prefix = "layer." + std::to_string(layer) + ".";
        LayerParams lp{};
        add_norm(prefix + "norm1", lp.ln1_w, lp.ln1_b);
        // QKV: column-parallel over heads; this rank keeps its query heads and KV groups.
        const std::int64_t Wfull = (H + 2 * KV) * D_, Wl = (Hl_ + 2 * KVl_) * D_;
        lp.qkv_w = store.add(prefix + "qkv.weight", Wl * h_, {.decay = true});
        {
            const Vec full = full_normal(seed, prefix + "qkv.weight", Wfull * h_, init_std);
            copy_rows(p(lp.qkv_w), full, h_, r * Hl_ * D_, Hl_ * D_);
            copy_rows(p(lp.qkv_w) + Hl_ * D_ * h_, full, h_, (H + r * KVl_) * D_, KVl_ * D_);
            copy_rows(p(lp.qkv_w) + (Hl_ + KVl_) * D_ * h_, full, h_, (H + KV + r * KVl_) * D_,
                      KVl_ * D_);
        }
        const std::vector<std::pair<std::int64_t, std::int64_t>> qkv_rows = {
            {r * Hl_ * D_, Hl_ * D_},
            {(H + r * KVl_) * D_, KVl_ * D_},
            {(H + KV + r * KVl_) * D_, KVl_ * D_}};
        place_rows(Wfull, h_, qkv_rows);
        lp.qkv_b = bias_ ? store.add(prefix + "qkv.bias", Wl, {}) : -1;
        if (bias_) place_rows(Wfull, 1, qkv_rows);
        // Output projection: row-parallel over the same heads; its bias added once after the sum.
        lp.proj_w = store.add(prefix + "proj.weight", h_ * Hl_ * D_, {.decay = true});
        copy_cols(p(lp.proj_w),
                  full_normal(seed, prefix + "proj.weight", h_ * H * D_, residual_std), h_, H * D_,
                  r * Hl_ * D_, Hl_ * D_);
        place_cols(h_, H * D_, r * Hl_ * D_, Hl_ * D_);
        lp.proj_b = bias_ ? store.add(prefix + "proj.bias", h_, {.tp_replicated = true}) : -1;
        add_norm(prefix + "norm2", lp.ln2_w, lp.ln2_b);
        if (m.is_moe_layer(layer)) {
            // Router (replicated) and this expert rank's experts, each initialised from its
            // global name so any ep gives the same model.
            lp.moe = true;
            lp.router_w = store.add(prefix + "router.weight", experts_ * h_,
                                    {.decay = true, .tp_replicated = true});
            const Vec router = full_normal(seed, prefix + "router.weight", experts_ * h_, init_std);
            std::copy(router.begin(), router.end(), p(lp.router_w));
            const std::int64_t gate = swiglu_ ? 2 : 1;
            for (std::int64_t e = first_expert_; e < first_expert_ + local_experts_; ++e) {
                const std::string ex = prefix + "expert." + std::to_string(e) + ".";
                ExpertParams x{};
                x.fc_w = store.add(ex + "fc1.weight", gate * expert_ffn_ * h_,
                                   {.decay = true, .expert = true});
                const Vec w1 =
                    full_normal(seed, ex + "fc1.weight", gate * expert_ffn_ * h_, init_std);
                std::copy(w1.begin(), w1.end(), p(x.fc_w));
                x.fc_b = bias_ ? store.add(ex + "fc1.bias", gate * expert_ffn_, {.expert = true})
                               : -1;
                x.fc2_w =
                    store.add(ex + "fc2.weight", h_ * expert_ffn_, {.decay = true, .expert = true});
                const Vec w2 = full_normal(seed, ex + "fc2.weight", h_ * expert_ffn_, residual_std);
                std::copy(w2.begin(), w2.end(), p(x.fc2_w));
                x.fc2_b =
                    bias_ ? store.add(ex + "fc2.bias", h_, {.expert = true}) : -1;
                lp.experts.push_back(x);
            }
        } else {
            // MLP: first GEMM column-parallel (SwiGLU keeps its gate and up halves together).
            const std::int64_t gate = swiglu_ ? 2 : 1;
            lp.fc_w = store.add(prefix + "fc1.weight", gate * Fl_ * h_, {.decay = true});
            {
                const Vec full = full_normal(seed, prefix + "fc1.weight", gate * F * h_, init_std);
                copy_rows(p(lp.fc_w), full, h_, r * Fl_, Fl_);
                if (swiglu_) copy_rows(p(lp.fc_w) + Fl_ * h_, full, h_, F + r * Fl_, Fl_);
            }
            std::vector<std::pair<std::int64_t, std::int64_t>> fc_rows = {{r * Fl_, Fl_}};
            if (swiglu_) fc_rows.push_back({F + r * Fl_, Fl_});
            place_rows(gate * F, h_, fc_rows);
            lp.fc_b = bias_ ? store.add(prefix + "fc1.bias", gate * Fl_, {}) : -1;
            if (bias_) place_rows(gate * F, 1, fc_rows);
            lp.fc2_w = store.add(prefix + "fc2.weight", h_ * Fl_, {.decay = true});
            copy_cols(p(lp.fc2_w), full_normal(seed, prefix + "fc2.weight", h_ * F, residual_std),
                      h_, F, r * Fl_, Fl_);
            place_cols(h_, F, r * Fl_, Fl_);
            lp.fc2_b = bias_ ? store.add(prefix + "fc2.bias", h_, {.tp_replicated = true}) : -1;
        }
        layers_.push_back(lp);
        recompute_.push_back(job.layer_recompute(layer));
    }
    if (last_) {
        add_norm("final_norm", lnf_w_, lnf_b_);
        if (!m.tied_embeddings)
            head_ = vocab_table("output.weight", false);
        else if (first_)
            head_ = wte_; // one chunk holds both ends: literally the same tensor
        else
            head_ = vocab_table("embedding.word", true); // kept in sync over the embedding group
    }
}

void GptChunk::norm_forward(const float* in, float* out, float* mean, float* rstd, std::int64_t w,
                            std::int64_t b) const {
    if (layernorm_)
        k::layernorm_forward(out, mean, rstd, in, p(w), p(b), Nl_, h_, norm_eps_);
    else
        k::rmsnorm_forward(out, rstd, in, p(w), Nl_, h_, norm_eps_);
}

void GptChunk::norm_backward(float* dinp, const float* dout, const float* in, const float* mean,
                             const float* rstd, std::int64_t w, std::int64_t b) const {
    if (layernorm_)
        k::layernorm_backward(dinp, g(w), g(b), dout, in, p(w), mean, rstd, Nl_, h_);
    else
        k::rmsnorm_backward(dinp, g(w), dout, in, p(w), rstd, Nl_, h_);
}

Vec GptChunk::gather_rows(Vec local, Communicator& tp) const {
    if (!sp_) return local;
    Vec all(static_cast<std::size_t>(N_ * h_));
    tp.all_gather(local.data(), all.data(), local.size());
    return all;
}

Vec GptChunk::reduce_rows(Vec partial, Communicator& tp) const {
    if (!sp_) {
        tp.all_reduce_sum(partial.data(), partial.size());
        return partial;
    }
    Vec mine(static_cast<std::size_t>(Nl_ * h_));
    tp.reduce_scatter_sum(partial.data(), mine.data(), mine.size());
    return mine;
}

void GptChunk::layer_forward(std::size_t i, Layer& L, Vec& x, const ChunkComms& comms,
                             const Activations& a) const {
    Communicator& tp = comms.tensor;
    const std::int64_t layer = first_layer_ + std::int64_t(i);
    const std::int64_t NLH = Nl_ * h_, Wl = (Hl_ + 2 * KVl_) * D_, gate = swiglu_ ? 2 : 1;
    const LayerParams& lp = layers_[i];
    // x holds this rank's rows; the GEMMs and attention see all N rows.
    L.x_in = x;
    Vec normed(static_cast<std::size_t>(NLH));
    L.ln1_mean.resize(std::size_t(Nl_));
    L.ln1_rstd.resize(std::size_t(Nl_));
    norm_forward(L.x_in.data(), normed.data(), L.ln1_mean.data(), L.ln1_rstd.data(), lp.ln1_w,
                 lp.ln1_b);
    L.ln1 = gather_rows(std::move(normed), tp);
    L.qkv.resize(std::size_t(N_ * Wl));
    k::matmul_forward(L.qkv.data(), L.ln1.data(), p(lp.qkv_w), bias_ ? p(lp.qkv_b) : nullptr, N_,
                      h_, Wl);
    if (rope_) { // queries and keys turn by their tokens' positions; values do not
        k::rope_forward(L.qkv.data(), N_, Wl, Hl_, D_, row_positions_.data(), rotary_base_);
        k::rope_forward(L.qkv.data() + Hl_ * D_, N_, Wl, KVl_, D_, row_positions_.data(),
                        rotary_base_);
    }
    if (dropping(a)) L.attention_keys = attention_dropout_keys(layer, a);
    attention_forward(L, comms.context);
    Vec y(static_cast<std::size_t>(N_ * h_));
    k::matmul_forward(y.data(), L.att.data(), p(lp.proj_w), nullptr, N_, Hl_ * D_, h_);
    y = reduce_rows(std::move(y), tp); // row-parallel: sum the partial outputs
    if (bias_) add_bias(y.data(), p(lp.proj_b), Nl_, h_);
    if (dropping(a)) drop_rows(y, attention_out, layer, a);
    L.x_mid.resize(std::size_t(NLH));
    for (std::int64_t j = 0; j < NLH; ++j)
        L.x_mid[std::size_t(j)] = x[std::size_t(j)] + y[std::size_t(j)];
    L.ln2_mean.resize(std::size_t(Nl_));
    L.ln2_rstd.resize(std::size_t(Nl_));
    normed.resize(std::size_t(NLH));
    norm_forward(L.x_mid.data(), normed.data(), L.ln2_mean.data(), L.ln2_rstd.data(), lp.ln2_w,
                 lp.ln2_b);
    L.ln2 = gather_rows(std::move(normed), tp);
    if (lp.moe) {
        moe_forward(lp, L, y, comms.expert); // experts see whole tokens: tp is 1 for MoE here
    } else {
        L.fc.resize(std::size_t(N_ * gate * Fl_));
        k::matmul_forward(L.fc.data(), L.ln2.data(), p(lp.fc_w), bias_ ? p(lp.fc_b) : nullptr, N_,
                          h_, gate * Fl_);
        L.act.resize(std::size_t(N_ * Fl_));
        if (swiglu_)
            k::swiglu_forward(L.act.data(), L.fc.data(), N_, Fl_);
        else
            k::gelu_forward(L.act.data(), L.fc.data(), N_ * Fl_);
        y.resize(std::size_t(N_ * h_)); // fully overwritten by the GEMM
        k::matmul_forward(y.data(), L.act.data(), p(lp.fc2_w), nullptr, N_, Fl_, h_);
        y = reduce_rows(std::move(y), tp);
        if (bias_) add_bias(y.data(), p(lp.fc2_b), Nl_, h_);
    }
    if (dropping(a)) drop_rows(y, mlp_out, layer, a);
    for (std::int64_t j = 0; j < NLH; ++j)
        x[std::size_t(j)] = L.x_mid[std::size_t(j)] + y[std::size_t(j)];
}

void GptChunk::forward(Activations& a, const ChunkComms& comms) const {
    Communicator& tp = comms.tensor;
    Vec x;
    if (first_) {
        // Vocabulary-parallel lookup: each shard fills its rows, the tensor group sums them
        // (into this rank's rows under sequence parallelism).
        Vec all(static_cast<std::size_t>(N_ * h_));
        k::embedding_forward(all.data(), a.tokens, p(wte_), N_, h_, vocab_start_, Vl_);
        x = reduce_rows(std::move(all), tp);
        const std::int64_t row0 = sp_ ? tp.rank() * Nl_ : 0;
        const auto& position = positions_[std::size_t(cp_rank_)];
        if (wpe_ >= 0)
            for (std::int64_t n = 0; n < Nl_; ++n)
                for (std::int64_t c = 0; c < h_; ++c)
                    x[std::size_t(n * h_ + c)] +=
                        p(wpe_)[position[std::size_t((row0 + n) % T_)] * h_ + c];
        if (dropping(a)) drop_rows(x, embedding_out, -1, a);
    } else {
        x = std::move(a.input); // layer 0 keeps it as its x_in
    }
    a.layers.assign(layers_.size(), Layer{});
    for (std::size_t i = 0; i < layers_.size(); ++i) {
        Layer& L = a.layers[i];
        layer_forward(i, L, x, comms, a);
        if (recompute_[i] == core::RecomputeGranularity::full) {
            Vec input = std::move(L.x_in);
            L = Layer{};
            L.x_in = std::move(input); // only the layer's input stays until B
        } else if (recompute_[i] == core::RecomputeGranularity::selective) {
            Vec().swap(L.probs); // the attention core's saved state is recomputed in B
            Vec().swap(L.lse);
        }
    }
    if (!last_) {
        a.output = std::move(x);
        return;
    }
    a.hidden_out = std::move(x);
    Vec normed(static_cast<std::size_t>(Nl_ * h_));
    a.lnf_mean.resize(std::size_t(Nl_));
    a.lnf_rstd.resize(std::size_t(Nl_));
    norm_forward(a.hidden_out.data(), normed.data(), a.lnf_mean.data(), a.lnf_rstd.data(), lnf_w_,
                 lnf_b_);
    a.lnf = gather_rows(std::move(normed), tp);
    a.logits.resize(std::size_t(N_ * Vl_));
    k::matmul_forward(a.logits.data(), a.lnf.data(), p(head_), nullptr, N_, h_, Vl_);
    // Padding rows of the vocabulary are not classes: they get no probability.
    for (std::int64_t v = std::max<std::int64_t>(0, vocab_ - vocab_start_); v < Vl_; ++v)
        for (std::int64_t n = 0; n < N_; ++n) a.logits[std::size_t(n * Vl_ + v)] = -1e30f;
    a.row_max.resize(std::size_t(N_));
    a.sum_exp.resize(std::size_t(N_));
    Vec target(static_cast<std::size_t>(N_));
    k::cross_entropy_row_max(a.row_max.data(), a.logits.data(), N_, Vl_);
    tp.all_reduce_max(a.row_max.data(), std::size_t(N_));
    k::cross_entropy_target_logit(target.data(), a.logits.data(), a.targets, N_, Vl_, vocab_start_);
    tp.all_reduce_sum(target.data(), std::size_t(N_));
    k::cross_entropy_exp(a.logits.data(), a.sum_exp.data(), a.row_max.data(), N_,
                         Vl_); // logits → exps
    tp.all_reduce_sum(a.sum_exp.data(), std::size_t(N_));
    double loss = 0.0;
    for (std::int64_t n = 0; n < N_; ++n)
        loss += std::log(double(a.sum_exp[std::size_t(n)])) + a.row_max[std::size_t(n)] -
                target[std::size_t(n)];
    a.loss = loss / double(loss_tokens_);
}

} // namespace trident::executor
