// The mixture-of-experts MLP of a GptChunk layer: top-k routing with the load-balancing and
// z-losses, token dispatch and combine over the expert group by all-to-all(v), capacity
// dropping, and this rank's experts (forward and backward) — under expert tensor parallelism
// with the received rows all-gathered over the expert-tensor group and the experts' partial
// outputs (and input gradients) reduce-scattered back, as Megatron-Core's all-to-all
// dispatcher does (allgather: gpt_chunk_moe_gather.cpp; flex: gpt_chunk_moe_flex.cpp). Under
// sequence parallelism each tensor rank routes its own rows. Each
// token's routing weight travels with it and scales its activation inside the expert, before
// fc2 (Megatron-Core's weighted_bias_swiglu), so the combine is a plain sum and no expert
// output is kept for the weights' gradient.
#include "moe_rows.h"
#include "trident/executor/gpt_chunk.h"
#include "trident/kernels/cpu.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace trident::executor {

namespace k = kernels::cpu;
using namespace moe_rows;

namespace {

// Group-limited routing (DeepSeek-V3's node-limited routing; Megatron-Core's
// --moe-router-num-groups / --moe-router-group-topk): the E experts form `groups` contiguous
// groups, each scored by the sum of its top k / group_topk probabilities; the token's experts
// come from the best `group_topk` groups only (ties to the lower index). Returns the experts a
// token may take, in index order.
std::vector<std::int32_t> routable_experts(const float* probs, std::int64_t E, std::int64_t K,
                                           std::int64_t groups, std::int64_t group_topk) {
    std::vector<std::int32_t> all(static_cast<std::size_t>(E));
    std::iota(all.begin(), all.end(), 0);
    if (groups <= 0) return all;
    const std::int64_t size = E / groups, best = std::min(size, K / group_topk);
    std::vector<float> score(static_cast<std::size_t>(groups));
    for (std::int64_t g = 0; g < groups; ++g) {
        std::vector<float> members(probs + g * size, probs + (g + 1) * size);
        std::partial_sort(members.begin(), members.begin() + best, members.end(),
                          std::greater<float>());
        score[std::size_t(g)] = std::accumulate(members.begin(), members.begin() + best, 0.0f);
    }
    std::vector<std::int32_t> order(static_cast<std::size_t>(groups));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + group_topk, order.end(),
                      [&](std::int32_t a, std::int32_t b) {
                          return score[std::size_t(a)] > score[std::size_t(b)] ||
                                 (score[std::size_t(a)] == score[std::size_t(b)] && a < b);
                      });
    std::sort(order.begin(), order.begin() + group_topk);
    std::vector<std::int32_t> out;
    for (std::int64_t i = 0; i < group_topk; ++i)
        for (std::int64_t e = 0; e < size; ++e)
            out.push_back(std::int32_t(order[std::size_t(i)] * size + e));
    return out;
}

} // namespace

void GptChunk::moe_route(const LayerParams& lp, Layer& L, Communicator& tp) const {
    const std::int64_t E = experts_, K = top_k_, N = shape_.rows;
    MoeState& s = L.moe;
    // Router: softmax over all experts, the top k per token, gates renormalised over them.
    Vec logits(static_cast<std::size_t>(N * E));
    k::matmul_forward(logits.data(), routed_input(L).data(), p(lp.router_w), nullptr, N,
                      shape_.hidden, E);
    s.probs.resize(logits.size());
    s.topk.resize(std::size_t(N * K));
    s.gates.resize(std::size_t(N * K));
    // Per expert: routed slots and summed probabilities, then the lse² sum — over the whole
    // micro-batch: under sequence parallelism summed over the tensor group (Megatron-Core
    // reduces the load-balancing statistics over the sequence's ranks).
    Vec totals(static_cast<std::size_t>(2 * E + 1), 0.0f);
    if (z_coeff_ > 0) s.lse.resize(std::size_t(N));
    for (std::int64_t n = 0; n < N; ++n) {
        const float* l = logits.data() + n * E;
        float* pr = s.probs.data() + n * E;
        float max = -INFINITY, sum = 0.0f;
        for (std::int64_t e = 0; e < E; ++e) max = std::fmax(max, l[e]);
        for (std::int64_t e = 0; e < E; ++e) sum += (pr[e] = std::exp(l[e] - max));
        for (std::int64_t e = 0; e < E; ++e) pr[e] /= sum;
        if (z_coeff_ > 0) {
            s.lse[std::size_t(n)] = max + std::log(sum);
            totals[std::size_t(2 * E)] += s.lse[std::size_t(n)] * s.lse[std::size_t(n)];
        }
        std::vector<std::int32_t> order = routable_experts(pr, E, K, router_groups_, group_topk_);
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
            totals[std::size_t(e)] += 1.0f;
        }
        for (std::int64_t e = 0; e < E; ++e) totals[std::size_t(E + e)] += pr[e];
    }
    if (N != shape_.tokens) tp.all_reduce_sum(totals.data(), totals.size());
    // The router losses' value: Fedus et al. 2021's coeff · E · Σ_e f_e · P_e (f_e the share
    // of routed slots, P_e the mean probability of expert e) and ST-MoE's z-loss, coeff · mean
    // over tokens of lse².
    const double tokens = double(shape_.tokens);
    s.load.assign(std::size_t(E), 0.0f);
    double balance = 0.0;
    for (std::int64_t e = 0; e < E; ++e) {
        s.load[std::size_t(e)] = totals[std::size_t(e)] / float(tokens * double(K));
        balance += double(s.load[std::size_t(e)]) * double(totals[std::size_t(E + e)]) / tokens;
    }
    s.router_loss =
        aux_coeff_ * double(E) * balance + z_coeff_ * double(totals[std::size_t(2 * E)]) / tokens;
}

void GptChunk::count_routed_slots(const MoeState& s) const {
    // s.load is each expert's share of the micro-batch's tokens · top_k slots.
    const double slots = double(shape_.tokens) * double(top_k_);
    routed_slots_.resize(std::size_t(experts_), 0.0);
    for (std::size_t e = 0; e < routed_slots_.size(); ++e)
        routed_slots_[e] += std::round(double(s.load[e]) * slots);
    std::vector<double> mine(static_cast<std::size_t>(experts_), 0.0);
    for (const std::int32_t e : s.topk) mine[std::size_t(e)] += 1.0;
    routed_passes_.push_back(std::move(mine));
    if (routed_passes_.size() > kRoutedPasses) routed_passes_.pop_front();
}

Vec GptChunk::moe_dispatch(Layer& L, const ChunkComms& comms) const {
    Communicator& ep = comms.expert;
    const std::int64_t E = experts_, K = top_k_, R = ep.size(), El = shape_.local_experts,
                       N = shape_.rows, h = shape_.hidden;
    MoeState& s = L.moe;
    std::vector<std::int64_t> taken(static_cast<std::size_t>(E), 0);
    const std::int64_t capacity = expert_capacity(N);
    // Each slot's token goes to the rank holding its expert; the counts first, then the rows
    // (each with its expert, local to the receiver) by a variable-size all-to-all.
    s.sent.assign(std::size_t(R), 0);
    s.slot_rank.assign(std::size_t(N * K), -1);
    s.slot_row.assign(std::size_t(N * K), -1);
    for (std::int64_t slot = 0; slot < N * K; ++slot) {
        if (taken[std::size_t(s.topk[std::size_t(slot)])]++ >= capacity) continue; // dropped
        const std::int32_t r = std::int32_t(s.topk[std::size_t(slot)] / El);
        s.slot_rank[std::size_t(slot)] = r;
        s.slot_row[std::size_t(slot)] = std::int32_t(s.sent[std::size_t(r)]++);
    }
    // Padded to capacity (Megatron's --moe-pad-expert-input-to-capacity): each expert's rows
    // made up to exactly `capacity` by zero rows of routing weight 0 after the routed ones.
    struct Padding {
        std::int32_t rank;
        std::int64_t row;   // among the rows sent there
        std::int32_t local; // its expert, local to that rank
    };
    std::vector<Padding> padding;
    if (pad_to_capacity_)
        for (std::int64_t e = 0; e < E; ++e)
            for (std::int64_t n = std::min(taken[std::size_t(e)], capacity); n < capacity; ++n) {
                const auto r = std::int32_t(e / El);
                padding.push_back({r, s.sent[std::size_t(r)]++, std::int32_t(e % El)});
            }
    s.received = exchange_counts(s.sent, ep);
    const std::vector<std::int64_t> send_at = row_offsets(s.sent);
    const std::int64_t row = shape_.hidden + 2; // the token, its expert, its routing weight
    Vec out_buf(static_cast<std::size_t>(total_rows(s.sent) * row)),
        in_buf(static_cast<std::size_t>(total_rows(s.received) * row));
    const Vec& in = routed_input(L);
    for (std::int64_t slot = 0; slot < N * K; ++slot) {
        if (s.slot_rank[std::size_t(slot)] < 0) continue;
        float* dst = out_buf.data() + slot_offset(s, send_at, slot, row);
        std::copy_n(in.data() + (slot / K) * shape_.hidden, shape_.hidden, dst);
        dst[shape_.hidden] = float(s.topk[std::size_t(slot)] % El);
        dst[shape_.hidden + 1] = s.gates[std::size_t(slot)];
    }
    for (const Padding& pad : padding) {
        float* dst = out_buf.data() + (send_at[std::size_t(pad.rank)] + pad.row) * row;
        std::fill_n(dst, row, 0.0f);
        dst[shape_.hidden] = float(pad.local);
    }
    ep.all_to_allv(out_buf.data(), element_counts(s.sent, row), in_buf.data(),
                   element_counts(s.received, row));
    return rows_of_expert_tensor_group(std::move(in_buf), h + 2, comms.expert_tensor, s.etp_rows);
}

void GptChunk::moe_forward(const LayerParams& lp, Layer& L, Vec& y, const ChunkComms& comms) const {
    MoeState& s = L.moe;
    s = MoeState{};
    moe_route(lp, L, comms.tensor);
    using D = core::TokenDispatcher;
    const Vec rows = dispatcher_ == D::allgather ? moe_gather_dispatch(L, comms)
                     : dispatcher_ == D::flex    ? moe_flex_dispatch(L, comms)
                                                 : moe_dispatch(L, comms);
    Vec out = moe_experts_forward(lp, s, rows);
    if (dispatcher_ == D::allgather)
        moe_gather_combine(L, out, y, comms);
    else if (dispatcher_ == D::flex)
        moe_flex_combine(L, std::move(out), y, comms);
    else
        moe_combine(L, std::move(out), y, comms);
}

// The experts over the dispatched rows (each h + 2 wide: the token, its local expert, its
// routing weight), in the order they came: per row its expert's weighted output.
Vec GptChunk::moe_experts_forward(const LayerParams& lp, MoeState& s, const Vec& rows) const {
    const std::int64_t El = shape_.local_experts, h = shape_.hidden, F = shape_.local_expert_ffn,
                       gate = swiglu_ ? 2 : 1;
    const std::int64_t all_rows = std::int64_t(rows.size()) / (h + 2);
    s.x.assign(std::size_t(El), Vec{});
    s.gate.assign(std::size_t(El), Vec{});
    s.recv_expert.assign(std::size_t(all_rows), -1);
    s.recv_pos.assign(std::size_t(all_rows), -1);
    for (std::int64_t r = 0; r < all_rows; ++r) {
        const float* src = rows.data() + r * (h + 2);
        const std::int32_t e = std::int32_t(src[h]);
        s.recv_expert[std::size_t(r)] = e;
        s.recv_pos[std::size_t(r)] = std::int32_t(s.x[std::size_t(e)].size() / std::size_t(h));
        s.x[std::size_t(e)].insert(s.x[std::size_t(e)].end(), src, src + h);
        s.gate[std::size_t(e)].push_back(src[h + 1]);
    }
    s.fc.assign(std::size_t(El), Vec{});
    s.act.assign(std::size_t(El), Vec{});
    std::vector<Vec> expert_out(static_cast<std::size_t>(El));
    for (std::int64_t e = 0; e < El; ++e) {
        const std::int64_t n = std::int64_t(s.x[std::size_t(e)].size()) / h;
        if (n == 0) continue;
        const ExpertParams& x = lp.experts[std::size_t(e)];
        Vec& fc = s.fc[std::size_t(e)];
        Vec& act = s.act[std::size_t(e)];
        fc.resize(std::size_t(n * gate * F));
        gemm_forward(lp, Linear::fc1, std::int32_t(e), fc.data(), s.x[std::size_t(e)].data(),
                     p(x.fc_w), bias_ ? p(x.fc_b) : nullptr, n, h, gate * F);
        act.resize(std::size_t(n * F));
        if (swiglu_)
            k::swiglu_forward(act.data(), fc.data(), n, F);
        else
            k::gelu_forward(act.data(), fc.data(), n * F);
        const Vec weighted = weighted_activation(s, e);
        expert_out[std::size_t(e)].resize(std::size_t(n * h));
        gemm_forward(lp, Linear::fc2, std::int32_t(e), expert_out[std::size_t(e)].data(),
                     weighted.data(), p(x.fc2_w),
                     // Added once: the expert-tensor ranks' partial outputs are summed later.
                     bias_ && shape_.etp_rank == 0 ? p(x.fc2_b) : nullptr, n, F, h);
    }
    Vec out(static_cast<std::size_t>(all_rows * h));
    for (std::int64_t r = 0; r < all_rows; ++r)
        std::copy_n(expert_out[std::size_t(s.recv_expert[std::size_t(r)])].data() +
                        s.recv_pos[std::size_t(r)] * h,
                    h, out.data() + r * h);
    return out;
}

// Combine: outputs (summed over the expert-tensor group) return the way the tokens came; each
// token sums its k outputs, already weighted.
void GptChunk::moe_combine(Layer& L, Vec out, Vec& y, const ChunkComms& comms) const {
    const std::int64_t K = top_k_, N = shape_.rows, h = shape_.hidden;
    MoeState& s = L.moe;
    out = own_rows_summed(std::move(out), s.etp_rows, h, comms.expert_tensor);
    Vec back(static_cast<std::size_t>(total_rows(s.sent) * h));
    comms.expert.all_to_allv(out.data(), element_counts(s.received, h), back.data(),
                             element_counts(s.sent, h));
    const std::vector<std::int64_t> send_at = row_offsets(s.sent);
    y.assign(std::size_t(N * h), 0.0f);
    for (std::int64_t slot = 0; slot < N * K; ++slot) {
        if (s.slot_rank[std::size_t(slot)] < 0) continue;
        const float* o = back.data() + slot_offset(s, send_at, slot, h);
        for (std::int64_t c = 0; c < h; ++c) y[std::size_t((slot / K) * h + c)] += o[c];
    }
}

Vec GptChunk::weighted_activation(const MoeState& s, std::int64_t e) const {
    const auto F = std::size_t(shape_.local_expert_ffn);
    const Vec& act = s.act[std::size_t(e)];
    const Vec& gate = s.gate[std::size_t(e)];
    Vec w(act.size());
    for (std::size_t r = 0; r < gate.size(); ++r)
        for (std::size_t f = 0; f < F; ++f) w[r * F + f] = gate[r] * act[r * F + f];
    return w;
}

void GptChunk::moe_backward(const LayerParams& lp, Layer& L, const Vec& dy, Vec& d_in,
                            float loss_scale, const ChunkComms& comms) const {
    MoeState& s = L.moe;
    using D = core::TokenDispatcher;
    const Vec at_experts = dispatcher_ == D::allgather ? moe_gather_gradients(L, dy, comms)
                           : dispatcher_ == D::flex    ? moe_flex_gradients(L, dy, comms)
                                                       : moe_send_gradients(L, dy, comms);
    Vec ret = moe_experts_backward(lp, s, at_experts);
    Vec d_gate(static_cast<std::size_t>(shape_.rows * top_k_), 0.0f); // dropped: nothing
    if (dispatcher_ == D::allgather)
        moe_gather_return(L, ret, d_in, d_gate, comms);
    else if (dispatcher_ == D::flex)
        moe_flex_return(L, std::move(ret), d_in, d_gate, comms);
    else
        moe_return_gradients(L, std::move(ret), d_in, d_gate, comms);
    moe_router_backward(lp, L, d_gate, d_in, loss_scale);
}

// Each slot's output gradient is its token's (the combine is a sum), sent to the experts and
// gathered over the expert-tensor group: one row per expert row, in their order.
Vec GptChunk::moe_send_gradients(Layer& L, const Vec& dy, const ChunkComms& comms) const {
    const std::int64_t K = top_k_, N = shape_.rows, h = shape_.hidden;
    MoeState& s = L.moe;
    const std::vector<std::int64_t> send_at = row_offsets(s.sent);
    Vec to_experts(static_cast<std::size_t>(total_rows(s.sent) * h)),
        at_experts(static_cast<std::size_t>(total_rows(s.received) * h));
    if (pad_to_capacity_) std::fill(to_experts.begin(), to_experts.end(), 0.0f); // padding rows
    for (std::int64_t slot = 0; slot < N * K; ++slot) {
        if (s.slot_rank[std::size_t(slot)] < 0) continue;
        std::copy_n(dy.data() + (slot / K) * h, h,
                    to_experts.data() + slot_offset(s, send_at, slot, h));
    }
    comms.expert.all_to_allv(to_experts.data(), element_counts(s.sent, h), at_experts.data(),
                             element_counts(s.received, h));
    std::vector<std::int64_t> counts;
    return rows_of_expert_tensor_group(std::move(at_experts), h, comms.expert_tensor, counts);
}

// The experts' backward over their rows: per row the input gradient and the routing weight's
// (partial over the expert-tensor group: fc1 is column-parallel, and the weight's sum runs over
// this rank's columns), h + 1 wide, in the rows' order.
Vec GptChunk::moe_experts_backward(const LayerParams& lp, MoeState& s,
                                   const Vec& at_experts) const {
    const std::int64_t El = shape_.local_experts, h = shape_.hidden, F = shape_.local_expert_ffn,
                       gate = swiglu_ ? 2 : 1;
    const std::int64_t all_rows = std::int64_t(s.recv_expert.size());
    s.d_out.assign(std::size_t(El), Vec{});
    s.d_fc.assign(std::size_t(El), Vec{});
    for (std::int64_t e = 0; e < El; ++e)
        s.d_out[std::size_t(e)].resize(s.x[std::size_t(e)].size());
    for (std::int64_t r = 0; r < all_rows; ++r)
        std::copy_n(at_experts.data() + r * h, h,
                    s.d_out[std::size_t(s.recv_expert[std::size_t(r)])].data() +
                        s.recv_pos[std::size_t(r)] * h);
    std::vector<Vec> d_x(static_cast<std::size_t>(El)), d_gates(static_cast<std::size_t>(El));
    for (std::int64_t e = 0; e < El; ++e) {
        const std::int64_t n = std::int64_t(s.x[std::size_t(e)].size()) / h;
        if (n == 0) continue;
        const ExpertParams& x = lp.experts[std::size_t(e)];
        Vec d_act(static_cast<std::size_t>(n * F), 0.0f);
        gemm_input_gradient(lp, Linear::fc2, std::int32_t(e), d_act.data(),
                            s.d_out[std::size_t(e)].data(), p(x.fc2_w), n, F, h);
        // fc2 read gate · act: the weight's gradient is Σ d ∘ act, the activation's gate · d.
        Vec& d_g = d_gates[std::size_t(e)];
        d_g.resize(std::size_t(n));
        k::gated_rows_backward(d_g.data(), d_act.data(), s.act[std::size_t(e)].data(),
                               s.gate[std::size_t(e)].data(), n, F);
        Vec& d_fc = s.d_fc[std::size_t(e)];
        d_fc.assign(std::size_t(n * gate * F), 0.0f);
        if (swiglu_)
            k::swiglu_backward(d_fc.data(), s.fc[std::size_t(e)].data(), d_act.data(), n, F);
        else
            k::gelu_backward(d_fc.data(), s.fc[std::size_t(e)].data(), d_act.data(), n * F);
        d_x[std::size_t(e)].assign(std::size_t(n * h), 0.0f);
        gemm_input_gradient(lp, Linear::fc1, std::int32_t(e), d_x[std::size_t(e)].data(),
                            d_fc.data(), p(x.fc_w), n, h, gate * F);
        Vec().swap(s.fc[std::size_t(e)]);
    }
    const std::int64_t row = h + 1;
    Vec ret(static_cast<std::size_t>(all_rows * row));
    for (std::int64_t r = 0; r < all_rows; ++r) {
        const auto e = std::size_t(s.recv_expert[std::size_t(r)]);
        const auto at = std::size_t(s.recv_pos[std::size_t(r)]);
        std::copy_n(d_x[e].data() + at * std::size_t(h), h, ret.data() + r * row);
        ret[std::size_t(r * row + h)] = d_gates[e][at];
    }
    return ret;
}

// The experts' gradients are summed back to the rows' receivers, return to the tokens' ranks
// and add up per token.
void GptChunk::moe_return_gradients(Layer& L, Vec ret, Vec& d_in, Vec& d_gate,
                                    const ChunkComms& comms) const {
    const std::int64_t K = top_k_, N = shape_.rows, h = shape_.hidden, row = h + 1;
    MoeState& s = L.moe;
    ret = own_rows_summed(std::move(ret), s.etp_rows, row, comms.expert_tensor);
    Vec back(static_cast<std::size_t>(total_rows(s.sent) * row));
    comms.expert.all_to_allv(ret.data(), element_counts(s.received, row), back.data(),
                             element_counts(s.sent, row));
    const std::vector<std::int64_t> send_at = row_offsets(s.sent);
    for (std::int64_t slot = 0; slot < N * K; ++slot) {
        if (s.slot_rank[std::size_t(slot)] < 0) continue;
        const float* d = back.data() + slot_offset(s, send_at, slot, row);
        for (std::int64_t c = 0; c < h; ++c) d_in[std::size_t((slot / K) * h + c)] += d[c];
        d_gate[std::size_t(slot)] = d[h];
    }
}

void GptChunk::moe_router_backward(const LayerParams& lp, Layer& L, const Vec& d_gate, Vec& d_in,
                                   float loss_scale) const {
    const std::int64_t E = experts_, K = top_k_, N = shape_.rows;
    const float tokens = float(shape_.tokens); // the micro-batch's, over the tensor group
    MoeState& s = L.moe;
    // Through the renormalised gates, the load-balancing loss (Fedus et al. 2021: coeff · E ·
    // Σ f_e · P_e, f_e held constant) and the softmax.
    s.d_logits.assign(std::size_t(N * E), 0.0f);
    Vec d_prob(static_cast<std::size_t>(E));
    for (std::int64_t n = 0; n < N; ++n) {
        const float* pr = s.probs.data() + n * E;
        float chosen = 0.0f, weighted = 0.0f;
        for (std::int64_t j = 0; j < K; ++j) {
            chosen += pr[s.topk[std::size_t(n * K + j)]];
            weighted += d_gate[std::size_t(n * K + j)] * s.gates[std::size_t(n * K + j)];
        }
        for (std::int64_t e = 0; e < E; ++e)
            d_prob[std::size_t(e)] =
                loss_scale * float(aux_coeff_) * float(E) * s.load[std::size_t(e)] / tokens;
        for (std::int64_t j = 0; j < K; ++j)
            d_prob[std::size_t(s.topk[std::size_t(n * K + j)])] +=
                (d_gate[std::size_t(n * K + j)] - weighted) / chosen;
        float dot = 0.0f;
        for (std::int64_t e = 0; e < E; ++e) dot += pr[e] * d_prob[std::size_t(e)];
        // The z-loss (Zoph et al. 2022, ST-MoE): d(coeff · mean lse²)/d logit = coeff · 2 ·
        // lse / N · softmax, straight onto the logits.
        const float z = z_coeff_ > 0
                            ? loss_scale * float(z_coeff_) * 2.0f * s.lse[std::size_t(n)] / tokens
                            : 0.0f;
        for (std::int64_t e = 0; e < E; ++e)
            s.d_logits[std::size_t(n * E + e)] = pr[e] * (d_prob[std::size_t(e)] - dot + z);
    }
    Vec().swap(s.lse);
    k::matmul_backward_input(d_in.data(), s.d_logits.data(), p(lp.router_w), N, shape_.hidden, E);
    Vec().swap(s.probs);
}

} // namespace trident::executor
