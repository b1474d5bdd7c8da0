#pragma once
// Where one layer's time goes: every operation of a dense and of an MoE layer (and the
// embedding and the loss head) on the first pipeline rank's placement, with its shape, its
// seconds for one micro-batch and the rate it runs at — the table behind `simulate
// --layer-ops`, so a user can see which GEMM, kernel or collective makes a layout slow.
#include "trident/core/job.h"
#include "trident/core/profile.h"
#include "trident/simulator/layer_ops.h"

#include <iosfwd>
#include <string>
#include <vector>

namespace trident::simulator {

struct OpTime {
    Op op;
    double seconds = 0.0; // every repetition, one micro-batch
};

struct LayerBreakdown {
    std::string title; // "layer 3 (MoE)", "embedding", "loss head"
    std::vector<OpTime> ops;
    double total_s() const;
    double phase_s(Phase phase) const;
};

// One breakdown per distinct kind of layer the model has (the first dense layer, the first
// MoE layer), then the embedding, the loss head and each multi-token-prediction module; each
// layer with the plan's recomputation of a chunk's first layer and its own FP8 recipe.
std::vector<LayerBreakdown> layer_breakdowns(const core::JobSpec& job,
                                             const core::Profile& profile);

void print_layer_breakdowns(const std::vector<LayerBreakdown>& breakdowns, std::ostream& out);

} // namespace trident::simulator
