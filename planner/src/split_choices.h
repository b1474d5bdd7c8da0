#pragma once
// The pipeline splits the planner tries for one layout: the even split where the layers allow
// it, Megatron-Core's embedding-and-loss-counted split, and the split that balances the
// stages' cost (core::balanced_layout over simulator::pipeline_loads) — or only the split the
// user pinned.
#include "trident/core/job.h"
#include "trident/core/profile.h"
#include "trident/planner/planner.h"
#include "trident/simulator/cost_model.h"

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace trident::planner {

struct SplitChoice {
    // Written into the plan: the listed layout and the Megatron flags (empty/none: even).
    std::vector<std::int64_t> pipeline_layout;
    bool account_for_embedding = false, account_for_loss = false;
    std::optional<std::int64_t> first_stage_layers, last_stage_layers;
    std::string reason; // for --explain: which split, and the heaviest stage it gives
};

// Apply a choice to a plan (clearing any earlier split).
void apply(const SplitChoice& choice, core::ParallelPlan& plan);

class SplitChooser {
public:
    SplitChooser(const SearchSpace& space, const core::Profile& profile)
        : space_(space), profile_(profile) {}
    // The distinct splits to try for `job` (its plan's degrees set, no split yet).
    std::vector<SplitChoice> choices(const core::JobSpec& job);

private:
    const SearchSpace& space_;
    const core::Profile& profile_;
    // Per-layer loads depend on what shapes a layer's kernels, not on pp or dp.
    using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                           bool, bool>;
    std::map<Key, simulator::PipelineLoads> loads_;
    // The choices per (loads, pp, vpp), asked again for every schedule, dp and ZeRO setting.
    // By (key, pp, vpp, chunk placement): DualPipe splits over pp stages, V shapes over 2·pp.
    std::map<std::tuple<Key, std::int64_t, std::int64_t, int>, std::vector<SplitChoice>> choices_;
};

} // namespace trident::planner
