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
    const std::int64_t row0 = sp_ ? tp_rank_ * Nl_ : 0;
    const auto& position = positions_[std::size_t(cp_rank_)];
    std::vector<std::uint64_t> keys(static_cast<std::size_t>(Nl_));
    for (std::int64_t n = 0; n < Nl_; ++n) {
        const std::int64_t row = row0 + n;
        keys[std::size_t(n)] =
            k::dropout_key(k::dropout_key(site_key, std::uint64_t(a.first_sample + row / T_)),
                           std::uint64_t(position[std::size_t(row % T_)]));
    }
    k::dropout_rows(x.data(), Nl_, h_, keys.data(), kDropoutProbability);
}

std::vector<std::uint64_t> GptChunk::attention_dropout_keys(std::int64_t layer,
                                                            const Activations& a) const {
    // One key per (sequence, head, query): the head's global index, the query's position.
    const std::uint64_t site_key =
        k::dropout_key(k::dropout_key(seed_, attention_probs), std::uint64_t(layer + 1));
    const auto& position = positions_[std::size_t(cp_rank_)];
    std::vector<std::uint64_t> keys(static_cast<std::size_t>(B_ * Hl_ * T_));
    for (std::int64_t b = 0; b < B_; ++b)
        for (std::int64_t h = 0; h < Hl_; ++h) {
            const std::uint64_t head_key =
                k::dropout_key(k::dropout_key(site_key, std::uint64_t(a.first_sample + b)),
                               std::uint64_t(tp_rank_ * Hl_ + h));
            for (std::int64_t t = 0; t < T_; ++t)
                keys[std::size_t((b * Hl_ + h) * T_ + t)] =
                    k::dropout_key(head_key, std::uint64_t(position[std::size_t(t)]));
        }
    return keys;
}

void GptChunk::attention_forward(Layer& L, Communicator& cp) const {
    const std::int64_t W = (Hl_ + 2 * KVl_) * D_;
    L.att.resize(std::size_t(N_ * Hl_ * D_));
    const k::AttentionDropout dropout{kDropoutProbability, L.attention_keys.data()};
    const k::AttentionDropout* drop = L.attention_keys.empty() ? nullptr : &dropout;
    if (flash_)
        L.lse.resize(std::size_t(B_ * Hl_ * T_));
    else
        L.probs.resize(std::size_t(B_ * Hl_ * T_ * (cp_ == 1 ? T_ : seq_)));
    if (cp_ == 1) {
        if (flash_)
            k::flash_attention_forward(L.att.data(), L.lse.data(), L.qkv.data(), B_, T_, Hl_, KVl_,
                                       D_, drop);
        else
            k::attention_forward(L.att.data(), L.probs.data(), L.qkv.data(), B_, T_, Hl_, KVl_, D_,
                                 drop);
        return;
    }
    // Gather every context rank's keys and values, placed at their sequence positions.
    const std::int64_t KVW = 2 * KVl_ * D_;
    Vec mine(static_cast<std::size_t>(N_ * KVW));
    for (std::int64_t n = 0; n < N_; ++n)
        std::copy_n(L.qkv.data() + n * W + Hl_ * D_, KVW, mine.data() + n * KVW);
    Vec all(static_cast<std::size_t>(cp_ * N_ * KVW));
    cp.all_gather(mine.data(), all.data(), mine.size());
    L.kv.resize(std::size_t(B_ * seq_ * KVW));
    for (std::int64_t r = 0; r < cp_; ++r)
        for (std::int64_t b = 0; b < B_; ++b)
            for (std::int64_t t = 0; t < T_; ++t)
                std::copy_n(all.data() + ((r * B_ + b) * T_ + t) * KVW, KVW,
                            L.kv.data() +
                                (b * seq_ + positions_[std::size_t(r)][std::size_t(t)]) * KVW);
    const float* keys = L.kv.data();
    const float* values = L.kv.data() + KVl_ * D_;
    if (flash_)
        k::flash_attention_forward_rows(L.att.data(), Hl_ * D_, L.lse.data(), L.qkv.data(), W, keys,
                                        values, KVW, visible_.data(), B_, T_, seq_, Hl_, KVl_, D_,
                                        drop);
    else
        k::attention_forward_rows(L.att.data(), Hl_ * D_, L.probs.data(), L.qkv.data(), W, keys,
                                  values, KVW, visible_.data(), B_, T_, seq_, Hl_, KVl_, D_, drop);
}

void GptChunk::attention_backward(Layer& L, const Vec& d_att, Communicator& cp) const {
    const k::AttentionDropout dropout{kDropoutProbability, L.attention_keys.data()};
    const k::AttentionDropout* drop = L.attention_keys.empty() ? nullptr : &dropout;
    const std::int64_t W = (Hl_ + 2 * KVl_) * D_;
    L.d_qkv.assign(std::size_t(N_ * W), 0.0f);
    if (cp_ == 1) {
        if (flash_)
            k::flash_attention_backward(L.d_qkv.data(), d_att.data(), L.att.data(), L.qkv.data(),
                                        L.lse.data(), B_, T_, Hl_, KVl_, D_, drop);
        else
            k::attention_backward(L.d_qkv.data(), d_att.data(), L.qkv.data(), L.probs.data(), B_,
                                  T_, Hl_, KVl_, D_, drop);
        return;
    }
    const std::int64_t KVW = 2 * KVl_ * D_;
    Vec dkv(static_cast<std::size_t>(B_ * seq_ * KVW), 0.0f);
    const float* keys = L.kv.data();
    const float* values = L.kv.data() + KVl_ * D_;
    if (flash_)
        k::flash_attention_backward_rows(L.d_qkv.data(), dkv.data(), dkv.data() + KVl_ * D_,
                                         d_att.data(), L.att.data(), Hl_ * D_, L.qkv.data(), W,
                                         keys, values, KVW, L.lse.data(), visible_.data(), B_, T_,
                                         seq_, Hl_, KVl_, D_, drop);
    else
        k::attention_backward_rows(L.d_qkv.data(), dkv.data(), dkv.data() + KVl_ * D_, d_att.data(),
                                   Hl_ * D_, L.qkv.data(), W, keys, values, KVW, L.probs.data(),
                                   visible_.data(), B_, T_, seq_, Hl_, KVl_, D_, drop);
    // Each rank's key and value gradients, summed over the ranks whose queries used them.
    Vec blocks(static_cast<std::size_t>(cp_ * N_ * KVW));
    for (std::int64_t r = 0; r < cp_; ++r)
        for (std::int64_t b = 0; b < B_; ++b)
            for (std::int64_t t = 0; t < T_; ++t)
                std::copy_n(dkv.data() +
                                (b * seq_ + positions_[std::size_t(r)][std::size_t(t)]) * KVW,
                            KVW, blocks.data() + ((r * B_ + b) * T_ + t) * KVW);
    Vec mine(static_cast<std::size_t>(N_ * KVW));
    cp.reduce_scatter_sum(blocks.data(), mine.data(), mine.size());
    for (std::int64_t n = 0; n < N_; ++n)
        for (std::int64_t j = 0; j < KVW; ++j)
            L.d_qkv[std::size_t(n * W + Hl_ * D_ + j)] += mine[std::size_t(n * KVW + j)];
}

} // namespace trident::executor
