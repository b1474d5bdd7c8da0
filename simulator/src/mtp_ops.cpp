// Multi-token prediction (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", §2.2; Megatron-
// Core's MultiTokenPredictionLayer): module k predicts token i + k + 1 from module k − 1's
// hidden state of token i (the decoder's for k = 1) and the embedding of token i + k. It looks
// the tokens up in the shared embedding, normalises both inputs (enorm, hnorm), projects their
// concatenation from 2h to h (column-parallel, its output gathered over the tensor ranks and
// scattered back to the sequence-parallel layout), runs one transformer layer — an MoE layer
// when the decoder's last is — and its own final norm, then the shared output head and loss.
#include "op_builder.h"

namespace trident::simulator {

using namespace detail;

LayerView mtp_view(const core::JobSpec& job, LayerView base, std::int64_t depth) {
    base.recompute = job.recompute_at(0);
    base.fp8 = job.layer_fp8(job.model.num_layers + depth);
    return base;
}

std::vector<Op> mtp_ops(const core::ModelSpec& m, const LayerView& v, std::int64_t padded_vocab,
                        std::int64_t depth) {
    std::vector<Op> ops = embedding_ops(m, v, padded_vocab); // the shifted tokens
    {
        Builder b{ops, v, v.recompute == core::RecomputeGranularity::full};
        const std::int64_t tokens = v.tokens();
        const double norm_tokens = double(v.sequence_parallel ? tokens / v.tp : tokens);
        const double h = double(m.hidden_size);
        norm(b, m, "mtp enorm", norm_tokens, h);
        norm(b, m, "mtp hnorm", norm_tokens, h);
        // The two normalised halves side by side: read both, write the 2h-wide input.
        const double halves = 2.0 * norm_tokens * h * element_bytes(m);
        b.memory("mtp concat", MemoryKernel::elementwise, 2 * halves, 2 * halves);
        const double act = double(tokens) * h * element_bytes(m);
        b.enter_tp("mtp eh input", 2 * act);
        b.linear("mtp eh proj", tokens, m.hidden_size / v.tp, 2 * m.hidden_size);
        if (v.tp > 1) {
            b.collective("mtp eh gather", Collective::all_gather, GroupKind::tensor, act,
                         Phase::forward);
            if (v.sequence_parallel) // the scatter back to sequence-parallel, reversed
                b.collective("mtp eh gather", Collective::all_gather, GroupKind::tensor, act,
                             Phase::backward_input);
        }
    }
    for (const std::vector<Op>& part :
         {layer_ops(m, v, m.num_layers + depth), head_ops(m, v, padded_vocab)})
        ops.insert(ops.end(), part.begin(), part.end());
    return ops;
}

} // namespace trident::simulator
