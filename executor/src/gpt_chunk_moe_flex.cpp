// The flex token dispatcher (--moe-token-dispatcher-type flex; Megatron-Core's
// MoEFlexTokenDispatcher over DeepEP): a token goes to each expert rank it is routed to once,
// however many of its top-k experts that rank holds, carrying its (local expert, routing
// weight) pairs; the rank fans it out to those experts, and sums their weighted outputs before
// the one row goes back. The all-to-all dispatcher sends a copy per expert instead, so flex
// moves tokens · destinations rows where that moves tokens · k (the simulator's
// MoeSpec::expected_destinations). On the CPU the exchange is the same all-to-all-v with
// fewer, wider rows; DeepEP's fused kernels and its NVLink/RDMA legs are the GPU's.
//
// Wire rows: dispatch h + 2k wide (the token, then k pairs, unused pairs with expert −1);
// combine h; output gradients h; returned gradients h + k (the summed input gradient and each
// pair's routing-weight gradient). The experts see the same h + 2 rows as with all-to-all.
#include "moe_rows.h"
#include "trident/executor/gpt_chunk.h"

#include <algorithm>

namespace trident::executor {

using namespace moe_rows;

Vec GptChunk::moe_flex_dispatch(Layer& L, const ChunkComms& comms) const {
    Communicator& ep = comms.expert;
    const std::int64_t E = experts_, K = top_k_, R = ep.size(), El = shape_.local_experts,
                       N = shape_.rows, h = shape_.hidden, width = h + 2 * K;
    MoeState& s = L.moe;
    std::vector<std::int64_t> taken(static_cast<std::size_t>(E), 0);
    const std::int64_t capacity = expert_capacity(N);
    // Each token's row to a rank is made by its first slot there; later slots add pairs.
    s.sent.assign(std::size_t(R), 0);
    s.slot_rank.assign(std::size_t(N * K), -1);
    s.slot_row.assign(std::size_t(N * K), -1);
    s.slot_pair.assign(std::size_t(N * K), -1);
    std::vector<std::int32_t> row_there(static_cast<std::size_t>(R)),
        pairs_there(static_cast<std::size_t>(R));
    for (std::int64_t n = 0; n < N; ++n) {
        std::fill(row_there.begin(), row_there.end(), -1);
        std::fill(pairs_there.begin(), pairs_there.end(), 0);
        for (std::int64_t slot = n * K; slot < (n + 1) * K; ++slot) {
            if (taken[std::size_t(s.topk[std::size_t(slot)])]++ >= capacity) continue; // dropped
            const auto r = std::size_t(s.topk[std::size_t(slot)] / El);
            if (row_there[r] < 0) row_there[r] = std::int32_t(s.sent[r]++);
            s.slot_rank[std::size_t(slot)] = std::int32_t(r);
            s.slot_row[std::size_t(slot)] = row_there[r];
            s.slot_pair[std::size_t(slot)] = pairs_there[r]++;
        }
    }
    // Capacity padding: a zero row with one pair of routing weight 0 per missing row.
    std::vector<std::pair<std::int32_t, std::int32_t>> padding; // (rank, local expert)
    if (pad_to_capacity_)
        for (std::int64_t e = 0; e < E; ++e)
            for (std::int64_t n = std::min(taken[std::size_t(e)], capacity); n < capacity; ++n)
                padding.push_back({std::int32_t(e / El), std::int32_t(e % El)});
    std::vector<std::int64_t> routed_rows = s.sent;
    for (const auto& pad : padding) ++s.sent[std::size_t(pad.first)];
    s.received = exchange_counts(s.sent, ep);

    const std::vector<std::int64_t> send_at = row_offsets(s.sent);
    Vec out_buf(static_cast<std::size_t>(total_rows(s.sent) * width), 0.0f);
    for (std::int64_t i = 0; i < total_rows(s.sent); ++i)
        for (std::int64_t j = 0; j < K; ++j) out_buf[std::size_t(i * width + h + 2 * j)] = -1.0f;
    const Vec& in = routed_input(L);
    for (std::int64_t slot = 0; slot < N * K; ++slot) {
        const std::int32_t r = s.slot_rank[std::size_t(slot)];
        if (r < 0) continue;
        float* dst = out_buf.data() + slot_offset(s, send_at, slot, width);
        if (s.slot_pair[std::size_t(slot)] == 0) std::copy_n(in.data() + (slot / K) * h, h, dst);
        float* pair = dst + h + 2 * s.slot_pair[std::size_t(slot)];
        pair[0] = float(s.topk[std::size_t(slot)] % El);
        pair[1] = s.gates[std::size_t(slot)];
    }
    for (const auto& [rank, local] : padding) {
        float* dst = out_buf.data() +
                     (send_at[std::size_t(rank)] + routed_rows[std::size_t(rank)]++) * width;
        dst[h] = float(local); // the hidden zeros and the weight 0 are there already
    }
    Vec in_buf(static_cast<std::size_t>(total_rows(s.received) * width));
    ep.all_to_allv(out_buf.data(), element_counts(s.sent, width), in_buf.data(),
                   element_counts(s.received, width));
    // Fanned out: one h + 2 row per pair, in the received rows' and their pairs' order.
    s.row_token.clear();
    s.row_pair.clear();
    Vec rows;
    for (std::int64_t t = 0; t < total_rows(s.received); ++t) {
        const float* src = in_buf.data() + t * width;
        for (std::int64_t j = 0; j < K; ++j) {
            if (src[h + 2 * j] < 0.0f) continue;
            rows.insert(rows.end(), src, src + h);
            rows.push_back(src[h + 2 * j]);
            rows.push_back(src[h + 2 * j + 1]);
            s.row_token.push_back(t);
            s.row_pair.push_back(std::int32_t(j));
        }
    }
    return rows_of_expert_tensor_group(std::move(rows), h + 2, comms.expert_tensor, s.etp_rows);
}

void GptChunk::moe_flex_combine(Layer& L, Vec out, Vec& y, const ChunkComms& comms) const {
    const std::int64_t K = top_k_, N = shape_.rows, h = shape_.hidden;
    MoeState& s = L.moe;
    out = own_rows_summed(std::move(out), s.etp_rows, h, comms.expert_tensor);
    // A token's outputs on this rank summed (they are weighted already), then one row back.
    Vec summed(static_cast<std::size_t>(total_rows(s.received) * h), 0.0f);
    for (std::size_t x = 0; x < s.row_token.size(); ++x)
        for (std::int64_t c = 0; c < h; ++c)
            summed[std::size_t(s.row_token[x] * h + c)] += out[x * std::size_t(h) + std::size_t(c)];
    Vec back(static_cast<std::size_t>(total_rows(s.sent) * h));
    comms.expert.all_to_allv(summed.data(), element_counts(s.received, h), back.data(),
                             element_counts(s.sent, h));
    const std::vector<std::int64_t> send_at = row_offsets(s.sent);
    y.assign(std::size_t(N * h), 0.0f);
    for (std::int64_t slot = 0; slot < N * K; ++slot) {
        if (s.slot_pair[std::size_t(slot)] != 0) continue; // dropped, or not its row's first
        const float* o = back.data() + slot_offset(s, send_at, slot, h);
        for (std::int64_t c = 0; c < h; ++c) y[std::size_t((slot / K) * h + c)] += o[c];
    }
}

Vec GptChunk::moe_flex_gradients(Layer& L, const Vec& dy, const ChunkComms& comms) const {
    const std::int64_t K = top_k_, N = shape_.rows, h = shape_.hidden;
    MoeState& s = L.moe;
    const std::vector<std::int64_t> send_at = row_offsets(s.sent);
    // A token's output gradient once per rank (padding rows: zeros), fanned out to its pairs.
    Vec to_experts(static_cast<std::size_t>(total_rows(s.sent) * h), 0.0f),
        at_tokens(static_cast<std::size_t>(total_rows(s.received) * h));
    for (std::int64_t slot = 0; slot < N * K; ++slot) {
        if (s.slot_pair[std::size_t(slot)] != 0) continue;
        std::copy_n(dy.data() + (slot / K) * h, h,
                    to_experts.data() + slot_offset(s, send_at, slot, h));
    }
    comms.expert.all_to_allv(to_experts.data(), element_counts(s.sent, h), at_tokens.data(),
                             element_counts(s.received, h));
    Vec at_experts(s.row_token.size() * std::size_t(h));
    for (std::size_t x = 0; x < s.row_token.size(); ++x)
        std::copy_n(at_tokens.data() + s.row_token[x] * h, h,
                    at_experts.data() + x * std::size_t(h));
    std::vector<std::int64_t> counts;
    return rows_of_expert_tensor_group(std::move(at_experts), h, comms.expert_tensor, counts);
}

void GptChunk::moe_flex_return(Layer& L, Vec ret, Vec& d_in, Vec& d_gate,
                               const ChunkComms& comms) const {
    const std::int64_t K = top_k_, N = shape_.rows, h = shape_.hidden, width = h + K;
    MoeState& s = L.moe;
    ret = own_rows_summed(std::move(ret), s.etp_rows, h + 1, comms.expert_tensor);
    // Per received token: its pairs' input gradients summed, each pair's weight gradient.
    Vec summed(static_cast<std::size_t>(total_rows(s.received) * width), 0.0f);
    for (std::size_t x = 0; x < s.row_token.size(); ++x) {
        const float* d = ret.data() + x * std::size_t(h + 1);
        float* t = summed.data() + s.row_token[x] * width;
        for (std::int64_t c = 0; c < h; ++c) t[c] += d[c];
        t[h + s.row_pair[x]] = d[h];
    }
    Vec back(static_cast<std::size_t>(total_rows(s.sent) * width));
    comms.expert.all_to_allv(summed.data(), element_counts(s.received, width), back.data(),
                             element_counts(s.sent, width));
    const std::vector<std::int64_t> send_at = row_offsets(s.sent);
    for (std::int64_t slot = 0; slot < N * K; ++slot) {
        if (s.slot_rank[std::size_t(slot)] < 0) continue;
        const float* d = back.data() + slot_offset(s, send_at, slot, width);
        if (s.slot_pair[std::size_t(slot)] == 0)
            for (std::int64_t c = 0; c < h; ++c) d_in[std::size_t((slot / K) * h + c)] += d[c];
        d_gate[std::size_t(slot)] = d[h + s.slot_pair[std::size_t(slot)]];
    }
}

} // namespace trident::executor
