// The attention core of a GptChunk layer and its dropout masks: flash attention (the CPU
// kernels' tiled online softmax, one log-sum-exp saved per query row) when the plan says
// flash_attention — the default, as in Megatron-Core — else the unfused path that stores the
// s² probabilities. With context parallelism the keys and values of the whole sequence are
// all-gathered first and their gradients reduce-scattered back.
#include "trident/executor/gpt_chunk.h"
#include "trident/kernels/cpu.h"

namespace trident::executor {

namespace k = kernels::cpu;

// Megatron's default hidden_dropout and attention_dropout.
constexpr float kDropoutProbability = 0.1f;

void GptChunk::drop_rows(Vec& x, DropoutSite site, std::int64_t layer, const Activations& a) const {
    // Row n of this rank is row row0 + n of the micro-batch's B·T (its 1/tp of them under
    // sequence parallelism): sequence (row0 + n) / T, at its context rank's position.
    const std::uint64_t site_key =
        k::dropout_key(k::dropout_key(seed_, site), std::uint64_t(layer + 1));
    const std::int64_t row0 = sp_ ? tp_rank_ * shape_.rows : 0;
    const auto& position = positions_[std::size_t(cp_rank_)];
    std::vector<std::uint64_t> keys(static_cast<std::size_t>(shape_.rows));
    for (std::int64_t n = 0; n < shape_.rows; ++n) {
        const std::int64_t row = row0 + n;
        keys[std::size_t(n)] = k::dropout_key(
            k::dropout_key(site_key, std::uint64_t(a.first_sample + row / shape_.local_sequence)),
            std::uint64_t(position[std::size_t(row % shape_.local_sequence)]));
    }
    k::dropout_rows(x.data(), shape_.rows, shape_.hidden, keys.data(), kDropoutProbability);
}

std::vector<std::uint64_t> GptChunk::attention_dropout_keys(std::int64_t layer,
                                                            const Activations& a) const {
    // One key per (sequence, head, query): the head's global index, the query's position.
    const std::uint64_t site_key =
        k::dropout_key(k::dropout_key(seed_, attention_probs), std::uint64_t(layer + 1));
    const auto& position = positions_[std::size_t(cp_rank_)];
    std::vector<std::uint64_t> keys(
        static_cast<std::size_t>(shape_.micro_batch * shape_.local_heads * shape_.local_sequence));
    for (std::int64_t b = 0; b < shape_.micro_batch; ++b)
        for (std::int64_t h = 0; h < shape_.local_heads; ++h) {
            const std::uint64_t head_key =
                k::dropout_key(k::dropout_key(site_key, std::uint64_t(a.first_sample + b)),
                               std::uint64_t(tp_rank_ * shape_.local_heads + h));
            for (std::int64_t t = 0; t < shape_.local_sequence; ++t)
                keys[std::size_t((b * shape_.local_heads + h) * shape_.local_sequence + t)] =
                    k::dropout_key(head_key, std::uint64_t(position[std::size_t(t)]));
        }
    return keys;
}

void GptChunk::attention_forward(Layer& L, Communicator& cp) const {
    const std::int64_t W = (shape_.local_heads + 2 * shape_.local_kv_groups) * shape_.head_dim;
    L.att.resize(std::size_t(shape_.tokens * shape_.local_heads * shape_.head_dim));
    const k::AttentionDropout dropout{kDropoutProbability, L.attention_keys.data()};
    const k::AttentionDropout* drop = L.attention_keys.empty() ? nullptr : &dropout;
    if (flash_)
        L.lse.resize(std::size_t(shape_.micro_batch * shape_.local_heads * shape_.local_sequence));
    else
        L.probs.resize(std::size_t(shape_.micro_batch * shape_.local_heads * shape_.local_sequence *
                                   (cp_ == 1 ? shape_.local_sequence : seq_)));
    if (cp_ == 1) {
        if (flash_)
            k::flash_attention_forward(L.att.data(), L.lse.data(), L.qkv.data(), shape_.micro_batch,
                                       shape_.local_sequence, shape_.local_heads,
                                       shape_.local_kv_groups, shape_.head_dim, drop);
        else
            k::attention_forward(L.att.data(), L.probs.data(), L.qkv.data(), shape_.micro_batch,
                                 shape_.local_sequence, shape_.local_heads, shape_.local_kv_groups,
                                 shape_.head_dim, drop);
        return;
    }
    // Gather every context rank's keys and values, placed at their sequence positions.
    const std::int64_t KVW = 2 * shape_.local_kv_groups * shape_.head_dim;
    Vec mine(static_cast<std::size_t>(shape_.tokens * KVW));
    for (std::int64_t n = 0; n < shape_.tokens; ++n)
        std::copy_n(L.qkv.data() + n * W + shape_.local_heads * shape_.head_dim, KVW,
                    mine.data() + n * KVW);
    Vec all(static_cast<std::size_t>(cp_ * shape_.tokens * KVW));
    cp.all_gather(mine.data(), all.data(), mine.size());
    L.kv.resize(std::size_t(shape_.micro_batch * seq_ * KVW));
    for (std::int64_t r = 0; r < cp_; ++r)
        for (std::int64_t b = 0; b < shape_.micro_batch; ++b)
            for (std::int64_t t = 0; t < shape_.local_sequence; ++t)
                std::copy_n(
                    all.data() + ((r * shape_.micro_batch + b) * shape_.local_sequence + t) * KVW,
                    KVW,
                    L.kv.data() + (b * seq_ + positions_[std::size_t(r)][std::size_t(t)]) * KVW);
    const float* keys = L.kv.data();
    const float* values = L.kv.data() + shape_.local_kv_groups * shape_.head_dim;
    if (flash_)
        k::flash_attention_forward_rows(
            L.att.data(), shape_.local_heads * shape_.head_dim, L.lse.data(), L.qkv.data(), W, keys,
            values, KVW, visible_.data(), shape_.micro_batch, shape_.local_sequence, seq_,
            shape_.local_heads, shape_.local_kv_groups, shape_.head_dim, drop);
    else
        k::attention_forward_rows(
            L.att.data(), shape_.local_heads * shape_.head_dim, L.probs.data(), L.qkv.data(), W,
            keys, values, KVW, visible_.data(), shape_.micro_batch, shape_.local_sequence, seq_,
            shape_.local_heads, shape_.local_kv_groups, shape_.head_dim, drop);
}

void GptChunk::attention_backward(Layer& L, const Vec& d_att, Communicator& cp) const {
    const k::AttentionDropout dropout{kDropoutProbability, L.attention_keys.data()};
    const k::AttentionDropout* drop = L.attention_keys.empty() ? nullptr : &dropout;
    const std::int64_t W = (shape_.local_heads + 2 * shape_.local_kv_groups) * shape_.head_dim;
    L.d_qkv.assign(std::size_t(shape_.tokens * W), 0.0f);
    if (cp_ == 1) {
        if (flash_)
            k::flash_attention_backward(L.d_qkv.data(), d_att.data(), L.att.data(), L.qkv.data(),
                                        L.lse.data(), shape_.micro_batch, shape_.local_sequence,
                                        shape_.local_heads, shape_.local_kv_groups, shape_.head_dim,
                                        drop);
        else
            k::attention_backward(L.d_qkv.data(), d_att.data(), L.qkv.data(), L.probs.data(),
                                  shape_.micro_batch, shape_.local_sequence, shape_.local_heads,
                                  shape_.local_kv_groups, shape_.head_dim, drop);
        return;
    }
    const std::int64_t KVW = 2 * shape_.local_kv_groups * shape_.head_dim;
    Vec dkv(static_cast<std::size_t>(shape_.micro_batch * seq_ * KVW), 0.0f);
    const float* keys = L.kv.data();
    const float* values = L.kv.data() + shape_.local_kv_groups * shape_.head_dim;
    if (flash_)
        k::flash_attention_backward_rows(
            L.d_qkv.data(), dkv.data(), dkv.data() + shape_.local_kv_groups * shape_.head_dim,
            d_att.data(), L.att.data(), shape_.local_heads * shape_.head_dim, L.qkv.data(), W, keys,
            values, KVW, L.lse.data(), visible_.data(), shape_.micro_batch, shape_.local_sequence,
            seq_, shape_.local_heads, shape_.local_kv_groups, shape_.head_dim, drop);
    else
        k::attention_backward_rows(
            L.d_qkv.data(), dkv.data(), dkv.data() + shape_.local_kv_groups * shape_.head_dim,
            d_att.data(), shape_.local_heads * shape_.head_dim, L.qkv.data(), W, keys, values, KVW,
            L.probs.data(), visible_.data(), shape_.micro_batch, shape_.local_sequence, seq_,
            shape_.local_heads, shape_.local_kv_groups, shape_.head_dim, drop);
    // Each rank's key and value gradients, summed over the ranks whose queries used them.
    Vec blocks(static_cast<std::size_t>(cp_ * shape_.tokens * KVW));
    for (std::int64_t r = 0; r < cp_; ++r)
        for (std::int64_t b = 0; b < shape_.micro_batch; ++b)
            for (std::int64_t t = 0; t < shape_.local_sequence; ++t)
                std::copy_n(
                    dkv.data() + (b * seq_ + positions_[std::size_t(r)][std::size_t(t)]) * KVW, KVW,
                    blocks.data() +
                        ((r * shape_.micro_batch + b) * shape_.local_sequence + t) * KVW);
    Vec mine(static_cast<std::size_t>(shape_.tokens * KVW));
    cp.reduce_scatter_sum(blocks.data(), mine.data(), mine.size());
    for (std::int64_t n = 0; n < shape_.tokens; ++n)
        for (std::int64_t j = 0; j < KVW; ++j)
            L.d_qkv[std::size_t(n * W + shape_.local_heads * shape_.head_dim + j)] +=
                mine[std::size_t(n * KVW + j)];
}

} // namespace trident::executor
