#pragma once
// The planner's first phase: for a range of enumerated layouts, each pipeline split and
// precision, the validity check, the cheapest recomputation that fits the memory budget and a
// lower bound on the step time. One checker per thread, each with its own caches (layer
// costs, stage parameters, in-flight counts, splits), so two checkers can split the layouts.
#include "split_choices.h"
#include "trident/core/job.h"
#include "trident/core/profile.h"
#include "trident/planner/planner.h"
#include "trident/simulator/cost_model.h"
#include "trident/simulator/memory.h"

#include <atomic>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

namespace trident::planner {

std::string describe(const core::ParallelPlan& p);

struct Peak {
    double bytes = 0.0;
    std::int32_t stage = 0;
};

inline Peak peak_of(const std::vector<simulator::StageMemory>& stages) {
    Peak p;
    for (std::size_t s = 0; s < stages.size(); ++s)
        if (stages[s].total_bytes() > p.bytes) p = {stages[s].total_bytes(), std::int32_t(s)};
    return p;
}

// Schedules' in-flight counts depend only on (kind, p, v, m): computed once each.
class InFlightCache {
public:
    const std::vector<core::InFlight>& get(const core::ParallelPlan& p, std::int32_t m) {
        const auto key = std::make_tuple(int(p.schedule), p.pp, p.vpp, m);
        auto it = cache_.find(key);
        if (it == cache_.end())
            it = cache_
                     .emplace(key, simulator::in_flight_per_rank(core::make_schedule(
                                       p.schedule, std::int32_t(p.pp), std::int32_t(p.vpp), m)))
                     .first;
        return it->second;
    }

private:
    std::map<std::tuple<int, std::int64_t, std::int64_t, std::int32_t>, std::vector<core::InFlight>>
        cache_;
};

// A stage's parameters depend on tp, ep, etp and which layers it holds (the split and the
// schedule's placement of chunks), not on the batch or the optimizer: once per split.
class ParameterCache {
public:
    const std::vector<simulator::StageParameters>& get(const core::JobSpec& job) {
        const core::ParallelPlan& p = job.plan;
        auto key =
            std::make_tuple(p.tp, p.ep, p.expert_tp(), p.pp, p.vpp,
                            int(core::placement_of(p.schedule)), job.pipeline_split().layers,
                            p.fp8.enabled(), p.fp8.bf16_layers_at_start, p.fp8.bf16_layers_at_end);
        auto it = cache_.find(key);
        if (it == cache_.end())
            it = cache_.emplace(std::move(key), simulator::parameters_per_stage(job)).first;
        return it->second;
    }

private:
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int,
                        std::vector<std::int64_t>, bool, std::int64_t, std::int64_t>,
             std::vector<simulator::StageParameters>>
        cache_;
};

// One split and precision class's stage memory by recomputation. The activations do not
// depend on the data-parallel sharding or the memory savers: a sharding or saver variant of a
// layout already seen re-derives only its weights, gradients and optimizer state
// (simulator::sharded_state, the one place the quantized parameter gather and the moments'
// dtype change memory).
class StageMemoryCache {
public:
    Peak peak(const core::JobSpec& job, const std::vector<core::InFlight>& flights,
              const std::vector<simulator::StageParameters>& parameters);

private:
    struct Entry {
        bool distributed_optimizer = false, param_gather = false;
        core::Dtype moments = core::Dtype::fp32;
        core::Sharding sharding;
        std::vector<simulator::StageMemory> stages;
    };
    std::map<std::tuple<int, int, std::int64_t, std::uint32_t>, Entry> entries_;
};

// BF16 and each FP8 recipe the device runs, unless the user pinned the precision.
inline std::vector<core::Fp8> precisions_to_try(const SearchSpace& space,
                                                const core::Profile& profile) {
    if (!space.precisions.empty()) return space.precisions;
    std::vector<core::Fp8> out(1); // BF16 (the parameters' dtype)
    for (std::size_t r = 1; r < core::kFp8RecipeNames.size(); ++r)
        if (profile.fp8_gemm_rate(std::string(core::kFp8RecipeNames[r])) > 0) {
            core::Fp8 f;
            f.recipe = static_cast<core::Fp8Recipe>(r);
            out.push_back(f);
        }
    return out;
}

// Why a layout got its recomputation: the peaks the choice was made from, written out only
// for the candidates shown.
struct RecomputeWhy {
    bool pinned = false;
    Peak none, selective, fit; // without, selective, and the chosen one
    Peak modules;              // selective with the light modules (MoE/MLA models), if tried
    double budget = 0.0;
    std::int64_t per_chunk = 0;
    std::string text(const core::Recompute& chosen) const;
};

struct Feasible {
    core::JobSpec job;
    RecomputeWhy recompute_why;
    std::string split_reason;
    std::string memory_savers; // the savers taken (SearchSpace::memory_savers), "" for none
    Peak peak;
    double lower_bound_s = 0.0;
};

// What one checker found over its range: the feasible layouts in enumeration order, and the
// rejections, closest misses and counts (in a PlanResult, merged by plan()).
struct CheckedLayouts {
    std::vector<Feasible> feasible;
    PlanResult result;
};

// A memory saver a layout may take before it recomputes or shards more
// (SearchSpace::memory_savers): the quantized parameter gather, BF16 Adam moments, or both.
struct MemorySaver {
    bool param_gather = false, bf16_moments = false;
    int code() const { return int(param_gather) + 2 * int(bf16_moments); }
    // What it takes, for --explain and the plan file's "planner" object ("" for none).
    std::string text(const core::Fp8& precision) const;
};

// One memory verdict: the FP8 recipes hold the same bytes, so one per (sharding, saver) serves
// them all.
struct MemoryVerdict {
    bool known = false, fits = false;
    core::Recompute recompute;
    RecomputeWhy why;
    Peak peak;
};

class LayoutChecker {
public:
    LayoutChecker(const core::JobSpec& specs, const core::Profile& profile,
                  const SearchSpace& space, const PlanOptions& options);
    // Checks layouts[begin, end) into `out`; `progress` (may be empty) is called now and then.
    void check(const std::vector<core::ParallelPlan>& layouts, std::size_t begin, std::size_t end,
               CheckedLayouts& out, const std::function<void(const Progress&)>& progress);

    InFlightCache& in_flight() { return in_flight_; }
    ParameterCache& parameters() { return parameters_; }
    simulator::LayerCostCache& layer_costs() { return layer_costs_; }

private:
    // One split of a layout, validated: each precision, each sharding variant.
    void check_split(const core::JobSpec& split_job, const std::string& split_reason,
                     CheckedLayouts& out);
    // One (precision, sharding variant) of a split: the savers in the order they are tried;
    // true when it fits without recomputation (more sharding would only cost time).
    bool check_variant(core::JobSpec& job, const core::ParallelPlan& variant,
                       const core::Fp8& precision, const std::string& split_reason,
                       StageMemoryCache& memory, MemoryVerdict* shared_verdicts,
                       CheckedLayouts& out);
    // The memory savers tried for `variant`, none first.
    std::vector<MemorySaver> savers_for(const core::Fp8& precision,
                                        const core::ParallelPlan& variant) const;
    // The layout, then — for an unpinned ZeRO-1 layout — the more sharded forms the planner
    // escalates to while memory stays tight (SearchSpace::sharding).
    std::vector<core::ParallelPlan> sharding_variants(const core::ParallelPlan& p) const;
    core::TokenDispatcher best_dispatcher(const core::JobSpec& job);
    // Whether Transformer Engine's userbuffer overlap makes the layout's layers faster (it
    // cuts each GEMM into pieces: at small shapes it loses); unless pinned. Once per shape.
    bool tp_overlap_pays(const core::JobSpec& job);
    // Turns on the MoE all-to-all overlap where Megatron-Core runs it, else the shared-expert
    // overlap where that applies (each unless pinned off or --no-overlap).
    void set_moe_overlaps(core::ParallelPlan& p) const;

    const core::JobSpec& specs_;
    const core::Profile& profile_;
    const SearchSpace& space_;
    const PlanOptions& options_;
    InFlightCache in_flight_;
    ParameterCache parameters_;
    simulator::LayerCostCache layer_costs_;
    std::map<std::array<std::int64_t, 9>, core::TokenDispatcher> dispatchers_; // by layer shape
    std::map<std::array<std::int64_t, 8>, bool> tp_overlaps_;                  // by layer shape
    SplitChooser splits_;
    std::vector<core::Fp8> precisions_;
};

} // namespace trident::planner
