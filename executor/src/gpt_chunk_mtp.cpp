// Multi-token prediction on the last chunk (DeepSeek-AI 2024, DeepSeek-V3 §2.2; Megatron-Core's
// MultiTokenPredictionBlock, --mtp-num-layers). Module d (0-based) predicts the token d + 2
// ahead: h'ᵢ = eh_proj[enorm(Emb(t_{i+d+1})); hnorm(hᵢ)] (Megatron's order: the embedding
// first), its transformer layer, its final norm, and the shared output head. h of module 0 is
// the main model's final-norm output (the logits' input), of module d > 0 module d − 1's
// final-norm output. Megatron rolls the tokens and labels left by one per module and masks the
// positions rolled past the sequence's end (tokens there read id 0); each module's loss is the
// mean cross-entropy over the positions left, weighted by mtp_loss_scaling_factor / D, and
// enters the gradient only — the reported loss is the language model's.
// eh_proj is column-parallel (its output features split over the tensor ranks) and its output
// all-gathered, then scattered to this rank's rows under sequence parallelism, as Megatron's
// gather_from_tensor_model_parallel_region / scatter_to_sequence_parallel_region. The table the
// next tokens are looked up in is the word embedding: this chunk's (pp 1), the tied head
// (the table itself), the last stage's copy summed with the first stage's over the embedding
// group (partial_sums.h), or, where the rank holds the first stage in its other chunk
// (V-shaped schedules, DualPipe), that chunk's (share_mtp_table). eh_proj runs in its layer's
// precision (FP8 when the layer does, as a Transformer Engine linear). The module's own weight
// gradients (eh_proj, the shared head's share, the table's) are taken in B; its transformer layer's
// W follows the schedule.
#include "trident/core/internal_error.h"
#include "trident/executor/gpt_chunk.h"
#include "trident/kernels/cpu.h"

#include <algorithm>

namespace trident::executor {

namespace k = kernels::cpu;

void GptChunk::add_mtp_modules(const core::JobSpec& job, const core::ChunkLayout& layout,
                               const std::vector<std::int64_t>& offsets) {
    const core::ModelSpec& m = job.model;
    if (m.mtp_num_layers == 0) return;
    using R = core::TensorRole;
    const auto index = [&](R role, std::int64_t layer) { return layout.find(role, layer); };
    const auto at = [&](R role, std::int64_t layer) {
        const std::int64_t i = index(role, layer);
        return i < 0 ? std::int64_t(-1) : offsets[std::size_t(i)];
    };
    // Absent only where the rank's other chunk holds it (share_mtp_table).
    mtp_table_ = wte_ >= 0 ? wte_ : m.tied_embeddings ? head_ : at(R::word_embedding, -1);
    std::int32_t table_unit = -1;
    for (std::size_t i = 0; i < offsets.size(); ++i)
        if (offsets[i] == mtp_table_) table_unit = layout.unit_of(i);
    for (std::int64_t d = 0; d < m.mtp_num_layers; ++d) {
        const std::int64_t layer = m.num_layers + d;
        MtpParams mp{at(R::mtp_enorm_weight, layer),    at(R::mtp_enorm_bias, layer),
                     at(R::mtp_hnorm_weight, layer),    at(R::mtp_hnorm_bias, layer),
                     at(R::mtp_eh_proj, layer),         at(R::mtp_final_norm_weight, layer),
                     at(R::mtp_final_norm_bias, layer), {}};
        mp.units = head_units_;
        for (std::int32_t u :
             {layout.unit_of(std::size_t(index(R::mtp_enorm_weight, layer))), table_unit})
            if (u >= 0 && std::find(mp.units.begin(), mp.units.end(), u) == mp.units.end())
                mp.units.push_back(u);
        mtp_.push_back(std::move(mp));
        layers_.push_back(layer_params(job, layout, offsets, layer));
        // Recomputed as the chunk's first layer is (the simulator's mtp_view).
        recompute_.push_back(job.recompute_at(0));
    }
    mtp_scale_ = m.mtp_loss_scaling_factor / double(m.mtp_num_layers);
}

void GptChunk::share_mtp_table(const GptChunk& first) {
    if (!first.first_ || first.wte_ < 0)
        throw core::InternalError("multi-token prediction: chunk " + std::to_string(first.chunk_) +
                                  " holds no word embedding");
    mtp_table_ = first.wte_;
    mtp_table_chunk_ = first.chunk_;
}

// The MTP module's units held: its own, the head's, and the table's (in this chunk, or the
// first stage's embedding unit of the rank's other chunk).
void GptChunk::hold_mtp_units(const ChunkComms& comms, std::size_t d) const {
    hold_units(comms, mtp_[d].units);
    if (comms.units && mtp_table_chunk_ >= 0) comms.units->acquire(mtp_table_chunk_, 0);
}

void GptChunk::drop_mtp_units(const ChunkComms& comms, std::size_t d) const {
    drop_units(comms, mtp_[d].units);
    if (comms.units && mtp_table_chunk_ >= 0) comms.units->release(mtp_table_chunk_, 0);
}

void GptChunk::mtp_prelude(std::size_t d, Activations& a, Vec& x, Communicator& tp) const {
    Activations::Mtp& D = a.mtp[d];
    const MtpParams& mp = mtp_[d];
    const std::int64_t N = shape_.tokens, rows = shape_.rows, h = shape_.hidden, hl = h / tp.size();
    D.emb = embed(D.tokens.data(), mtp_table_, tp);
    if (dropping(a)) drop_rows(D.emb, embedding_out, model_->num_layers + std::int64_t(d), a);
    Vec en(static_cast<std::size_t>(rows * h)), hn(static_cast<std::size_t>(rows * h));
    for (Vec* v : {&D.e_mean, &D.e_rstd, &D.h_mean, &D.h_rstd}) v->resize(std::size_t(rows));
    norm_forward(D.emb.data(), en.data(), D.e_mean.data(), D.e_rstd.data(), mp.enorm_w, mp.enorm_b);
    norm_forward(D.h_prev.data(), hn.data(), D.h_mean.data(), D.h_rstd.data(), mp.hnorm_w,
                 mp.hnorm_b);
    Vec cat(static_cast<std::size_t>(rows * 2 * h));
    for (std::int64_t r = 0; r < rows; ++r) {
        std::copy_n(en.data() + r * h, h, cat.data() + r * 2 * h);
        std::copy_n(hn.data() + r * h, h, cat.data() + r * 2 * h + h);
    }
    D.cat = gather_rows(std::move(cat), tp); // the projection sees every row
    Vec part(static_cast<std::size_t>(N * hl));
    gemm_forward(layers_[main_layers_ + d], Linear::mtp_eh_proj, -1, part.data(), D.cat.data(),
                 p(mp.eh_proj), nullptr, N, 2 * h, hl);
    // Every rank's output columns side by side, then (sequence parallel) this rank's rows.
    Vec blocks(static_cast<std::size_t>(N * h));
    if (tp.size() > 1)
        tp.all_gather(part.data(), blocks.data(), part.size());
    else
        blocks = std::move(part);
    const std::int64_t row0 = sp_ ? tp.rank() * rows : 0;
    x.resize(std::size_t(rows * h));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t t = 0; t < tp.size(); ++t)
            std::copy_n(blocks.data() + (t * N + row0 + r) * hl, hl, x.data() + r * h + t * hl);
}

void GptChunk::mtp_forward(Activations& a, const ChunkComms& comms) const {
    Communicator& tp = comms.tensor;
    const std::int64_t N = shape_.tokens, T = shape_.local_sequence, rows = shape_.rows,
                       h = shape_.hidden;
    a.mtp.assign(mtp_.size(), Activations::Mtp{});
    a.mtp_loss = 0.0;
    // Module 0 reads the main final norm's output: this rank's rows of it.
    const std::int64_t row0 = sp_ ? tp.rank() * rows : 0;
    Vec h_prev(a.lnf.begin() + row0 * h, a.lnf.begin() + (row0 + rows) * h);
    for (std::size_t d = 0; d < mtp_.size(); ++d) {
        Activations::Mtp& D = a.mtp[d];
        hold_mtp_units(comms, d);
        // Rolled left by d + 1: position t reads token t + d + 1 and scores token t + d + 2.
        D.tokens.assign(std::size_t(N), 0);
        D.targets.assign(std::size_t(N), 0);
        D.counted.assign(std::size_t(N), 0);
        for (std::int64_t n = 0; n < N; ++n) {
            const std::int64_t ahead = n % T + std::int64_t(d) + 1;
            if (ahead >= T) continue;
            D.tokens[std::size_t(n)] = a.tokens[n - n % T + ahead];
            D.targets[std::size_t(n)] = a.targets[n - n % T + ahead];
            D.counted[std::size_t(n)] = 1;
            ++D.labels;
        }
        D.h_prev = std::move(h_prev);
        Vec x;
        mtp_prelude(d, a, x, tp);
        const std::size_t i = main_layers_ + d;
        layer_forward(i, a.layers[i], x, comms, a);
        settle_layer(i, a.layers[i], a);
        D.out = std::move(x);
        Vec normed(static_cast<std::size_t>(rows * h));
        D.lnf_mean.resize(std::size_t(rows));
        D.lnf_rstd.resize(std::size_t(rows));
        norm_forward(D.out.data(), normed.data(), D.lnf_mean.data(), D.lnf_rstd.data(),
                     mtp_[d].lnf_w, mtp_[d].lnf_b);
        D.lnf = gather_rows(normed, tp);
        D.loss = head_loss(D.lnf, D.logits, D.row_max, D.sum_exp, D.targets.data(),
                           D.counted.data(), tp) /
                 double(std::max<std::int64_t>(1, D.labels));
        a.mtp_loss += mtp_scale_ * D.loss;
        h_prev = std::move(normed);
        drop_mtp_units(comms, d);
    }
}

Vec GptChunk::mtp_prelude_backward(std::size_t d, Activations& a, const Vec& dx,
                                   Communicator& tp) const {
    Activations::Mtp& D = a.mtp[d];
    const MtpParams& mp = mtp_[d];
    const std::int64_t N = shape_.tokens, rows = shape_.rows, h = shape_.hidden, hl = h / tp.size();
    // The gradient of this rank's output columns of eh_proj, over every row.
    Vec all = gather_rows(dx, tp);
    Vec d_part(static_cast<std::size_t>(N * hl));
    for (std::int64_t n = 0; n < N; ++n)
        std::copy_n(all.data() + n * h + tp.rank() * hl, hl, d_part.data() + n * hl);
    release(all);
    Vec d_cat(static_cast<std::size_t>(N * 2 * h), 0.0f);
    const LayerParams& lp = layers_[main_layers_ + d]; // eh_proj runs in its layer's precision
    gemm_input_gradient(lp, Linear::mtp_eh_proj, -1, d_cat.data(), d_part.data(), p(mp.eh_proj), N,
                        2 * h, hl);
    gemm_weight_gradient(lp, Linear::mtp_eh_proj, -1, g(mp.eh_proj), nullptr, d_part.data(),
                         D.cat.data(), N, 2 * h, hl);
    release(D.cat);
    // Partial over the tensor group (each rank's columns): summed into this rank's rows.
    const Vec d_rows = reduce_rows(std::move(d_cat), tp);
    Vec d_en(static_cast<std::size_t>(rows * h)), d_hn(static_cast<std::size_t>(rows * h));
    for (std::int64_t r = 0; r < rows; ++r) {
        std::copy_n(d_rows.data() + r * 2 * h, h, d_en.data() + r * h);
        std::copy_n(d_rows.data() + r * 2 * h + h, h, d_hn.data() + r * h);
    }
    Vec d_emb(static_cast<std::size_t>(rows * h), 0.0f),
        d_h(static_cast<std::size_t>(rows * h), 0.0f);
    norm_backward(d_emb.data(), d_en.data(), D.emb.data(), D.e_mean.data(), D.e_rstd.data(),
                  mp.enorm_w, mp.enorm_b);
    norm_backward(d_h.data(), d_hn.data(), D.h_prev.data(), D.h_mean.data(), D.h_rstd.data(),
                  mp.hnorm_w, mp.hnorm_b);
    for (Vec* v : {&D.emb, &D.e_mean, &D.e_rstd, &D.h_prev, &D.h_mean, &D.h_rstd}) release(*v);
    d_emb = branch_gradient(d_emb, embedding_out, model_->num_layers + std::int64_t(d), a);
    // The table is split by vocabulary: its gradient needs every row.
    const Vec d_emb_all = gather_rows(std::move(d_emb), tp);
    k::embedding_backward(g(mtp_table_), D.tokens.data(), d_emb_all.data(), N, h,
                          shape_.vocab_start, shape_.local_vocab);
    return d_h;
}

Vec GptChunk::mtp_backward(Activations& a, float loss_scale, const ChunkComms& comms,
                           bool fused) const {
    Communicator& tp = comms.tensor;
    const std::int64_t N = shape_.tokens, rows = shape_.rows, h = shape_.hidden,
                       V = shape_.local_vocab;
    Vec d_next(static_cast<std::size_t>(rows * h), 0.0f); // from module d + 1's hnorm input
    for (std::size_t d = mtp_.size(); d-- > 0;) {
        Activations::Mtp& D = a.mtp[d];
        hold_mtp_units(comms, d);
        // (softmax − onehot) · scale over the counted rows; the rolled-out rows score nothing.
        const float scale =
            loss_scale * float(mtp_scale_) / float(std::max<std::int64_t>(1, D.labels));
        k::cross_entropy_backward(D.logits.data(), D.sum_exp.data(), D.targets.data(), scale, N, V,
                                  shape_.vocab_start);
        for (std::int64_t n = 0; n < N; ++n)
            if (!D.counted[std::size_t(n)]) std::fill_n(D.logits.data() + n * V, V, 0.0f);
        Vec dlnf(static_cast<std::size_t>(N * h), 0.0f);
        k::matmul_backward_input(dlnf.data(), D.logits.data(), p(head_), N, h, V);
        k::matmul_backward_weight(g(head_), nullptr, D.logits.data(), D.lnf.data(), N, h, V);
        for (Vec* v : {&D.logits, &D.lnf, &D.row_max, &D.sum_exp}) release(*v);
        dlnf = reduce_rows(std::move(dlnf), tp); // the head is column-parallel
        for (std::size_t j = 0; j < dlnf.size(); ++j) dlnf[j] += d_next[j];
        Vec dx(static_cast<std::size_t>(rows * h), 0.0f);
        norm_backward(dx.data(), dlnf.data(), D.out.data(), D.lnf_mean.data(), D.lnf_rstd.data(),
                      mtp_[d].lnf_w, mtp_[d].lnf_b);
        for (Vec* v : {&D.out, &D.lnf_mean, &D.lnf_rstd}) release(*v);
        layer_backward(main_layers_ + d, a, dx, loss_scale, comms, fused);
        d_next = mtp_prelude_backward(d, a, dx, tp);
        drop_mtp_units(comms, d);
    }
    return d_next;
}

} // namespace trident::executor
