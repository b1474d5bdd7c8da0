#pragma once
// Exact parameter counts of a ModelSpec, by component, so the memory model can shard each part
// the way Megatron does (attention and MLP over tp·pp, norms over pp, experts over ep·pp, the
// embedding on the first stage and the output layer on the last).
#include "trident/core/model_spec.h"

#include <cstdint>

namespace trident::core {

// Parameters of one transformer layer, by part.
struct LayerParameters {
    std::int64_t attention = 0;       // QKV (or MLA projections) and output projection, biases
    std::int64_t attention_norms = 0; // MLA's internal q/kv norms
    std::int64_t layer_norms = 0;     // the two pre-norms
    std::int64_t dense_mlp = 0;       // dense FFN (0 in an MoE layer)
    std::int64_t router = 0;          // MoE gate
    std::int64_t shared_experts = 0;  // always-active experts (DeepSeekMoE)
    std::int64_t routed_experts = 0;  // all routed experts of the layer
    std::int64_t one_expert = 0;      // a single routed expert

    std::int64_t total() const;
    // Parameters a token touches: routed experts counted at top_k.
    std::int64_t active(std::int64_t top_k) const;
};

LayerParameters layer_parameters(const ModelSpec& m, std::int64_t layer);

struct ParameterCounts {
    std::int64_t word_embedding = 0;
    std::int64_t position_embedding = 0;
    std::int64_t layers_total = 0;  // all transformer layers
    std::int64_t layers_active = 0; // routed experts at top_k
    std::int64_t routed_experts = 0;
    std::int64_t final_norm = 0;
    std::int64_t output_layer = 0; // 0 when tied to the word embedding
    // Multi-token-prediction modules (norms, projection, layer; they share the embedding and
    // head): not in total(), as papers count the main model (DeepSeek-V3's 671 B).
    std::int64_t mtp = 0;

    std::int64_t total() const;
    std::int64_t active() const;
};

// Counts with the model's own (unpadded) vocabulary: the figure papers publish.
ParameterCounts count_parameters(const ModelSpec& m);

} // namespace trident::core
