// The mixture-of-experts MLP of a GptChunk layer: top-k routing with the load-balancing loss,
// token dispatch and combine over the expert group by all-to-all(v), capacity dropping, and
// this rank's experts (forward and backward).
#include "trident/executor/gpt_chunk.h"
#include "trident/kernels/cpu.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace trident::executor {

namespace k = kernels::cpu;

namespace {

// Start of each rank's block of rows, and element counts of blocks of `width`-wide rows.
std::vector<std::int64_t> row_offsets(const std::vector<std::int64_t>& rows) {
    std::vector<std::int64_t> at(rows.size(), 0);
    for (std::size_t r = 1; r < rows.size(); ++r) at[r] = at[r - 1] + rows[r - 1];
    return at;
}

std::vector<std::size_t> element_counts(const std::vector<std::int64_t>& rows, std::int64_t width) {
    std::vector<std::size_t> counts;
    for (auto n : rows) counts.push_back(std::size_t(n * width));
    return counts;
}

std::int64_t total_rows(const std::vector<std::int64_t>& rows) {
    return std::accumulate(rows.begin(), rows.end(), std::int64_t{0});
}

} // namespace

void GptChunk::moe_forward(const LayerParams& lp, Layer& L, Vec& y, Communicator& ep) const {
    const std::int64_t E = experts_, K = top_k_, R = ep.size(), El = shape_.local_experts,
                       gate = swiglu_ ? 2 : 1;
    MoeState& s = L.moe;
    s = MoeState{};
    // Router: softmax over all experts, the top k per token, gates renormalised over them.
    Vec logits(static_cast<std::size_t>(shape_.tokens * E));
    k::matmul_forward(logits.data(), L.ln2.data(), p(lp.router_w), nullptr, shape_.tokens,
                      shape_.hidden, E);
    s.probs.resize(logits.size());
    s.topk.resize(std::size_t(shape_.tokens * K));
    s.gates.resize(std::size_t(shape_.tokens * K));
    s.load.assign(std::size_t(E), 0.0f);
    if (z_coeff_ > 0) s.lse.resize(std::size_t(shape_.tokens));
    double z_sum = 0.0;
    for (std::int64_t n = 0; n < shape_.tokens; ++n) {
        const float* l = logits.data() + n * E;
        float* pr = s.probs.data() + n * E;
        float max = -INFINITY, sum = 0.0f;
        for (std::int64_t e = 0; e < E; ++e) max = std::fmax(max, l[e]);
        for (std::int64_t e = 0; e < E; ++e) sum += (pr[e] = std::exp(l[e] - max));
        for (std::int64_t e = 0; e < E; ++e) pr[e] /= sum;
        if (z_coeff_ > 0) {
            s.lse[std::size_t(n)] = max + std::log(sum);
            z_sum += double(s.lse[std::size_t(n)]) * double(s.lse[std::size_t(n)]);
        }
        std::vector<std::int32_t> order(static_cast<std::size_t>(E));
        for (std::int64_t e = 0; e < E; ++e) order[std::size_t(e)] = std::int32_t(e);
        std::partial_sort(order.begin(), order.begin() + K, order.end(),
                          [&](std::int32_t a, std::int32_t b) {
                              return pr[a] > pr[b] || (pr[a] == pr[b] && a < b);
                          });
        float chosen = 0.0f;
        for (std::int64_t j = 0; j < K; ++j) chosen += pr[order[std::size_t(j)]];
        for (std::int64_t j = 0; j < K; ++j) {
            const std::int32_t e = order[std::size_t(j)];
            s.topk[std::size_t(n * K + j)] = e;
            s.gates[std::size_t(n * K + j)] = pr[e] / chosen;
            s.load[std::size_t(e)] += 1.0f / float(shape_.tokens * K);
        }
    }
    // The router losses' value: Fedus et al. 2021's coeff · E · Σ_e f_e · P_e (P_e the mean
    // probability of expert e) and ST-MoE's z-loss, coeff · mean over tokens of lse².
    double balance = 0.0;
    for (std::int64_t e = 0; e < E; ++e) {
        double mean_probability = 0.0;
        for (std::int64_t n = 0; n < shape_.tokens; ++n)
            mean_probability += s.probs[std::size_t(n * E + e)];
        balance += double(s.load[std::size_t(e)]) * mean_probability / double(shape_.tokens);
    }
    s.router_loss = aux_coeff_ * double(E) * balance + z_coeff_ * z_sum / double(shape_.tokens);
    // With a capacity factor each expert takes at most ⌈cf · N·k / E⌉ of this rank's slots, in
    // token order; the rest are dropped (their output is zero, as in GShard and Switch).
    std::vector<std::int64_t> taken(static_cast<std::size_t>(E), 0);
    const std::int64_t capacity =
        capacity_factor_ > 0
            ? std::int64_t(std::ceil(capacity_factor_ * double(shape_.tokens * K) / double(E)))
            : shape_.tokens * K;
    // Dispatch: each slot's token to the rank holding its expert; the counts first, then the
    // rows (each with its expert, local to the receiver) by a variable-size all-to-all.
    s.sent.assign(std::size_t(R), 0);
    s.slot_rank.assign(std::size_t(shape_.tokens * K), -1);
    s.slot_row.assign(std::size_t(shape_.tokens * K), -1);
    for (std::int64_t slot = 0; slot < shape_.tokens * K; ++slot) {
        if (taken[std::size_t(s.topk[std::size_t(slot)])]++ >= capacity) continue; // dropped
        const std::int32_t r = std::int32_t(s.topk[std::size_t(slot)] / El);
        s.slot_rank[std::size_t(slot)] = r;
        s.slot_row[std::size_t(slot)] = std::int32_t(s.sent[std::size_t(r)]++);
    }
    Vec counts_out(static_cast<std::size_t>(R)), counts_in(static_cast<std::size_t>(R));
    for (std::int64_t r = 0; r < R; ++r) counts_out[std::size_t(r)] = float(s.sent[std::size_t(r)]);
    ep.all_to_all(counts_out.data(), counts_in.data(), 1);
    s.received.assign(std::size_t(R), 0);
    for (std::int64_t r = 0; r < R; ++r)
        s.received[std::size_t(r)] = std::int64_t(counts_in[std::size_t(r)]);
    const std::vector<std::int64_t> send_at = row_offsets(s.sent);
    const std::int64_t row = shape_.hidden + 1; // the token, then its expert
    Vec out_buf(static_cast<std::size_t>(total_rows(s.sent) * row)),
        in_buf(static_cast<std::size_t>(total_rows(s.received) * row));
    for (std::int64_t slot = 0; slot < shape_.tokens * K; ++slot) {
        if (s.slot_rank[std::size_t(slot)] < 0) continue;
        float* dst = out_buf.data() + (send_at[std::size_t(s.slot_rank[std::size_t(slot)])] +
                                       s.slot_row[std::size_t(slot)]) *
                                          row;
        std::copy_n(L.ln2.data() + (slot / K) * shape_.hidden, shape_.hidden, dst);
        dst[shape_.hidden] = float(s.topk[std::size_t(slot)] % El);
    }
    ep.all_to_allv(out_buf.data(), element_counts(s.sent, row), in_buf.data(),
                   element_counts(s.received, row));
    // The local experts run on the rows they received.
    s.x.assign(std::size_t(El), Vec{});
    const std::int64_t arrived = total_rows(s.received);
    s.recv_expert.assign(std::size_t(arrived), -1);
    s.recv_pos.assign(std::size_t(arrived), -1);
    for (std::int64_t r = 0; r < arrived; ++r) {
        const float* src = in_buf.data() + r * row;
        const std::int32_t e = std::int32_t(src[shape_.hidden]);
        s.recv_expert[std::size_t(r)] = e;
        s.recv_pos[std::size_t(r)] =
            std::int32_t(s.x[std::size_t(e)].size() / std::size_t(shape_.hidden));
        s.x[std::size_t(e)].insert(s.x[std::size_t(e)].end(), src, src + shape_.hidden);
    }
    s.fc.assign(std::size_t(El), Vec{});
    s.act.assign(std::size_t(El), Vec{});
    std::vector<Vec> expert_out(static_cast<std::size_t>(El));
    for (std::int64_t e = 0; e < El; ++e) {
        const std::int64_t rows = std::int64_t(s.x[std::size_t(e)].size()) / shape_.hidden;
        if (rows == 0) continue;
        const ExpertParams& x = lp.experts[std::size_t(e)];
        Vec& fc = s.fc[std::size_t(e)];
        Vec& act = s.act[std::size_t(e)];
        fc.resize(std::size_t(rows * gate * expert_ffn_));
        k::matmul_forward(fc.data(), s.x[std::size_t(e)].data(), p(x.fc_w),
                          bias_ ? p(x.fc_b) : nullptr, rows, shape_.hidden, gate * expert_ffn_);
        act.resize(std::size_t(rows * expert_ffn_));
        if (swiglu_)
            k::swiglu_forward(act.data(), fc.data(), rows, expert_ffn_);
        else
            k::gelu_forward(act.data(), fc.data(), rows * expert_ffn_);
        expert_out[std::size_t(e)].resize(std::size_t(rows * shape_.hidden));
        k::matmul_forward(expert_out[std::size_t(e)].data(), act.data(), p(x.fc2_w),
                          bias_ ? p(x.fc2_b) : nullptr, rows, expert_ffn_, shape_.hidden);
    }
    // Combine: outputs return the way the tokens came; each token sums its k gated outputs.
    Vec ret(static_cast<std::size_t>(arrived * shape_.hidden)),
        back(static_cast<std::size_t>(total_rows(s.sent) * shape_.hidden));
    for (std::int64_t r = 0; r < arrived; ++r)
        std::copy_n(expert_out[std::size_t(s.recv_expert[std::size_t(r)])].data() +
                        s.recv_pos[std::size_t(r)] * shape_.hidden,
                    shape_.hidden, ret.data() + r * shape_.hidden);
    ep.all_to_allv(ret.data(), element_counts(s.received, shape_.hidden), back.data(),
                   element_counts(s.sent, shape_.hidden));
    y.assign(std::size_t(shape_.tokens * shape_.hidden), 0.0f);
    s.slot_out.assign(std::size_t(shape_.tokens * K * shape_.hidden), 0.0f);
    for (std::int64_t slot = 0; slot < shape_.tokens * K; ++slot) {
        if (s.slot_rank[std::size_t(slot)] < 0) continue;
        const float* o = back.data() + (send_at[std::size_t(s.slot_rank[std::size_t(slot)])] +
                                        s.slot_row[std::size_t(slot)]) *
                                           shape_.hidden;
        std::copy_n(o, shape_.hidden, s.slot_out.data() + slot * shape_.hidden);
        const float g = s.gates[std::size_t(slot)];
        for (std::int64_t c = 0; c < shape_.hidden; ++c)
            y[std::size_t((slot / K) * shape_.hidden + c)] += g * o[c];
    }
}

void GptChunk::moe_backward(const LayerParams& lp, Layer& L, const Vec& dy, Vec& d_ln2,
                            float loss_scale, Communicator& ep) const {
    const std::int64_t E = experts_, K = top_k_, El = shape_.local_experts, gate = swiglu_ ? 2 : 1;
    MoeState& s = L.moe;
    // Gradients of the gates and of each slot's expert output (gate · dy), sent to the experts.
    Vec d_gate(static_cast<std::size_t>(shape_.tokens * K));
    const std::vector<std::int64_t> send_at = row_offsets(s.sent);
    const std::int64_t arrived = total_rows(s.received);
    Vec to_experts(static_cast<std::size_t>(total_rows(s.sent) * shape_.hidden)),
        at_experts(static_cast<std::size_t>(arrived * shape_.hidden));
    for (std::int64_t slot = 0; slot < shape_.tokens * K; ++slot) {
        if (s.slot_rank[std::size_t(slot)] < 0) {
            d_gate[std::size_t(slot)] = 0.0f; // a dropped slot contributed nothing
            continue;
        }
        const float* d = dy.data() + (slot / K) * shape_.hidden;
        const float* o = s.slot_out.data() + slot * shape_.hidden;
        float* dst = to_experts.data() + (send_at[std::size_t(s.slot_rank[std::size_t(slot)])] +
                                          s.slot_row[std::size_t(slot)]) *
                                             shape_.hidden;
        float dot = 0.0f;
        const float g = s.gates[std::size_t(slot)];
        for (std::int64_t c = 0; c < shape_.hidden; ++c) {
            dot += d[c] * o[c];
            dst[c] = g * d[c];
        }
        d_gate[std::size_t(slot)] = dot;
    }
    ep.all_to_allv(to_experts.data(), element_counts(s.sent, shape_.hidden), at_experts.data(),
                   element_counts(s.received, shape_.hidden));
    s.d_out.assign(std::size_t(El), Vec{});
    s.d_fc.assign(std::size_t(El), Vec{});
    for (std::int64_t e = 0; e < El; ++e)
        s.d_out[std::size_t(e)].resize(s.x[std::size_t(e)].size());
    for (std::int64_t r = 0; r < arrived; ++r)
        std::copy_n(at_experts.data() + r * shape_.hidden, shape_.hidden,
                    s.d_out[std::size_t(s.recv_expert[std::size_t(r)])].data() +
                        s.recv_pos[std::size_t(r)] * shape_.hidden);
    std::vector<Vec> d_in(static_cast<std::size_t>(El));
    for (std::int64_t e = 0; e < El; ++e) {
        const std::int64_t rows = std::int64_t(s.x[std::size_t(e)].size()) / shape_.hidden;
        if (rows == 0) continue;
        const ExpertParams& x = lp.experts[std::size_t(e)];
        Vec d_act(static_cast<std::size_t>(rows * expert_ffn_), 0.0f);
        k::matmul_backward_input(d_act.data(), s.d_out[std::size_t(e)].data(), p(x.fc2_w), rows,
                                 expert_ffn_, shape_.hidden);
        Vec& d_fc = s.d_fc[std::size_t(e)];
        d_fc.assign(std::size_t(rows * gate * expert_ffn_), 0.0f);
        if (swiglu_)
            k::swiglu_backward(d_fc.data(), s.fc[std::size_t(e)].data(), d_act.data(), rows,
                               expert_ffn_);
        else
            k::gelu_backward(d_fc.data(), s.fc[std::size_t(e)].data(), d_act.data(),
                             rows * expert_ffn_);
        d_in[std::size_t(e)].assign(std::size_t(rows * shape_.hidden), 0.0f);
        k::matmul_backward_input(d_in[std::size_t(e)].data(), d_fc.data(), p(x.fc_w), rows,
                                 shape_.hidden, gate * expert_ffn_);
        Vec().swap(s.fc[std::size_t(e)]);
    }
    // Input gradients return to the tokens' ranks and add up per token.
    Vec ret(at_experts.size()), back(to_experts.size());
    for (std::int64_t r = 0; r < arrived; ++r)
        std::copy_n(d_in[std::size_t(s.recv_expert[std::size_t(r)])].data() +
                        s.recv_pos[std::size_t(r)] * shape_.hidden,
                    shape_.hidden, ret.data() + r * shape_.hidden);
    ep.all_to_allv(ret.data(), element_counts(s.received, shape_.hidden), back.data(),
                   element_counts(s.sent, shape_.hidden));
    for (std::int64_t slot = 0; slot < shape_.tokens * K; ++slot) {
        if (s.slot_rank[std::size_t(slot)] < 0) continue;
        const float* d = back.data() + (send_at[std::size_t(s.slot_rank[std::size_t(slot)])] +
                                        s.slot_row[std::size_t(slot)]) *
                                           shape_.hidden;
        for (std::int64_t c = 0; c < shape_.hidden; ++c)
            d_ln2[std::size_t((slot / K) * shape_.hidden + c)] += d[c];
    }
    // Router: through the renormalised gates, the load-balancing loss (Fedus et al. 2021:
    // coeff · E · Σ f_e · P_e, f_e held constant) and the softmax.
    s.d_logits.assign(std::size_t(shape_.tokens * E), 0.0f);
    Vec d_prob(static_cast<std::size_t>(E));
    for (std::int64_t n = 0; n < shape_.tokens; ++n) {
        const float* pr = s.probs.data() + n * E;
        float chosen = 0.0f, weighted = 0.0f;
        for (std::int64_t j = 0; j < K; ++j) {
            chosen += pr[s.topk[std::size_t(n * K + j)]];
            weighted += d_gate[std::size_t(n * K + j)] * s.gates[std::size_t(n * K + j)];
        }
        for (std::int64_t e = 0; e < E; ++e)
            d_prob[std::size_t(e)] = loss_scale * float(aux_coeff_) * float(E) *
                                     s.load[std::size_t(e)] / float(shape_.tokens);
        for (std::int64_t j = 0; j < K; ++j)
            d_prob[std::size_t(s.topk[std::size_t(n * K + j)])] +=
                (d_gate[std::size_t(n * K + j)] - weighted) / chosen;
        float dot = 0.0f;
        for (std::int64_t e = 0; e < E; ++e) dot += pr[e] * d_prob[std::size_t(e)];
        // The z-loss (Zoph et al. 2022, ST-MoE): d(coeff · mean lse²)/d logit = coeff · 2 ·
        // lse / N · softmax, straight onto the logits.
        const float z = z_coeff_ > 0 ? loss_scale * float(z_coeff_) * 2.0f * s.lse[std::size_t(n)] /
                                           float(shape_.tokens)
                                     : 0.0f;
        for (std::int64_t e = 0; e < E; ++e)
            s.d_logits[std::size_t(n * E + e)] = pr[e] * (d_prob[std::size_t(e)] - dot + z);
    }
    Vec().swap(s.lse);
    k::matmul_backward_input(d_ln2.data(), s.d_logits.data(), p(lp.router_w), shape_.tokens,
                             shape_.hidden, E);
    Vec().swap(s.probs);
    Vec().swap(s.slot_out);
}

} // namespace trident::executor
