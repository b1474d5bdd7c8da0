// The allgather token dispatcher (Megatron-Core's MoEAllGatherTokenDispatcher,
// `--moe-token-dispatcher-type allgather`): every rank of the etp·ep group gathers all of the
// group's tokens with their routing — each token's top-k experts and weights — keeps the copies
// bound for its own experts, and after the experts the group reduce-scatters the outputs, so
// each rank gets the sum of its own tokens' k outputs (the expert-tensor ranks' partial
// outputs summed in the same collective). The backward gathers the output gradients and
// reduce-scatters the input and routing-weight gradients the same way. The experts and the
// router are the all-to-all dispatcher's (gpt_chunk_moe.cpp); only the exchanges differ, so
// both train the same numbers up to the order of the sums. Padding to capacity pads each local
// expert per source rank, as the all-to-all dispatcher's senders do.
#include "moe_rows.h"
#include "trident/executor/gpt_chunk.h"

#include <algorithm>
#include <cmath>

namespace trident::executor {

using namespace moe_rows;

namespace {
constexpr std::int64_t kPaddingSlot = -1; // a row padding an expert to its capacity
} // namespace

Vec GptChunk::moe_gather_dispatch(Layer& L, const ChunkComms& comms) const {
    const std::int64_t E = experts_, K = top_k_, El = shape_.local_experts, N = shape_.rows,
                       h = shape_.hidden, width = h + 2 * K;
    MoeState& s = L.moe;
    const Vec& in = routed_input(L);
    Vec mine(static_cast<std::size_t>(N * width));
    for (std::int64_t n = 0; n < N; ++n) {
        float* row = mine.data() + n * width;
        std::copy_n(in.data() + n * h, h, row);
        for (std::int64_t j = 0; j < K; ++j) {
            row[h + j] = float(s.topk[std::size_t(n * K + j)]);
            row[h + K + j] = s.gates[std::size_t(n * K + j)];
        }
    }
    const Vec all = gather_row_blocks(mine, width, comms.tensor_expert, s.gathered_rows);
    // This rank's experts, and a capacity factor applied as the all-to-all dispatcher applies
    // it: per source rank, an expert takes at most ⌈cf · N·k / E⌉ of its slots in token order.
    const std::int64_t first = std::int64_t(comms.expert.rank()) * El;
    std::vector<std::int64_t> taken(static_cast<std::size_t>(E));
    Vec rows;
    rows.reserve(std::size_t(total_rows(s.gathered_rows) * K / comms.expert.size() * (h + 2)));
    s.local_slots.clear();
    std::int64_t token = 0;
    for (const std::int64_t block : s.gathered_rows) {
        std::fill(taken.begin(), taken.end(), 0);
        const std::int64_t capacity = expert_capacity(block);
        for (std::int64_t t = 0; t < block; ++t, ++token) {
            const float* src = all.data() + token * width;
            for (std::int64_t j = 0; j < K; ++j) {
                const auto e = std::int64_t(src[h + j]);
                if (taken[std::size_t(e)]++ >= capacity || e < first || e >= first + El)
                    continue; // dropped, or another rank's expert
                s.local_slots.push_back(token * K + j);
                rows.insert(rows.end(), src, src + h);
                rows.push_back(float(e - first));
                rows.push_back(src[h + K + j]);
            }
        }
        if (!pad_to_capacity_) continue;
        for (std::int64_t e = first; e < first + El; ++e) // zero rows of routing weight 0
            for (std::int64_t n = std::min(taken[std::size_t(e)], capacity); n < capacity; ++n) {
                s.local_slots.push_back(kPaddingSlot);
                rows.insert(rows.end(), std::size_t(h), 0.0f);
                rows.push_back(float(e - first));
                rows.push_back(0.0f);
            }
    }
    return rows;
}

void GptChunk::moe_gather_combine(Layer& L, const Vec& out, Vec& y, const ChunkComms& comms) const {
    const std::int64_t K = top_k_, h = shape_.hidden;
    MoeState& s = L.moe;
    Vec sums(static_cast<std::size_t>(total_rows(s.gathered_rows) * h), 0.0f);
    for (std::size_t r = 0; r < s.local_slots.size(); ++r) {
        if (s.local_slots[r] == kPaddingSlot) continue;
        float* to = sums.data() + (s.local_slots[r] / K) * h;
        const float* o = out.data() + std::int64_t(r) * h;
        for (std::int64_t c = 0; c < h; ++c) to[c] += o[c];
    }
    y = reduce_scatter_row_blocks(sums, s.gathered_rows, h, comms.tensor_expert);
}

Vec GptChunk::moe_gather_gradients(Layer& L, const Vec& dy, const ChunkComms& comms) const {
    const std::int64_t K = top_k_, h = shape_.hidden;
    const MoeState& s = L.moe;
    std::vector<std::int64_t> counts;
    const Vec all = gather_row_blocks(dy, h, comms.tensor_expert, counts);
    Vec at_experts(s.local_slots.size() * std::size_t(h));
    for (std::size_t r = 0; r < s.local_slots.size(); ++r) {
        float* to = at_experts.data() + std::int64_t(r) * h;
        if (s.local_slots[r] == kPaddingSlot)
            std::fill_n(to, h, 0.0f);
        else
            std::copy_n(all.data() + (s.local_slots[r] / K) * h, h, to);
    }
    return at_experts;
}

void GptChunk::moe_gather_return(Layer& L, const Vec& ret, Vec& d_in, Vec& d_gate,
                                 const ChunkComms& comms) const {
    const std::int64_t K = top_k_, N = shape_.rows, h = shape_.hidden, width = h + K;
    const MoeState& s = L.moe;
    // Per gathered token: its input gradient and its k routing weights' (zero where another
    // rank's expert or none took the slot).
    Vec sums(static_cast<std::size_t>(total_rows(s.gathered_rows) * width), 0.0f);
    for (std::size_t r = 0; r < s.local_slots.size(); ++r) {
        if (s.local_slots[r] == kPaddingSlot) continue;
        const std::int64_t token = s.local_slots[r] / K, j = s.local_slots[r] % K;
        float* to = sums.data() + token * width;
        const float* d = ret.data() + std::int64_t(r) * (h + 1);
        for (std::int64_t c = 0; c < h; ++c) to[c] += d[c];
        to[h + j] += d[h];
    }
    const Vec mine = reduce_scatter_row_blocks(sums, s.gathered_rows, width, comms.tensor_expert);
    for (std::int64_t n = 0; n < N; ++n) {
        for (std::int64_t c = 0; c < h; ++c)
            d_in[std::size_t(n * h + c)] += mine[std::size_t(n * width + c)];
        for (std::int64_t j = 0; j < K; ++j)
            d_gate[std::size_t(n * K + j)] = mine[std::size_t(n * width + h + j)];
    }
}

} // namespace trident::executor
