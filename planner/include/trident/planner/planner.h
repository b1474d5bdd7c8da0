#pragma once
// The planner: enumerate parallel layouts of a model on a cluster, reject the impossible ones
// with their reasons, give each feasible layout the cheapest recomputation that fits the
// memory budget, bound its step time analytically, and simulate in full — in order of that
// bound — until no remaining layout can enter the top k. The top k are therefore exactly what
// simulating every candidate would rank first (tests check this against an exhaustive run).
#include "trident/core/job.h"
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trident::planner {

// Allowed values per dimension; an empty list means the planner's default set (docs/cli.md,
// `trident plan`).
struct SearchSpace {
    std::vector<std::int64_t> tp, pp, cp, ep, vpp, micro_batch;
    // Expert tensor-parallel degrees (MoE parallel folding). Empty: etp = tp, and for MoE
    // models with tp > 1 also etp 1 (experts whole, spread over the tp ranks too).
    std::vector<std::int64_t> etp;
    std::vector<core::ScheduleKind> schedules;
    std::vector<bool> sequence_parallel;     // empty: both where legal
    std::vector<bool> distributed_optimizer; // empty: both where legal
    // Data-parallel sharding strategies, pinned (with the replicas, FSDP implementation and
    // prefetch depth below). Empty, with distributed_optimizer not pinned either: the
    // distributed optimizer on and off and, for a layout
    // whose ZeRO-1 form needs recomputation or does not fit at all, ZeRO-2, ZeRO-3 sharded
    // inside a node (hybrid, replicated across nodes) and ZeRO-3 over every dp·cp rank — up to
    // the first that fits without recomputation (more sharding only adds communication).
    std::vector<core::DataSharding> sharding;
    std::optional<std::int64_t> optimizer_instances;
    core::FsdpImplementation fsdp = core::FsdpImplementation::megatron;
    std::int64_t fsdp_prefetch_units = 1;
    std::optional<core::Recompute> recompute; // pinned; nullopt: cheapest that fits
    bool allow_cross_node_tp = false;
    bool overlap = true; // overlap_grad_reduce, the param gather (ZeRO-1), tp_comm_overlap (SP)
    std::optional<bool> tp_comm_overlap; // pinned (with sequence parallelism); nullopt: `overlap`
    bool overlap_p2p_comm = true;        // Megatron's default (interleaved schedule only)
    // The MoE token dispatcher, pinned; nullopt: alltoall for every MoE layout, flex (DeepEP)
    // beside it where ep > 1, and allgather where the tp·ep group stays inside the NVLink
    // domain (across it, gathering every token everywhere cannot win).
    std::optional<core::TokenDispatcher> token_dispatcher;
    // MoE capacity factors to try (Megatron's --moe-expert-capacity-factor; nullopt: dropless),
    // each searched as its own model and ranked together. Empty: the model's own.
    std::vector<std::optional<double>> capacity_factors;
    // Megatron-Core's --overlap-moe-expert-parallel-comm, pinned; nullopt: `overlap` wherever
    // it applies (ep > 1, the alltoall or flex dispatcher).
    std::optional<bool> overlap_moe_expert_parallel_comm;
    std::optional<bool> moe_shared_expert_overlap; // pinned on/off; default: where it applies
    bool flash_attention = true;
    // Uneven pipeline stages, pinned (any given: only that split). None given: the planner
    // tries the even split, Megatron-Core's embedding-and-loss-counted split and the split
    // that balances the stages' cost, and keeps whichever simulates fastest.
    std::vector<std::int64_t> pipeline_layout;
    std::optional<std::int64_t> first_stage_layers, last_stage_layers;
    bool account_for_embedding = false, account_for_loss = false;
    // Precisions (FP8 recipes with their settings) to try; empty: BF16 and every FP8 recipe the
    // device profile runs (device.fp8_recipes), format hybrid.
    std::vector<core::Fp8> precisions;
    // What saves memory before recomputation or more sharding: where a layout would need
    // either, the planner first tries the FP8 (NVFP4) parameter gather — the quantized weight as
    // the parameter, gathered in its format — and Adam's moments in BF16 (Megatron's precision-
    // aware optimizer), each and both. False (--no-memory-savers): neither.
    bool memory_savers = true;
    // The moments' dtype was given (--exp-avg-dtype, even fp32): the planner keeps it.
    bool optimizer_dtype_pinned = false;
    bool split_pinned() const {
        return !pipeline_layout.empty() || first_stage_layers || last_stage_layers ||
               account_for_embedding || account_for_loss;
    }
};

struct Progress {
    std::string_view phase; // "memory" (checking layouts) or "simulate"
    std::int64_t done = 0;
    std::int64_t total = 0;
};

struct PlanOptions {
    double memory_budget_bytes = 0.0;
    std::size_t top_k = 10;
    std::size_t rejected_examples = 5;
    bool exhaustive = false; // simulate every feasible layout (no pruning): for verification
    std::function<void(const Progress&)> on_progress;
    const std::atomic<bool>* cancel = nullptr;
};

struct Candidate {
    core::JobSpec job;
    std::string recompute_reason;
    std::string split_reason;  // which pipeline split, and why
    std::string memory_savers; // the memory savers the layout took, and why; "" for none
    double step_time_s = 0.0;
    double tokens_per_s = 0.0;
    double tflops_per_device = 0.0;
    double mfu = 0.0;             // of the parameters' dtype peak (BF16)
    double mfu_fp8_peak = 0.0;    // of the FP8 peak (FP8 layouts; 0 otherwise)
    double bubble_fraction = 0.0; // largest over stages
    double peak_memory_bytes = 0.0;
    std::int32_t peak_stage = 0;
    std::int32_t cross_node_groups = 0; // group kinds (tp, cp, ep, dp, pp) spanning nodes
    // MoE: the busiest stage's token exchange over the step, the part of it left exposed (not
    // hidden by overlap), and the NVLink domains its exchange group spans.
    double moe_exchange_s = 0.0, moe_exposed_s = 0.0;
    std::int64_t moe_domains = 1;
};

// The group kinds (tp, cp, ep, dp·cp, pp) of `job` whose groups span NVLink domains.
std::int32_t cross_node_groups(const core::JobSpec& job);
// The ranking: faster first; equal times (within 1e-9) prefer less memory, then fewer group
// kinds across the slow fabric (so intra-node expert parallelism wins a tie).
bool ranks_before(const Candidate& a, const Candidate& b);

struct Rejection {
    core::ParallelPlan plan;
    std::string reason;
    double overrun_bytes = 0.0; // memory rejections: by how much the best recomputation misses
};

// Rejections of one kind: how many, and the first with its real values.
struct RejectionGroup {
    std::int64_t count = 0;
    std::string field, example; // the first such layout's refusal, real values and all
};

struct PlanResult {
    std::vector<Candidate> best; // fastest first (ties: less memory, fewer cross-node groups)
    // Per reason kind: the field and rule with every number written N ("parallel.vpp: num_layers
    // N must be divisible by pp·vpp = N"); names such as interleaved-1f1b keep their digits.
    std::map<std::string, RejectionGroup> rejections;
    std::vector<Rejection> closest_rejected; // memory rejections with the smallest overrun
    std::int64_t layouts = 0;                // enumerated
    std::int64_t feasible = 0;               // valid and within the budget
    std::int64_t simulated = 0;              // simulated in full
    // The least memory any over-budget layout needs at its most frugal recomputation (when
    // nothing fits, the least any valid layout needs) and which layout that is.
    double smallest_peak_bytes = 0.0;
    std::string smallest_layout;
    double seconds = 0.0;
    bool cancelled = false;
};

PlanResult plan(const core::JobSpec& specs, const core::Profile& profile, const SearchSpace& space,
                const PlanOptions& options);

// The tensor- and pipeline-parallel degrees the search tries: the space's pins, else every
// divisor of the devices up to the NVLink domain (tp) or one layer per stage (pp).
std::vector<std::int64_t> tensor_parallel_degrees(const core::JobSpec& specs,
                                                  const SearchSpace& space);
std::vector<std::int64_t> pipeline_parallel_degrees(const core::JobSpec& specs,
                                                    const SearchSpace& space);

// The kind a rejection groups under (see PlanResult::rejections), and its recording.
std::string rejection_kind(const std::string& field, const std::string& reason);
void record_rejection(PlanResult& result, const std::string& field, const std::string& reason);
// The rejection kinds, most frequent first: "parallel.vpp ×20: e.g. num_layers 4 must be …".
std::vector<std::string> rejection_lines(const PlanResult& result, std::size_t at_most);

// Why `result` holds no candidate, as the error to raise: nothing fits in the budget (field
// `budget_field`: the budget, the least any layout needs and which layout that is), or no
// layout is valid at all (field "cluster": the three commonest reasons with their counts).
core::SpecError why_no_candidate(const core::JobSpec& specs, const PlanResult& result,
                                 double memory_budget_bytes, const std::string& budget_field);

// The plan chosen, as a self-contained plan file with a "planner" record (predictions and why
// this recomputation).
core::Json plan_file(const Candidate& c, double memory_budget_bytes);
// The layout as Megatron-LM command-line arguments, with comments where Megatron differs.
// `launcher` "torchrun" or "srun" puts its command line (one process per GPU) in front.
std::string megatron_arguments(const core::JobSpec& job, const std::string& launcher = "");

} // namespace trident::planner
