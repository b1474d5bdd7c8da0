#pragma once
// FLOPs of one training step, summed from the same operation list the cost model times.
// Model FLOPs count each GEMM and attention core three times (forward, input and weight
// gradients), with the full s² attention as Narayanan et al. 2021 and Megatron-LM's
// `num_floating_point_operations` do (dense GPT: 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))).
// Hardware FLOPs add what recomputation repeats (full: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))).
#include "trident/core/job.h"

namespace trident::simulator {

struct StepFlops {
    double model = 0.0;
    double hardware = 0.0;
};

StepFlops step_flops(const core::JobSpec& job);

} // namespace trident::simulator
