// An MoE block's operations: the router (Shazeer et al. 2017; Fedus et al. 2022 load-balancing
// loss; Zoph et al. 2022 z-loss), the token exchange of Megatron-Core's dispatchers (Lepikhin
// et al. 2021 all-to-all; DeepEP for flex), the experts as grouped GEMMs, and shared experts.
#include "op_builder.h"

#include <cmath>

namespace trident::simulator::detail {
namespace {

// What one MoE layer's token exchange moves on this rank: the hidden states it routes
// (norm_tokens × hidden), the routed copies its experts take (the tp group's tokens × top-k
// times the busiest rank's load: capacity-capped or padded, core::MoeSpec::expert_load), and
// that factor.
struct Exchange {
    double rank_bytes = 0, received_bytes = 0, norm_tokens = 0, load = 1;
};

// Dispatch (its forward, and its gradient in the backward) or, `combine`, the way back, as
// Megatron-Core's token dispatchers move the tokens.
void token_exchange(Builder& b, const core::MoeSpec& e, const LayerView& v, const Exchange& x,
                    bool combine) {
    const std::string_view name = combine ? "combine" : "dispatch";
    const auto both = [&](Collective forward, Collective backward, GroupKind g, double bytes,
                          double domain_copy_bytes = 0.0) {
        b.collective(name, forward, g, bytes, Phase::forward, domain_copy_bytes);
        b.collective(name, backward, g, bytes, Phase::backward_input, domain_copy_bytes);
    };
    const auto gather = combine ? Collective::reduce_scatter : Collective::all_gather;
    const auto scatter = combine ? Collective::all_gather : Collective::reduce_scatter;
    switch (v.dispatcher) {
    case core::TokenDispatcher::allgather:
        // The etp·ep group gathers every token's hidden state — and its routing map and
        // probabilities, a byte and four per expert — and keeps what its experts take; combine
        // reduce-scatters the outputs back.
        both(gather, scatter, GroupKind::tensor_expert, x.rank_bytes * double(v.etp * v.ep));
        if (!combine)
            b.collective("routing map", Collective::all_gather, GroupKind::tensor_expert,
                         x.norm_tokens * double(e.num_experts) * 5.0 * double(v.etp * v.ep),
                         Phase::forward);
        return;
    case core::TokenDispatcher::alltoall:
        // Each routed copy crosses the ep group; the expert-tp ranks all-gather what arrived.
        if (v.ep > 1)
            both(Collective::all_to_all, Collective::all_to_all, GroupKind::expert,
                 x.rank_bytes * double(e.top_k) * x.load);
        if (v.etp > 1) both(gather, scatter, GroupKind::expert_tensor, x.received_bytes);
        return;
    case core::TokenDispatcher::flex: {
        // DeepEP: one fused all-to-all over etp·ep that sends a token once to each rank holding
        // any of its experts (every expert-tp rank of an expert's ep rank takes it), its top-k
        // probabilities (fp32). Across NVLink domains a token crosses the network once per
        // destination domain and is forwarded inside it (the cost model counts the domains).
        const double scale = x.load;
        const double probabilities = x.norm_tokens * double(e.top_k) * 4.0;
        both(Collective::all_to_all, Collective::all_to_all, GroupKind::tensor_expert,
             (x.rank_bytes * double(v.etp) * e.expected_destinations(v.ep) + probabilities) * scale,
             (x.rank_bytes + probabilities) * scale);
        return;
    }
    }
}

} // namespace

void moe(Builder& b, const core::ModelSpec& m, const LayerView& v, std::int64_t tokens,
         std::int64_t norm_tokens) {
    const core::MoeSpec& e = *m.moe;
    const std::int64_t h = m.hidden_size;
    b.linear("router", norm_tokens, e.num_experts, h, /*bf16=*/true);
    // The router's fp32 tokens × experts scores: softmax; top-k (its backward scatters the k
    // gradients back into a tokens × experts tensor); the load-balancing loss when weighted
    // (Fedus et al. 2022, Switch Transformer: the scores summed per expert, their gradient
    // broadcast back); the z-loss when weighted (Zoph et al. 2022, ST-MoE: each token's
    // logsumexp squared, its gradient tokens × experts). Megatron-Core runs each as its own
    // memory-bound kernel.
    const double scores_b = double(norm_tokens) * double(e.num_experts) * 4.0;
    const double chosen_b = double(norm_tokens) * double(e.top_k) * (4.0 + 8.0); // prob, index
    b.memory("router softmax", MemoryKernel::elementwise, 2 * scores_b, 2 * scores_b);
    b.memory("router top-k", MemoryKernel::elementwise, scores_b + chosen_b,
             scores_b + double(norm_tokens) * double(e.top_k) * 4.0);
    if (e.aux_loss_coeff > 0)
        b.memory("router aux loss", MemoryKernel::elementwise, scores_b, scores_b);
    if (e.z_loss_coeff > 0)
        b.memory("router z-loss", MemoryKernel::elementwise, scores_b, 2 * scores_b);
    // Token copies routed to experts: the busiest expert-parallel rank receives `load` times
    // the mean — moe.load_balance's, each expert capped at a capacity factor when one is set,
    // or exactly the factor when padded to it.
    const double copies = routed_copies(e, v);
    const Exchange x{.rank_bytes = double(norm_tokens) * double(h) * element_bytes(m),
                     .received_bytes = copies * double(h) * element_bytes(m),
                     .norm_tokens = double(norm_tokens),
                     .load = e.expert_load(v.ep)};
    // alltoall sorts its own copies before sending them; the others sort what they received.
    const double permuted = v.dispatcher == core::TokenDispatcher::alltoall
                                ? x.rank_bytes * double(e.top_k)
                                : x.received_bytes;
    b.memory("permute", MemoryKernel::elementwise, 2 * permuted, 2 * permuted);
    token_exchange(b, e, v, x, false);
    // The ep ranks together receive ep·tokens·top_k copies, spread over the num_experts
    // experts, num_experts/ep of them local, times the busiest rank's load. The local experts
    // run as one grouped GEMM (Megatron-Core --moe-grouped-gemm), timed at its per-expert
    // shape: few tokens per expert is what makes fine-grained experts slow.
    const std::int64_t local_experts = e.num_experts / v.ep;
    const auto per_expert = std::int64_t(std::ceil(copies / double(local_experts)));
    mlp(b, m, v, "expert fc1", "expert fc2", "expert activation", per_expert,
        e.expert_ffn_hidden_size, v.etp, local_experts, core::RecomputeModule::moe_act);
    token_exchange(b, e, v, x, true);
    b.memory("unpermute", MemoryKernel::elementwise, 2 * permuted, 2 * permuted);
    if (e.shared_expert_ffn_hidden_size > 0) {
        const RecomputedModule shared(b, v, core::RecomputeModule::shared_experts);
        const double act = double(tokens) * double(h) * element_bytes(m);
        b.enter_tp("shared expert input", act);
        mlp(b, m, v, "shared fc1", "shared fc2", "shared activation", tokens,
            e.shared_expert_ffn_hidden_size, v.tp);
        b.leave_tp("shared expert out", act);
    }
}

} // namespace trident::simulator::detail
