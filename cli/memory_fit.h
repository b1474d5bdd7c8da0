#pragma once
// simulate and validate refuse a layout whose busiest stage does not fit in device memory
// (exit 3, one line), unless --allow-oom asks for the report anyway.
#include "trident/core/spec_error.h"
#include "trident/core/units.h"
#include "trident/simulator/memory.h"
#include "trident/simulator/simulate.h"

#include <cstdio>
#include <string>
#include <vector>

namespace trident::cli {

// `stages`: each pipeline stage's memory (stage = index); `capacity_bytes`: the device's.
inline void require_fits(const std::vector<simulator::StageMemory>& stages, double capacity_bytes) {
    std::size_t worst = 0;
    for (std::size_t s = 0; s < stages.size(); ++s)
        if (stages[s].total_bytes() > stages[worst].total_bytes()) worst = s;
    if (stages.empty() || stages[worst].total_bytes() <= capacity_bytes) return;
    const simulator::StageMemory& m = stages[worst];
    const core::Unit unit = core::byte_unit(m.total_bytes());
    const auto in = [&](double bytes) {
        char text[32];
        std::snprintf(text, sizeof text, "%.1f", bytes / unit.scale);
        return std::string(text);
    };
    int over = 0;
    for (const auto& s : stages) over += s.total_bytes() > capacity_bytes;
    char share[16];
    std::snprintf(share, sizeof share, "%.0f %%", 100.0 * m.total_bytes() / capacity_bytes);
    throw core::OutOfMemoryError(
        "memory",
        "stage " + std::to_string(worst) + " needs " + in(m.total_bytes()) + " " + unit.name +
            ", " + share + " of the device's " + in(capacity_bytes) + " " + unit.name +
            " (weights " + in(m.weights_bytes) + ", gradients " + in(m.gradients_bytes) +
            ", optimizer " + in(m.optimizer_bytes) + ", activations " +
            in(m.activations_bytes + m.backward_working_bytes) + ", buffers " +
            in(m.buffers_bytes + m.gathered_bytes) + ", allocator reserve " +
            in(m.allocator_reserve_bytes) + ", context and NCCL/DeepEP buffers " +
            in(m.runtime_bytes) + ")" +
            (over > 1 ? "; " + std::to_string(over) + " stages do not fit" : std::string()) +
            "; `trident plan` finds layouts that fit, --allow-oom prints the report anyway");
}

inline void require_fits(const simulator::Report& r) {
    std::vector<simulator::StageMemory> stages;
    for (const auto& s : r.stages) stages.push_back(s.memory);
    require_fits(stages, r.memory_capacity_bytes);
}

} // namespace trident::cli
